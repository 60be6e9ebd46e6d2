// SPDX-License-Identifier: Apache-2.0
// Engine kv_cache_dtype strings to format ids (mlakv::resolve_format).
#include "api/resolve_format.h"

#include <string>
#include <vector>

namespace mlakv::api {
namespace {

struct Candidate {
  const FormatInfo* info;
  const EngineName* name;  // nullptr: named by its mlakv id
};

// "nvfp4_ds_mla (432 B, B12X backend, KV_FP8_ROPE=0), nvfp4_fp8_ds_mla (352 B, upstream vLLM)"
std::string describe(const std::vector<Candidate>& candidates) {
  std::string text;
  for (const Candidate& c : candidates) {
    if (!text.empty()) text += ", ";
    text += std::string(c.info->id) + " (" + std::to_string(c.info->record_bytes) + " B";
    if (c.name != nullptr) text += ", " + std::string(c.name->engine);
    text += ")";
  }
  return text;
}

// The engines' names, each once, in registry order.
std::string engine_names() {
  std::vector<std::string_view> seen;
  std::string text;
  for (const FormatInfo& info : formats()) {
    for (const EngineName& n : info.engine_names) {
      bool known = false;
      for (std::string_view s : seen) known = known || s == n.kv_cache_dtype;
      if (known) continue;
      seen.push_back(n.kv_cache_dtype);
      text += (text.empty() ? "" : ", ") + std::string(n.kv_cache_dtype);
    }
  }
  return text;
}

// 'name' (appended piecewise: GCC 12 warns, wrongly, of overlap for "'" + std::string).
std::string quoted(std::string_view name) {
  std::string text = "'";
  text += name;
  text += "'";
  return text;
}

template <class Keep>
std::vector<Candidate> filtered(const std::vector<Candidate>& candidates, Keep keep) {
  std::vector<Candidate> kept;
  for (const Candidate& c : candidates) {
    if (keep(c)) kept.push_back(c);
  }
  return kept;
}

}  // namespace

Format resolve_format(const Check& check, std::string_view width_arg, std::string_view kv_cache_dtype,
                      std::int64_t record_bytes, bool fp8_rope, bool per_token_scale, DType input_dtype) {
  std::vector<Candidate> named;
  bool has_variants = false;
  for (const FormatInfo& info : formats()) {
    for (const EngineName& n : info.engine_names) {
      if (n.kv_cache_dtype != kv_cache_dtype) continue;
      named.push_back({&info, &n});
      has_variants = has_variants || n.fp8_rope;
    }
  }
  if (named.empty()) {
    for (const FormatInfo& info : formats()) {
      if (info.id == kv_cache_dtype) return info.format;  // an mlakv id names its format outright
    }
    check.fail(ErrorCode::kValue, "kv_cache_dtype",
               "must be an engine name (" + engine_names() + ") or an mlakv format id (" + format_ids() + ")",
               quoted(kv_cache_dtype));
  }

  // The switches pick among a name's variants (per_token_scale among the fp8_rope ones).
  std::vector<Candidate> switched = filtered(named, [&](const Candidate& c) {
    if (!has_variants) return true;
    return c.name->fp8_rope == fp8_rope && (!fp8_rope || c.name->per_token_scale == per_token_scale);
  });
  // "auto" follows the model's dtype.
  if (input_dtype == DType::kBFloat16 || input_dtype == DType::kFloat16) {
    switched = filtered(switched, [&](const Candidate& c) {
      const DType stored = c.info->policy.input_dtype;
      return stored == DType::kOther || stored == input_dtype;
    });
  }
  const std::string name = quoted(kv_cache_dtype);
  if (switched.empty()) {
    check.fail(ErrorCode::kValue, "kv_cache_dtype",
               "names " + describe(named) + "; none of them with fp8_rope=" + (fp8_rope ? "true" : "false") +
                   ", per_token_scale=" + (per_token_scale ? "true" : "false") + " and input dtype " +
                   dtype_name(input_dtype),
               name);
  }
  if (switched.size() == 1) return switched.front().info->format;

  if (record_bytes <= 0) {
    check.fail(ErrorCode::kValue, "kv_cache_dtype",
               "names several records, the cache's record width picks one of " + describe(switched),
               name + " without a record width");
  }
  const std::vector<Candidate> sized =
      filtered(switched, [&](const Candidate& c) { return c.info->record_bytes == record_bytes; });
  if (sized.empty()) {
    check.fail(ErrorCode::kValue, width_arg,
               "record bytes must be those of one of the records kv_cache_dtype " + name +
                   " names here: " + describe(switched),
               std::to_string(record_bytes));
  }
  if (sized.size() > 1) {  // same width, e.g. "auto" without an input dtype
    check.fail(ErrorCode::kValue, "kv_cache_dtype",
               "names several records of " + std::to_string(record_bytes) + " bytes: " + describe(sized), name);
  }
  return sized.front().info->format;
}

}  // namespace mlakv::api

namespace mlakv {

Format resolve_format(std::string_view kv_cache_dtype, int record_bytes, bool fp8_rope, bool per_token_scale,
                      DType input_dtype) {
  const api::Check check("resolve_format", kv_cache_dtype);
  if (record_bytes < 0)
    check.fail(ErrorCode::kValue, "record_bytes", "must be >= 0 (0: not known)", std::to_string(record_bytes));
  const Format format =
      api::resolve_format(check, "record_bytes", kv_cache_dtype, record_bytes, fp8_rope, per_token_scale, input_dtype);
  const int want = format_info(format).record_bytes;
  if (record_bytes != 0 && record_bytes != want) {
    check.fail(ErrorCode::kValue, "record_bytes",
               "must be " + std::to_string(want) + " (" + std::string(format_info(format).id) + ")",
               std::to_string(record_bytes));
  }
  return format;
}

}  // namespace mlakv
