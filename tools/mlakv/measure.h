// SPDX-License-Identifier: Apache-2.0
// What a format costs in accuracy and speed, measured through the library's
// own writers, readers and sparse decode on one device.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "mlakv/formats.h"
#include "synthetic.h"

namespace mlakv::tool {

/// Decode-step queries: R rows x H heads of bf16 [576], each row attending to
/// K selected tokens. No rows: no sparse-attention check.
struct Queries {
  std::int64_t rows = 0;
  std::int64_t heads = 0;
  std::int64_t topk = 0;
  std::vector<std::uint16_t> q;       // [R, H, nope + 64] bf16 bits (576 for the V3 family)
  std::vector<std::int32_t> indices;  // [R, K] distinct token slots per row
};

/// Synthetic queries: each head of a row points at one of the row's selected
/// tokens (q = 15 k / |k| plus unit noise), so attention is peaked as in a
/// trained model rather than uniform.
Queries make_queries(const Activations& bf16, std::int64_t rows, std::int64_t heads, std::int64_t topk,
                     std::uint64_t seed);

/// The user's queries ([R, H, 576] float32 values) with K random selected tokens per row.
Queries user_queries(const std::vector<float>& values, std::int64_t rows, std::int64_t heads, std::int64_t tokens,
                     std::int64_t topk, std::uint64_t seed);

struct ErrorStats {
  double rel_rms = 0.0;        // |decoded - reference| / |reference| over the finite pairs
  double max_abs = 0.0;        // over the finite pairs
  std::int64_t nonfinite = 0;  // pairs where the decoded or the reference value is NaN or infinite
};

/// |got - ref| relative RMS and largest element over the pairs where both are
/// finite, and how many pairs are not (a format that overflows, or non-finite inputs).
ErrorStats error_stats(const std::vector<float>& ref, const std::vector<float>& got);

struct FormatAccuracy {
  ErrorStats latent;  // kv_c: the latent (512) or the NoPE values (448)
  ErrorStats rope;
  std::optional<ErrorStats> attention;  // sparse decode over this format's records vs over the bf16 inputs;
                                        // none when the measurement has no queries
};

struct FormatSpeed {
  double write_us = 0.0;       // write_records of every token
  double read_us = 0.0;        // gather_records of every token to bf16 [T, nope + 64] rows
  double write_bytes = 0.0;    // inputs + slots read, records written
  double read_bytes = 0.0;     // records + slots read, bf16 rows written
  double write_copy_us = 0.0;  // CUDA: a device-to-device copy of the same bytes (0 on the CPU)
  double read_copy_us = 0.0;
};

class Measurement {
 public:
  /// Uploads the activations and queries and, when there are queries,
  /// computes the reference attention: the decode over bf16 records of the
  /// bf16 inputs. Measures the formats storing bf16.nope_dims NoPE values
  /// (their caches: 64-token pages, block-planar ones at their padded page
  /// stride); queries need a decode that reads every one of them.
  Measurement(Device device, const Activations& bf16, const Activations& fp16, const Queries& queries);
  ~Measurement();
  Measurement(const Measurement&) = delete;
  Measurement& operator=(const Measurement&) = delete;

  FormatAccuracy accuracy(Format format);
  FormatSpeed speed(Format format, int repeats);

 private:
  struct Buffers;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace mlakv::tool
