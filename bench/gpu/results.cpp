// SPDX-License-Identifier: Apache-2.0
#include "results.h"

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "mlakv_support/json_text.h"

namespace mlakv_bench {
namespace {

using mlakv::support::json_fixed;
using mlakv::support::json_number;
using mlakv::support::json_string;

std::vector<Result>& kept() {
  static std::vector<Result> all;
  return all;
}

}  // namespace

void report(Result r) {
  std::printf("%-7s %-26s %-10s %8lld %-10s %10.2f %9.1f %10.2f %7.2f\n", r.op.c_str(), r.format.c_str(),
              r.variant.c_str(), static_cast<long long>(r.tokens), r.slots.c_str(), r.us, r.gbps, r.copy_us,
              r.fraction);
  std::fflush(stdout);
  kept().push_back(std::move(r));
}

void report_attention(Result r) {
  std::printf(
      "attention %-26s R=%-4lld H=%-4lld K=%-5lld %9.2f us %7.1f TFLOP/s %7.1f GB/s %5.2fx copy  two-step %9.2f us "
      "(%.2fx)\n",
      r.format.c_str(), static_cast<long long>(r.rows), static_cast<long long>(r.heads), static_cast<long long>(r.topk),
      r.us, r.tflops, r.gbps, r.fraction, r.two_step_us, r.two_step_us / r.us);
  std::fflush(stdout);
  kept().push_back(std::move(r));
}

const std::vector<Result>& results() { return kept(); }

void write_json(const std::string& path, const std::string& device, const std::string& commit, float k_scale) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(2);
  }
  const std::vector<Result>& all = results();
  fmt::print(f, "{{\"device\": {}, \"commit\": {}, \"k_scale\": {}, \"measurements\": [\n", json_string(device),
             json_string(commit), json_number(k_scale, 9));
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Result& r = all[i];
    fmt::print(f,
               "  {{\"op\": {}, \"format\": {}, \"variant\": {}, \"tokens\": {}, \"slots\": {}, \"us\": {}, "
               "\"gbps\": {}, \"copy_us\": {}, \"fraction_of_copy\": {}",
               json_string(r.op), json_string(r.format), json_string(r.variant), r.tokens, json_string(r.slots),
               json_fixed(r.us, 3), json_fixed(r.gbps, 1), json_fixed(r.copy_us, 3), json_fixed(r.fraction, 3));
    if (r.op == "attention") {
      fmt::print(f, ", \"rows\": {}, \"heads\": {}, \"topk\": {}, \"tflops\": {}, \"two_step_us\": {}", r.rows, r.heads,
                 r.topk, json_fixed(r.tflops, 2), json_fixed(r.two_step_us, 3));
    }
    fmt::print(f, "}}{}\n", i + 1 < all.size() ? "," : "");
  }
  fmt::print(f, "]}}\n");
  std::fclose(f);
}

}  // namespace mlakv_bench
