// SPDX-License-Identifier: Apache-2.0
// GPU tests of the DeepSeek V4 family's sparse decode (label "gpu"; skipped
// without a device): CUDA against the CPU reference for every V4-family
// format and the V4.1 pairing, H in {1, 8, 16, 64, 128}, topk and extra topk
// in {1, 64, 128, 512, 1024}, with and without sink, extra cache, lengths,
// -1 and past-capacity entries, with and without a workspace; graph capture;
// rows with no valid entry; the caches stay untouched; and the kernel's lane
// decode equals the codecs' decode_lane for every code and scale byte.
//
// Tolerance as cuda_attention_test (the GPU weighs values with bf16
// probabilities and sums in another order): |gpu - cpu| <= 2^-8 max|value| +
// 2^-8 |cpu| per output element, |gpu - cpu| <= 1e-3 max(1, |lse|).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "codec/fp8_ds_mla_v4.h"
#include "codec/fp8_ds_mla_v41.h"
#include "codec/nvfp4_ds_mla_v41.h"
#include "cuda/decode/v4/record_lanes.cuh"
#include "cuda_support.h"
#include "v4_attention_support.h"

namespace mlakv::test {
namespace {

using cuda::v4::Coding;

double widen(std::uint16_t bits) { return codec::load_input<codec::InputDtype::kBf16>(bits); }

struct Case {
  Format main_format;
  Format extra_format;
  std::int64_t heads;
  std::int64_t topk;
  std::int64_t extra_topk;  // 0: no extra cache
  bool sink;
  bool lengths;
  int invalid_every;  // every n-th entry -1 (0: none); entry 3 of row 1 is past the capacity
};

std::string describe(const Case& c) {
  return std::string(format_info(c.main_format).id) + "+" +
         (c.extra_topk > 0 ? std::string(format_info(c.extra_format).id) : std::string("none")) +
         " H=" + std::to_string(c.heads) + " topk=" + std::to_string(c.topk) + "+" + std::to_string(c.extra_topk) +
         (c.sink ? " sink" : "") + (c.lengths ? " lengths" : "");
}

struct Result {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
};

// One problem: caches, entries, queries and sink, decoded on the CPU or the GPU.
struct Problem {
  static constexpr std::int64_t kRows = 4;  // s_q = 2, batch 2
  Case c;
  V4Cache main;
  V4Cache extra;
  V4Entries me;
  V4Entries xe;
  std::vector<std::uint16_t> q;
  std::vector<float> sink;

  Problem(const Case& shape, std::uint64_t seed)
      : c(shape),
        main(shape.main_format, 1500, 256, seed),
        extra(shape.extra_format, 1200, 64, seed + 1),
        me(V4Entries::random(kRows, shape.topk, main.capacity(), shape.lengths, shape.invalid_every, seed + 2)),
        xe(V4Entries::random(kRows, std::max<std::int64_t>(shape.extra_topk, 1), extra.capacity(), shape.lengths,
                             shape.invalid_every, seed + 3)),
        q(random_v4_queries(kRows, shape.heads, seed + 5)) {
    if (shape.topk > 3) me.indices[shape.topk + 3] = static_cast<std::int32_t>(main.capacity() + 5);
    if (shape.extra_topk > 3) xe.indices[shape.extra_topk + 3] = static_cast<std::int32_t>(extra.capacity());
    if (shape.sink) {
      std::mt19937_64 rng(seed + 4);
      std::normal_distribution<float> normal(0.0f, 2.0f);
      for (std::int64_t h = 0; h < shape.heads; ++h) sink.push_back(normal(rng));
    }
  }

  bool with_extra() const { return c.extra_topk > 0; }

  Result run_cpu() {
    Result r{std::vector<std::uint16_t>(static_cast<std::size_t>(kRows * c.heads * kV4Dim)),
             std::vector<float>(static_cast<std::size_t>(kRows * c.heads))};
    SparseDecodeOptions options;
    const TensorView len = make_view(me.topk_len.data(), DType::kInt32, {kRows});
    if (!me.topk_len.empty()) options.topk_len = &len;
    const TensorView sink_view = make_view(sink.data(), DType::kFloat32, {c.heads});
    if (!sink.empty()) options.attn_sink = &sink_view;
    const TensorView x_cache = extra.view();
    const TensorView x_indices = make_view(xe.indices.data(), DType::kInt32, {kRows, xe.topk});
    const TensorView x_len = make_view(xe.topk_len.data(), DType::kInt32, {kRows});
    const SparseDecodeExtraCache x{extra.format, &x_cache, &x_indices, xe.topk_len.empty() ? nullptr : &x_len};
    if (with_extra()) options.extra = &x;
    sparse_mla_decode(main.format, make_view(q.data(), DType::kBFloat16, {kRows, c.heads, kV4Dim}), main.view(),
                      make_view(me.indices.data(), DType::kInt32, {kRows, me.topk}),
                      make_view(r.out.data(), DType::kBFloat16, {kRows, c.heads, kV4Dim}),
                      make_view(r.lse.data(), DType::kFloat32, {kRows, c.heads}), options);
    return r;
  }

  // The same decode on the GPU, with a workspace or without; with `graph`, captured and replayed twice.
  Result run_cuda(bool workspace, bool graph = false) {
    const Device device{DeviceType::kCuda, 0};
    DeviceBuffer d_main(main.bytes);
    DeviceBuffer d_extra(extra.bytes);
    DeviceBuffer d_q(q);
    DeviceBuffer d_indices(me.indices);
    DeviceBuffer d_len(me.topk_len.empty() ? std::vector<std::int32_t>{0} : me.topk_len);
    DeviceBuffer d_x_indices(xe.indices);
    DeviceBuffer d_x_len(xe.topk_len.empty() ? std::vector<std::int32_t>{0} : xe.topk_len);
    DeviceBuffer d_sink(sink.empty() ? std::vector<float>{0.0f} : sink);
    DeviceBuffer d_out(static_cast<std::size_t>(kRows * c.heads * kV4Dim * 2));
    DeviceBuffer d_lse(static_cast<std::size_t>(kRows * c.heads * 4));
    const std::int64_t entries = c.topk + (with_extra() ? c.extra_topk : 0);
    const std::size_t ws_bytes = sparse_mla_decode_workspace_size(kRows, c.heads, entries, device);
    DeviceBuffer d_ws(std::max<std::size_t>(ws_bytes, 16));
    cudaMemset(d_out.get(), 0xFF, d_out.bytes());
    cudaMemset(d_lse.get(), 0xFF, d_lse.bytes());
    SparseDecodeOptions options;
    const TensorView len = on_device(make_view(nullptr, DType::kInt32, {kRows}), d_len);
    if (!me.topk_len.empty()) options.topk_len = &len;
    const TensorView sink_view = on_device(make_view(nullptr, DType::kFloat32, {c.heads}), d_sink);
    if (!sink.empty()) options.attn_sink = &sink_view;
    TensorView x_cache = extra.view_of(d_extra.get());
    x_cache.device = device;
    const TensorView x_indices = on_device(make_view(nullptr, DType::kInt32, {kRows, xe.topk}), d_x_indices);
    const TensorView x_len = on_device(make_view(nullptr, DType::kInt32, {kRows}), d_x_len);
    const SparseDecodeExtraCache x{extra.format, &x_cache, &x_indices, xe.topk_len.empty() ? nullptr : &x_len};
    if (with_extra()) options.extra = &x;
    const TensorView ws = on_device(make_view(nullptr, DType::kUInt8, {static_cast<std::int64_t>(ws_bytes)}), d_ws);
    if (workspace && ws_bytes > 0) options.workspace = &ws;
    TensorView cache = main.view_of(d_main.get());
    cache.device = device;
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    const auto launch = [&] {
      sparse_mla_decode(main.format, on_device(make_view(nullptr, DType::kBFloat16, {kRows, c.heads, kV4Dim}), d_q),
                        cache, on_device(make_view(nullptr, DType::kInt32, {kRows, me.topk}), d_indices),
                        on_device(make_view(nullptr, DType::kBFloat16, {kRows, c.heads, kV4Dim}), d_out),
                        on_device(make_view(nullptr, DType::kFloat32, {kRows, c.heads}), d_lse), options, stream);
    };
    if (graph) {
      cudaGraph_t g;
      cudaGraphExec_t exec;
      EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      launch();
      EXPECT_EQ(cudaStreamEndCapture(stream, &g), cudaSuccess);
      EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
      EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      cudaStreamSynchronize(stream);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(g);
    } else {
      launch();
    }
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaStreamDestroy(stream);
    EXPECT_EQ(d_main.download<std::uint8_t>(), main.bytes) << "the decode wrote the main cache";
    EXPECT_EQ(d_extra.download<std::uint8_t>(), extra.bytes) << "the decode wrote the extra cache";
    return {d_out.download<std::uint16_t>(), d_lse.download<float>()};
  }
};

void expect_close(const Result& gpu, const Result& cpu, const std::string& what) {
  double value_scale = 0.0;
  for (const std::uint16_t v : cpu.out) value_scale = std::max(value_scale, std::fabs(widen(v)));
  int reported = 0;
  for (std::size_t i = 0; i < cpu.out.size() && reported < 5; ++i) {
    const double g = widen(gpu.out[i]);
    const double c = widen(cpu.out[i]);
    if (!(std::fabs(g - c) <= std::ldexp(value_scale, -8) + std::ldexp(std::fabs(c), -8))) {
      ADD_FAILURE() << what << ": out[" << i << "] gpu " << g << " cpu " << c;
      ++reported;
    }
  }
  for (std::size_t i = 0; i < cpu.lse.size(); ++i) {
    if (std::isinf(cpu.lse[i])) {
      EXPECT_EQ(gpu.lse[i], cpu.lse[i]) << what << ": lse[" << i << "]";
    } else {
      EXPECT_NEAR(gpu.lse[i], cpu.lse[i], 1e-3 * std::max(1.0f, std::fabs(cpu.lse[i]))) << what << ": lse[" << i << "]";
    }
  }
}

void check_case(const Case& c, std::uint64_t seed) {
  Problem problem(c, seed);
  const Result cpu = problem.run_cpu();
  expect_close(problem.run_cuda(false), cpu, describe(c) + " (no workspace)");
  expect_close(problem.run_cuda(true), cpu, describe(c) + " (workspace)");
}

constexpr Format kV4 = Format::kFp8DsMlaV4;
constexpr Format kV41 = Format::kFp8DsMlaV41;
constexpr Format kFp4 = Format::kNvfp4DsMlaV41;
constexpr Format kV41Planar = Format::kFp8DsMlaV41Planar;
constexpr Format kFp4Planar = Format::kNvfp4DsMlaV41Planar;

TEST(cuda_v4_decode, equals_the_cpu_decode_for_every_v4_format) {
  MLAKV_REQUIRE_GPU();
  // Each format as main and extra cache; together the cases take every H, topk and extra topk.
  const Case cases[] = {
      {kV4, kV4, 64, 128, 512, true, true, 7},
      {kV4, kV4, 8, 1, 1, false, false, 0},
      {kV41, kV41, 16, 1024, 0, true, false, 5},
      {kV41, kV41, 128, 64, 128, false, true, 0},
      {kFp4, kFp4, 1, 512, 1024, true, true, 3},
      {kFp4, kFp4, 64, 128, 64, false, false, 0},
      {kV41Planar, kV41Planar, 8, 128, 512, true, true, 9},
      {kFp4Planar, kFp4Planar, 128, 1024, 1024, true, false, 11},
  };
  std::uint64_t seed = 1000;
  for (const Case& c : cases) check_case(c, seed += 10);
}

TEST(cuda_v4_decode, a_v41_engine_pairs_an_mxfp8_main_cache_with_an_fp4_extra_cache) {
  MLAKV_REQUIRE_GPU();
  const Case cases[] = {
      {kV41, kFp4, 8, 128, 512, true, true, 0},
      {kV41, kFp4, 16, 128, 512, true, true, 13},
      {kV41, kFp4, 64, 128, 512, true, true, 0},
      {kV41, kFp4, 128, 128, 1024, true, true, 0},
      {kV41Planar, kFp4Planar, 16, 64, 1024, false, true, 6},
      {kV4, kFp4, 64, 1, 64, true, false, 0},
      {kV41, kFp4, 24, 128, 512, true, true, 0},  // the kernel of two head groups (17 to 32 heads)
  };
  std::uint64_t seed = 2000;
  for (const Case& c : cases) check_case(c, seed += 10);
}

TEST(cuda_v4_decode, rows_without_a_valid_entry_give_zeros_and_minus_infinity) {
  MLAKV_REQUIRE_GPU();
  for (const bool workspace : {false, true}) {
    Problem p({kV41, kFp4, 16, 128, 512, true, true, 0}, 3000);
    // Row 1: main entries -1 or past capacity, no extra entry; row 3: every length 0.
    for (std::int64_t i = 0; i < p.me.topk; ++i) {
      p.me.indices[p.me.topk + i] = i % 2 ? -1 : static_cast<std::int32_t>(p.main.capacity() + i);
    }
    p.me.topk_len[1] = static_cast<std::int32_t>(p.me.topk);
    p.xe.topk_len[1] = 0;
    p.me.topk_len[3] = 0;
    p.xe.topk_len[3] = 0;
    const Result gpu = p.run_cuda(workspace);
    for (const std::int64_t row : {1, 3}) {
      for (std::int64_t h = 0; h < p.c.heads; ++h) {
        EXPECT_EQ(gpu.lse[row * p.c.heads + h], -std::numeric_limits<float>::infinity()) << "row " << row;
        for (int d = 0; d < kV4Dim; ++d) {
          ASSERT_EQ(gpu.out[static_cast<std::size_t>((row * p.c.heads + h) * kV4Dim + d)], 0)
              << "row " << row << " head " << h << " dim " << d;
        }
      }
    }
    expect_close(gpu, p.run_cpu(), "empty rows");
  }
}

TEST(cuda_v4_decode, a_captured_graph_replays_the_decode) {
  MLAKV_REQUIRE_GPU();
  for (const bool workspace : {false, true}) {
    Problem p({kV41, kFp4, 64, 128, 1024, true, true, 0}, 4000);
    expect_close(p.run_cuda(workspace, /*graph=*/true), p.run_cpu(), "graph");
  }
}

// Every (code, scale byte) of each coding through the kernel's lane decode
// against the codec's decode_lane of the same bytes, rounded to bf16 (a NaN
// must come out NaN). Block x = scale byte; a thread is a lane and one of 256
// code offsets (y and the warp), so each lane position sees all 256 codes.
// Counts the values checked.
template <class Codec>
__device__ void check_codec_lanes(Coding coding, std::uint8_t sbyte, int lane, int shift, unsigned long long* bad,
                                  unsigned long long* checked) {
  constexpr int kData = Codec::kNope + Codec::kRope;  // bytes enough for any data row
  alignas(16) std::uint8_t data[2 * kData] = {};
  alignas(16) std::uint8_t scales[64] = {};
  for (int i = 0; i < 2 * kData; ++i) data[i] = static_cast<std::uint8_t>(i * 37 + shift);
  for (int i = 0; i < 64; ++i) scales[i] = sbyte;
  cuda::v4::LaneBytes b{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0), sbyte};
  if (coding == Coding::kFp8Tiles64 && lane >= cuda::v4::kFp8V4NopeLanes) {
    b.lo = *reinterpret_cast<const uint4*>(data + cuda::v4::kFp8V4RopeOffset + 32 * (lane - 28));
    b.hi = *reinterpret_cast<const uint4*>(data + cuda::v4::kFp8V4RopeOffset + 32 * (lane - 28) + 16);
  } else if (coding == Coding::kFp4) {
    b.lo.x = *reinterpret_cast<const std::uint32_t*>(data + 8 * lane);
    b.lo.y = *reinterpret_cast<const std::uint32_t*>(data + 8 * lane + 4);
  } else {
    b.lo = *reinterpret_cast<const uint4*>(data + 16 * lane);
  }
  std::uint32_t pairs[8];
  cuda::v4::decode_lane(coding, b, lane, pairs);
  static_assert(codec::kV4LaneValues == cuda::v4::kLaneValues, "the kernel's lanes are the codecs' lanes");
  float values[codec::kV4LaneValues];
  Codec::decode_lane(lane, data, scales, values);
  unsigned long long wrong = 0;
  for (int i = 0; i < cuda::v4::kLaneValues; ++i) {
    const auto got = static_cast<std::uint16_t>(i % 2 == 0 ? pairs[i / 2] & 0xFFFFu : pairs[i / 2] >> 16);
    const float want = values[i];
    const std::uint16_t want_bits = codec::encode_bf16(want);
    const bool nan_both = want != want && (got & 0x7FFFu) > 0x7F80u;
    if (got != want_bits && !nan_both) ++wrong;
  }
  atomicAdd(bad, wrong);
  count_checked(checked, cuda::v4::kLaneValues);
}

__global__ void count_lane_mismatches(unsigned long long* bad, unsigned long long* checked) {
  const auto sbyte = static_cast<std::uint8_t>(blockIdx.x);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int shift = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x) / 32;  // 0..255 through the code bytes
  check_codec_lanes<codec::CodecFp8DsMlaV4>(Coding::kFp8Tiles64, sbyte, lane, shift, bad, checked + 0);
  check_codec_lanes<codec::CodecFp8DsMlaV41>(Coding::kMxfp8, sbyte, lane, shift, bad, checked + 1);
  check_codec_lanes<codec::CodecNvfp4DsMlaV41>(Coding::kFp4, sbyte, lane, shift, bad, checked + 2);
}

TEST(cuda_v4_decode, the_lane_decode_equals_the_codecs_for_every_code_and_scale_byte) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer d_bad(std::vector<unsigned long long>{0});
  DeviceBuffer d_checked(std::vector<unsigned long long>{0, 0, 0});
  count_lane_mismatches<<<dim3(256, 8), 1024>>>(d_bad.get<unsigned long long>(), d_checked.get<unsigned long long>());
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(d_bad.download<unsigned long long>()[0], 0u);
  const std::vector<unsigned long long> checked = d_checked.download<unsigned long long>();
  for (const unsigned long long n : checked) EXPECT_EQ(n, 256ull * 8 * 1024 * 16);
}

}  // namespace
}  // namespace mlakv::test
