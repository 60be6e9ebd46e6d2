// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's per-device cache (host code, no device needed): a value
// is read once per device, a failed read (0) is tried again, and devices
// outside the table are read every time.
#include "cuda/per_device.h"

#include <gtest/gtest.h>

namespace {

using mlakv::cuda::PerDevice;

TEST(per_device, reads_a_device_once_and_keeps_each_devices_own_value) {
  PerDevice cache;
  int reads = 0;
  EXPECT_EQ(cache.get(0, [&] { return ++reads, 132; }), 132);
  EXPECT_EQ(cache.get(0, [&] { return ++reads, 7; }), 132);
  EXPECT_EQ(cache.get(3, [&] { return ++reads, 78; }), 78);
  EXPECT_EQ(cache.get(3, [&] { return ++reads, 7; }), 78);
  EXPECT_EQ(reads, 2);
}

TEST(per_device, a_failed_read_is_not_kept) {
  PerDevice cache;
  EXPECT_EQ(cache.get(1, [] { return 0; }), 0);
  EXPECT_EQ(cache.get(1, [] { return 90; }), 90);
  EXPECT_EQ(cache.get(1, [] { return 0; }), 90);
}

TEST(per_device, devices_outside_the_table_are_read_every_time) {
  PerDevice cache;
  int reads = 0;
  for (const int device : {-1, 64, 1000}) {
    EXPECT_EQ(cache.get(device, [&] { return ++reads; }), reads);
    EXPECT_EQ(cache.get(device, [&] { return ++reads; }), reads);
  }
  EXPECT_EQ(reads, 6);
}

}  // namespace
