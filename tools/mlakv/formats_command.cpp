// SPDX-License-Identifier: Apache-2.0
// `mlakv formats`: the registry as a table with each format's engine names;
// --fields adds each format's token geometry, page layout and byte map.
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <string>

#include "commands.h"
#include "formats_json.h"
#include "mlakv/formats.h"

namespace mlakv::tool {
namespace {

// "nvfp4_ds_mla (B12X backend, KV_FP8_ROPE=1)": the kv_cache_dtype strings engines use for this record.
std::string engine_names(const FormatInfo& info) {
  std::string text;
  for (const EngineName& n : info.engine_names) {
    text += fmt::format("{}{} ({})", text.empty() ? "" : "; ", n.kv_cache_dtype, n.engine);
  }
  return text.empty() ? "-" : text;
}

// "token-major: block_size x 656 B records" or the regions of a block-planar page.
std::string page_layout(const FormatInfo& info) {
  if (info.page.kind == PageKind::kTokenMajor) {
    return fmt::format("token-major: block_size x {} B records", info.page.data_row_bytes);
  }
  return fmt::format(
      "block-planar: block_size x {} B data rows, then block_size x {} B scale rows, padded to a multiple of {} B "
      "(64 tokens: {} B)",
      info.page.data_row_bytes, info.page.scale_row_bytes, info.page.page_multiple, page_bytes(info, 64));
}

void print_formats(bool fields) {
  // Columns as wide as their longest entry, so no row shifts the ones after it.
  std::size_t id_width = 6;
  std::size_t layout_width = 6;
  for (const FormatInfo& info : formats()) {
    id_width = std::max(id_width, info.id.size());
    layout_width = std::max(layout_width, info.layout.size());
  }
  fmt::print("{:<{}} {:>5}  {:<{}} {}\n", "format", id_width, "bytes", "layout", layout_width, "source");
  for (const FormatInfo& info : formats()) {
    fmt::print("{:<{}} {:>5}  {:<{}} {}\n", info.id, id_width, info.record_bytes, info.layout, layout_width,
               info.source);
    fmt::print("    engine names: {}\n", engine_names(info));
    if (!fields) continue;
    fmt::print("    token: {} NoPE + {} RoPE values, V = {}\n", info.geometry.nope_dims, info.geometry.rope_dims,
               info.geometry.v_includes_rope ? "NoPE ++ RoPE" : "NoPE");
    fmt::print("    page: {}\n", page_layout(info));
    for (const FieldInfo& f : info.fields) {
      fmt::print("    {:<6} [{:>4}, {:>4})  {:<14} {:<6} {}\n", f.region == kDataRegion ? "data" : "scale", f.offset,
                 f.offset + f.bytes, f.name, f.element, f.contents);
    }
  }
}

}  // namespace

void add_formats_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("formats", "List the record formats: id, bytes, layout, engine names");
  auto fields = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--fields", *fields, "Also print each format's token geometry, page layout and fields");
  cmd->add_flag("--json", *json, "Print every format's registry entry as JSON (as mlakv.formats() in Python)");
  cmd->callback([fields, json] {
    if (*json) {
      fmt::print("{}", formats_json());
    } else {
      print_formats(*fields);
    }
  });
}

}  // namespace mlakv::tool
