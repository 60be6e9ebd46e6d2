// SPDX-License-Identifier: Apache-2.0
#include "formats_json.h"

#include <fmt/core.h>

#include "mlakv/formats.h"
#include "mlakv_support/json_text.h"

namespace mlakv::tool {
namespace {

using support::json_string;

const char* json_bool(bool b) { return b ? "true" : "false"; }

// Joins the items' JSON with ", ".
template <class Items, class ToJson>
std::string json_list(const Items& items, ToJson to_json) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + to_json(item);
  return "[" + out + "]";
}

std::string field_json(const FieldInfo& f) {
  return fmt::format(
      R"({{"name": {}, "offset": {}, "bytes": {}, "contents": {}, "region": "{}", "element": {}, "group": {}}})",
      json_string(f.name), f.offset, f.bytes, json_string(f.contents), f.region == kDataRegion ? "data" : "scale",
      json_string(f.element), f.group);
}

std::string engine_name_json(const EngineName& n) {
  return fmt::format(R"({{"kv_cache_dtype": {}, "engine": {}, "fp8_rope": {}, "per_token_scale": {}}})",
                     json_string(n.kv_cache_dtype), json_string(n.engine), json_bool(n.fp8_rope),
                     json_bool(n.per_token_scale));
}

std::string format_json(const FormatInfo& info) {
  const DType input = info.policy.input_dtype;
  return fmt::format(
      R"({{"id": {}, "record_bytes": {}, "cache_alignment": {}, "layout": {}, "source": {}, "fields": {}, )"
      R"("geometry": {{"nope_dims": {}, "rope_dims": {}, "v_includes_rope": {}}}, )"
      R"("page": {{"kind": "{}", "data_row_bytes": {}, "scale_row_bytes": {}, "page_multiple": {}}}, )"
      R"("policy": {{"needs_k_scale": {}, "input_dtype": {}}}, "engine_names": {}}})",
      json_string(info.id), info.record_bytes, info.cache_alignment, json_string(info.layout), json_string(info.source),
      json_list(info.fields, field_json), info.geometry.nope_dims, info.geometry.rope_dims,
      json_bool(info.geometry.v_includes_rope),
      info.page.kind == PageKind::kTokenMajor ? "token_major" : "block_planar", info.page.data_row_bytes,
      info.page.scale_row_bytes, info.page.page_multiple, json_bool(info.policy.needs_k_scale),
      input == DType::kBFloat16  ? "\"bf16\""
      : input == DType::kFloat16 ? "\"fp16\""
                                 : "null",
      json_list(info.engine_names, engine_name_json));
}

}  // namespace

std::string formats_json() {
  std::string out = "[\n";
  bool first = true;
  for (const FormatInfo& info : formats()) {
    out += (first ? "  " : ",\n  ") + format_json(info);
    first = false;
  }
  return out + "\n]\n";
}

}  // namespace mlakv::tool
