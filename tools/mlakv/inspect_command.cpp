// SPDX-License-Identifier: Apache-2.0
// `mlakv inspect`: decodes one token of a raw cache dump and prints its
// fields, each found by the registry's field_offset in the token's page: the
// tool to reach for when two engines disagree about bytes.
#include <cuda_fp8.h>
#include <fmt/core.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "files.h"
#include "mlakv/error.h"
#include "mlakv/formats.h"
#include "mlakv/readers.h"
#include "mlakv_support/json_text.h"

namespace mlakv::tool {
namespace {

struct InspectOptions {
  std::string format;
  int record_bytes = 0;
  bool fp8_rope = false;
  bool per_token_scale = false;
  std::string cache;
  std::int64_t block_size = 0;
  std::int64_t slot = 0;
  float scale = 1.0f;
  std::string rope_dtype = "bf16";
  int values = 8;
  bool json = false;
};

std::string hex(const std::uint8_t* bytes, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += fmt::format("{}{:02x}", i ? " " : "", bytes[i]);
  return out;
}

float e4m3(std::uint8_t code) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3)));
}

std::string list(const std::vector<float>& values, int n) {
  std::string out;
  for (int i = 0; i < n && i < static_cast<int>(values.size()); ++i)
    out += fmt::format("{}{:.6g}", i ? ", " : "", values[i]);
  return out;
}

// The row a field's FieldInfo::offset counts from: the token's record (token-major pages), or
// its data or scale row (block-planar pages).
const char* row_name(const FormatInfo& info, const FieldInfo& f) {
  if (info.page.kind == PageKind::kTokenMajor) return "record";
  return f.region == kScaleRegion ? "scale row" : "data row";
}

// One line a field: its bytes in the page, the same bytes in its row (two
// ranges, each labelled, neither added to the other), and what it holds, read
// as its element type says: f32, E4M3 or UE8M0 scales, zero padding, or bytes.
void print_field(const FormatInfo& info, const FieldInfo& f, const std::uint8_t* bytes, std::int64_t page_offset,
                 int values) {
  const std::string name(f.name);
  std::string shown;
  if (f.element == "UE8M0") {
    std::vector<float> v(static_cast<std::size_t>(f.bytes));
    for (int i = 0; i < f.bytes; ++i) v[i] = bytes[i] == 0xFF ? NAN : std::ldexp(1.0f, bytes[i] - 127);
    shown = "UE8M0 " + list(v, values) + (f.bytes > values ? ", ..." : "");
  } else if (f.element == "zero") {
    int nonzero = 0;
    for (int i = 0; i < f.bytes; ++i) nonzero += bytes[i] != 0;
    shown = nonzero == 0 ? "all zero (ok)" : fmt::format("NOT zero: {} of {} bytes set", nonzero, f.bytes);
  } else if (name.find("scale") != std::string::npos && std::string(f.contents).find("f32") != std::string::npos) {
    std::vector<float> v(static_cast<std::size_t>(f.bytes / 4));
    std::memcpy(v.data(), bytes, v.size() * 4);
    shown = "f32 " + list(v, values);
  } else if (name.find("scale") != std::string::npos) {
    std::vector<float> v(static_cast<std::size_t>(f.bytes));
    for (int i = 0; i < f.bytes; ++i) v[i] = e4m3(bytes[i]);
    shown = "E4M3 " + list(v, values) + (f.bytes > values ? ", ..." : "");
  } else {
    shown = hex(bytes, std::min(f.bytes, 16)) + (f.bytes > 16 ? " ..." : "");
  }
  fmt::print("  page [{:>6}, {:>6})  {:<9} [{:>4}, {:>4})  {:<14} {:<44} {}\n", page_offset, page_offset + f.bytes,
             row_name(info, f), f.offset, f.offset + f.bytes, f.name, f.contents, shown);
}

// Numbers as JSON (null for NaN and infinities), 9 digits: a float32 exactly.
std::string json_values(const std::vector<float>& values) {
  std::string out;
  for (const float v : values) out += (out.empty() ? "" : ", ") + support::json_number(v, 9);
  return "[" + out + "]";
}

// --json: the token's place, every field's bytes (all of them, as hex) and every decoded value.
std::string inspect_json(const FormatInfo& info, const InspectOptions& o, std::int64_t block, std::int64_t token,
                         std::int64_t offset, const std::uint8_t* page, const std::vector<float>& kv,
                         const std::vector<float>& pe) {
  using support::json_string;
  std::string fields;
  for (const FieldInfo& f : info.fields) {
    const std::int64_t at = field_offset(info, f, o.block_size, token);
    fields += fmt::format(
        "{}\n    {{\"name\": {}, \"page_offset\": {}, \"row\": \"{}\", \"row_offset\": {}, \"bytes\": {}, "
        "\"element\": {}, \"contents\": {}, \"hex\": \"{}\"}}",
        fields.empty() ? "" : ",", json_string(f.name), at, row_name(info, f), f.offset, f.bytes,
        json_string(f.element), json_string(f.contents), hex(page + at, f.bytes));
  }
  return fmt::format(
      "{{\"format\": {}, \"cache\": {}, \"slot\": {}, \"block\": {}, \"position\": {}, \"page_offset\": {}, "
      "\"fields\": [{}\n  ],\n  \"kv_c\": {},\n  \"k_pe\": {}}}\n",
      json_string(info.id), json_string(o.cache), o.slot, block, token, offset, fields, json_values(kv),
      json_values(pe));
}

void run_inspect(const InspectOptions& o) {
  const auto fail = [](const std::string& flag, const std::string& why) {
    throw Error(ErrorCode::kValue, flag + ": " + why);
  };
  const Format format = [&] {
    // An mlakv format id names its format outright (docs/integrating.md); the
    // engine switches read --format as an engine's kv_cache_dtype, which the
    // ids fp8_ds_mla and nvfp4_ds_mla also are.
    if (o.record_bytes == 0 && !o.fp8_rope && !o.per_token_scale) {
      for (const FormatInfo& info : formats()) {
        if (info.id == o.format) return info.format;
      }
    }
    try {
      return resolve_format(o.format, o.record_bytes, o.fp8_rope, o.per_token_scale);
    } catch (const Error& e) {
      throw Error(ErrorCode::kValue, std::string("--format: ") + e.what());
    }
  }();
  const FormatInfo& info = format_info(format);
  if (o.block_size <= 0) fail("--block-size", "must be > 0");
  if (o.rope_dtype != "bf16" && o.rope_dtype != "fp16") fail("--rope-dtype", "must be bf16 or fp16");
  if (!(std::isnormal(o.scale) && o.scale > 0.0f && o.scale <= std::numeric_limits<float>::max() / 448.0f)) {
    fail("--scale",
         fmt::format("must be a positive normal float32 with 448 * scale finite ({:.9g} <= scale <= "
                     "{:.9g}), got {:.9g}",
                     std::numeric_limits<float>::min(), std::numeric_limits<float>::max() / 448.0f, o.scale));
  }
  // Sizes in checked 64-bit arithmetic: a page of block_size tokens must fit the file.
  const std::uint64_t file_bytes = regular_file_size("--cache", o.cache);
  std::int64_t block_bytes = 0;
  if (__builtin_mul_overflow(o.block_size, std::int64_t{info.record_bytes}, &block_bytes) ||
      static_cast<std::uint64_t>(block_bytes) > file_bytes) {
    fail("--block-size", fmt::format("{} slots of {} bytes do not fit {} ({} bytes)", o.block_size, info.record_bytes,
                                     o.cache, file_bytes));
  }
  block_bytes = page_bytes(info, o.block_size);  // >= block_size * record_bytes: padding of a block-planar page
  if (file_bytes % static_cast<std::uint64_t>(block_bytes) != 0) {
    fail("--cache", fmt::format("{} is {} bytes, not a whole number of pages of {} bytes ({} tokens of {} bytes{}; "
                                "a dense dump of whole pages)",
                                o.cache, file_bytes, block_bytes, o.block_size, info.record_bytes,
                                info.page.kind == PageKind::kBlockPlanar ? ", padded" : ""));
  }
  const auto num_blocks = static_cast<std::int64_t>(file_bytes / static_cast<std::uint64_t>(block_bytes));
  const std::int64_t capacity = num_blocks * o.block_size;  // <= file_bytes / record_bytes: no overflow
  if (o.slot < 0 || o.slot >= capacity) {
    fail("--slot", fmt::format("must be in [0, {}) for this cache, got {}", capacity, o.slot));
  }
  const std::int64_t block = o.slot / o.block_size;
  const std::int64_t token = o.slot % o.block_size;
  const std::int64_t offset = block * block_bytes;  // < file_bytes
  // Only the token's page is read, whatever the dump's size.
  std::string page_text =
      read_file_range("--cache", o.cache, static_cast<std::uint64_t>(offset), static_cast<std::uint64_t>(block_bytes));
  auto* page = reinterpret_cast<std::uint8_t*>(page_text.data());
  if (!o.json) {
    fmt::print("{}: slot {} = block {}, position {}; page at byte {} of {}\n", info.id, o.slot, block, token, offset,
               o.cache);
    for (const FieldInfo& f : info.fields) {
      const std::int64_t at = field_offset(info, f, o.block_size, token);
      print_field(info, f, page + at, at, o.values);
    }
  }

  // The decoded values, through the library's reader on the page.
  float k_scale = o.scale;
  const TensorView scale = make_view(&k_scale, DType::kFloat32, {1});
  GatherOptions options;
  options.scale = &scale;
  options.rope_dtype = o.rope_dtype == "fp16" ? DType::kFloat16 : DType::kBFloat16;
  std::int64_t slot = token;
  const int nope = info.geometry.nope_dims;
  const int rope = info.geometry.rope_dims;
  std::vector<float> kv(static_cast<std::size_t>(nope)), pe(static_cast<std::size_t>(rope));
  TensorView cache = make_view(page, DType::kUInt8, {1, o.block_size, info.record_bytes});
  cache.strides[0] = block_bytes;
  gather_records(format, cache, make_view(&slot, DType::kInt64, {1}), make_view(kv.data(), DType::kFloat32, {1, nope}),
                 make_view(pe.data(), DType::kFloat32, {1, rope}), options);
  const auto amax = [](const std::vector<float>& v) {
    float m = 0.0f;
    for (const float x : v) m = std::max(m, std::abs(x));
    return m;
  };
  if (o.json) {
    fmt::print("{}", inspect_json(info, o, block, token, offset, page, kv, pe));
    return;
  }
  fmt::print("decoded kv_c[0:{}] = {}   (amax {:.6g})\n", o.values, list(kv, o.values), amax(kv));
  fmt::print("decoded k_pe[0:{}] = {}   (amax {:.6g})\n", o.values, list(pe, o.values), amax(pe));
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Decode one record of a raw cache dump and print its fields");
  auto o = std::make_shared<InspectOptions>();
  cmd->add_option("--format", o->format, "Record format id, or an engine's kv_cache_dtype (mlakv formats)")->required();
  cmd->add_option("--record-bytes", o->record_bytes,
                  "The cache's record width: tells an engine name's records apart (nvfp4_ds_mla: 352 upstream "
                  "vLLM, 432 B12X)")
      ->default_val(0)
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--fp8-rope", o->fp8_rope, "With an engine name: the B12X compact record (KV_FP8_ROPE=1)");
  cmd->add_flag("--per-token-scale", o->per_token_scale, "With --fp8-rope: its per-token-scale variant");
  cmd->add_option("--cache", o->cache, "Raw dump of a dense [num_blocks, block_size, record_bytes] cache")->required();
  cmd->add_option("--block-size", o->block_size, "Slots per block")->required();
  cmd->add_option("--slot", o->slot, "Flat slot to decode")->required();
  cmd->add_option("--scale", o->scale, "k_scale the fp8_e4m3 records were written with")->default_val(1.0f);
  cmd->add_option("--rope-dtype", o->rope_dtype, "What fp8_ds_mla's raw RoPE values are: bf16 or fp16")
      ->default_val("bf16");
  cmd->add_option("--values", o->values, "How many decoded values to print")
      ->default_val(8)
      ->check(CLI::Range(1, kLatentDim));
  cmd->add_flag("--json", o->json, "Print the fields (all their bytes, as hex) and every decoded value as JSON");
  cmd->callback([o] { run_inspect(*o); });
}

}  // namespace mlakv::tool
