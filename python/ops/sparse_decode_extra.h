// SPDX-License-Identifier: Apache-2.0
// The DeepSeek V4 decode's extra cache from a binding's four optional
// arguments (extra_format, extra_kv_cache, extra_indices, extra_topk_len), one
// rule for every binding (the nanobind function, the raw entry point, the C++
// torch op). The library validates the cache it is handed; what it cannot see
// is an argument the binding was not given, which this refuses by name.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mlakv/attention.h"
#include "mlakv/error.h"
#include "mlakv/formats.h"
#include "mlakv/tensor_view.h"

namespace mlakv::bindings {

/// A sparse_mla_decode call's extra_* arguments as a binding received them.
struct ExtraCacheArguments {
  std::optional<std::string_view> format;
  const TensorView* kv_cache = nullptr;  // nullptr: None
  const TensorView* indices = nullptr;
  const TensorView* topk_len = nullptr;
};

/// The extra cache these arguments describe (its views are `a`'s), or
/// nullopt when none is given. An extra cache needs its kv_cache and its
/// format; the indices' absence is the library's to refuse.
inline std::optional<SparseDecodeExtraCache> extra_cache(std::string_view format, const ExtraCacheArguments& a) {
  if (!a.format && !a.kv_cache && !a.indices && !a.topk_len) return std::nullopt;
  const auto fail = [&](std::string_view name, std::string_view rule, std::string_view got) {
    throw Error(ErrorCode::kValue, "mlakv::sparse_mla_decode(" + std::string(format) + "): " + std::string(name) +
                                       ": " + std::string(rule) + ", got " + std::string(got));
  };
  if (!a.kv_cache) fail("extra_kv_cache", "is required with extra_format, extra_indices or extra_topk_len", "none");
  if (!a.format) fail("extra_format", "is required with extra_kv_cache (the extra cache's format id)", "none");
  SparseDecodeExtraCache extra;
  bool known = false;
  for (const FormatInfo& info : formats()) {
    if (info.id != *a.format) continue;
    extra.format = info.format;
    known = true;
  }
  if (!known) fail("extra_format", "unknown id, expected one of " + format_ids(), "'" + std::string(*a.format) + "'");
  extra.kv_cache = a.kv_cache;
  extra.indices = a.indices;
  extra.topk_len = a.topk_len;
  return extra;
}

}  // namespace mlakv::bindings
