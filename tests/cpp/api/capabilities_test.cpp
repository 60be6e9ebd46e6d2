// SPDX-License-Identifier: Apache-2.0
// The capability table and the per-format policy: what the public calls consult before they dispatch.
#include "mlakv/capabilities.h"

#include <gtest/gtest.h>

#include <string>

#include "mlakv/formats.h"

namespace {

using mlakv::Backend;
using mlakv::DType;
using mlakv::Format;
using mlakv::Operation;

TEST(capabilities, cpu_writes_and_reads_every_format) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    EXPECT_TRUE(mlakv::supports(info.format, Backend::kCpu, Operation::kWrite)) << info.id;
    EXPECT_TRUE(mlakv::supports(info.format, Backend::kCpu, Operation::kRead)) << info.id;
  }
}

TEST(capabilities, the_cpu_decode_reads_every_format_the_deepseek_v4_family_included) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    EXPECT_TRUE(mlakv::supports(info.format, Backend::kCpu, Operation::kDecode)) << info.id;
  }
}

TEST(capabilities, the_prefill_reads_what_the_decode_reads_on_every_backend) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    for (const Backend backend : {Backend::kCpu, Backend::kCuda}) {
      EXPECT_EQ(mlakv::supports(info.format, backend, Operation::kPrefill),
                mlakv::supports(info.format, backend, Operation::kDecode))
          << info.id;
    }
  }
}

TEST(capabilities, list_states_what_supports_answers) {
  int cpu_entries = 0;
  for (const mlakv::Capability& c : mlakv::capabilities()) {
    cpu_entries += c.backend == Backend::kCpu ? 1 : 0;
    EXPECT_EQ(c.writer, mlakv::supports(c.format, c.backend, Operation::kWrite));
    EXPECT_EQ(c.reader, mlakv::supports(c.format, c.backend, Operation::kRead));
    EXPECT_EQ(c.decode, mlakv::supports(c.format, c.backend, Operation::kDecode));
    EXPECT_EQ(c.prefill, mlakv::supports(c.format, c.backend, Operation::kPrefill));
  }
  EXPECT_EQ(cpu_entries, static_cast<int>(mlakv::formats().size()));
}

TEST(capabilities, cuda_supports_nothing_without_the_cuda_backend) {
  if (MLAKV_WITH_CUDA) GTEST_SKIP() << "built with the CUDA backend";
  EXPECT_FALSE(mlakv::supports(Format::kBf16, Backend::kCuda, Operation::kWrite));
  for (const mlakv::Capability& c : mlakv::capabilities()) EXPECT_EQ(c.backend, Backend::kCpu);
}

TEST(format_policy, only_fp8_e4m3_needs_k_scale) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    EXPECT_EQ(info.policy.needs_k_scale, info.format == Format::kFp8E4m3) << info.id;
  }
}

TEST(format_policy, the_16_bit_records_take_their_own_dtype_only) {
  EXPECT_EQ(mlakv::format_info(Format::kBf16).policy.input_dtype, DType::kBFloat16);
  EXPECT_EQ(mlakv::format_info(Format::kFp16).policy.input_dtype, DType::kFloat16);
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    if (info.format == Format::kBf16 || info.format == Format::kFp16) continue;
    EXPECT_EQ(info.policy.input_dtype, DType::kOther) << info.id;
  }
}

}  // namespace
