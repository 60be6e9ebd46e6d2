// SPDX-License-Identifier: Apache-2.0
// mlakv_gpu_bench (the command line; the benchmarks, harness and JSON live
// beside it in bench/gpu/): the CUDA writers and readers against a copy of the same
// bytes, timed in the same run. Prints a table; --json FILE writes one object
// per measurement.
//
// Effective bandwidth = bytes a kernel must move (inputs and slots read,
// records written; for readers, records and slots read, bf16 rows written) /
// time. The copy reference moves the same number of bytes (copies half of
// them) and is the faster of cudaMemcpyAsync and a 16-byte-per-thread copy
// kernel; fraction_of_copy = copy time / kernel time. A token's inputs (and a
// reader's bf16 row) are 1,152 B for the 512 + 64 formats, 1,024 B for the
// DeepSeek V4 family (448 + 64), whose caches are pages of 64 tokens
// (benchmarks.h: bench_cache).
// Large runs: each timed launch is preceded by an L2 flush (a 512 MiB read)
// and rotates over buffer sets; decode-regime runs (1..1024 tokens) replay a
// CUDA graph of many launches over rotating buffer sets.
// Rows of variant "pattern" ("pattern-graph" in the decode regime; the 512 +
// 64 formats only) time the same loads and stores with the encoding taken out
// (pattern_copy.cuh): a reference for what the access pattern costs by
// itself, not a bound (the tuned readers and some writers beat it).
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "benchmarks.h"
#include "check_cuda.h"
#include "mlakv/formats.h"
#include "mlakv/version.h"
#include "results.h"

using mlakv::Format;

int main(int argc, char** argv) {
  CLI::App app{"mlakv_gpu_bench: CUDA writers and readers against a same-bytes copy"};
  std::string json;
  std::string commit = "unknown";
  std::vector<std::int64_t> large = {65536, 1048576};
  std::vector<std::int64_t> small = {1, 8, 64, 256, 1024};
  bool quick = false;
  std::vector<std::string> only_formats;
  std::vector<std::string> ops = {"writer", "decode", "reader", "attention"};
  app.add_option("--json", json, "Write the measurements as JSON to this file");
  app.add_option("--commit", commit, "Commit the binary was built from, recorded in the JSON");
  app.add_option("--large", large, "Token counts of the flushed runs");
  app.add_option("--small", small, "Token counts of the CUDA-graph (decode) runs");
  app.add_flag("--quick", quick, "Fewer repeats");
  app.add_option("--format", only_formats, "Only these format ids (default: all)");
  std::vector<std::int64_t> attention_rows = {1, 16, 64, 128};
  std::vector<std::int64_t> attention_heads = {16, 32, 64, 128};
  app.add_option("--rows", attention_rows, "Attention: query rows R");
  app.add_option("--heads", attention_heads, "Attention: heads H");
  app.add_option("--op", ops, "Which measurements: writer, decode, reader, attention (default: all)");
  float k_scale = 1.0f;
  app.add_option("--k-scale", k_scale,
                 "fp8_e4m3's k_scale in writer and reader runs (default 1; a power of two is a multiplication, "
                 "any other scale a division per value)");
  CLI11_PARSE(app, argc, argv);

  mlakv_bench::Bench b;
  if (quick) b.repeats = 5;
  b.k_scale = k_scale;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs), mlakv %s, commit %s, k_scale %g\n", prop.name, b.sms, mlakv::kVersion,
              commit.c_str(), static_cast<double>(k_scale));
  std::printf("%-7s %-26s %-10s %8s %-10s %10s %9s %10s %7s\n", "op", "format", "variant", "tokens", "slots", "us",
              "GB/s", "copy us", "x copy");
  const auto wanted = [&](const mlakv::FormatInfo& info) {
    return only_formats.empty() || std::find(only_formats.begin(), only_formats.end(), info.id) != only_formats.end();
  };
  const auto doing = [&](const char* op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  for (const auto& info : mlakv::formats()) {
    if (!wanted(info) || !doing("writer")) continue;
    for (std::int64_t t : large) {
      for (bool random : {false, true})
        mlakv_bench::bench_writer(b, info.format, t, random, false, t >= 1000000 ? 2 : 4);
    }
  }
  for (const auto& info : mlakv::formats()) {
    if (!wanted(info) || !doing("decode")) continue;
    for (std::int64_t t : small) mlakv_bench::bench_writer(b, info.format, t, false, true, 8);
  }
  for (const auto& info : mlakv::formats()) {
    if (!wanted(info) || !doing("reader")) continue;
    for (std::int64_t t : large) {
      for (bool random : {false, true}) mlakv_bench::bench_reader(b, info.format, t, random, t >= 1000000 ? 2 : 4);
    }
  }
  const Format attention_formats[] = {Format::kNvfp4DsMlaFp8Rope,
                                      Format::kNvfp4DsMlaFp8RopePts,
                                      Format::kNvfp4DsMla,
                                      Format::kNvfp4Fp8DsMla,
                                      Format::kFp8DsMla,
                                      Format::kFp8E4m3,
                                      Format::kBf16};
  for (const Format format : attention_formats) {
    if (!wanted(mlakv::format_info(format)) || !doing("attention")) continue;
    for (const std::int64_t heads : attention_heads) {
      for (const std::int64_t rows : attention_rows) mlakv_bench::bench_attention(b, format, rows, heads, 2048);
    }
  }
  if (!json.empty()) mlakv_bench::write_json(json, prop.name, commit, k_scale);
  return 0;
}
