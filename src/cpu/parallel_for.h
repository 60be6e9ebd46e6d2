// SPDX-License-Identifier: Apache-2.0
// A blocking parallel loop over [0, n) on short-lived threads: the CPU
// reference's only concurrency. Chunks are disjoint, so results do not depend
// on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace mlakv::cpu {

// Work below this many items per thread is not worth a thread start.
inline constexpr std::int64_t kMinItemsPerThread = 512;

/// Runs fn(i) for i in [0, n); `min_items_per_thread` says how much work pays for a thread.
template <class Fn>
void parallel_for(std::int64_t n, Fn&& fn, std::int64_t min_items_per_thread = kMinItemsPerThread) {
  const std::int64_t wanted = n / std::max<std::int64_t>(1, min_items_per_thread);
  // hardware_concurrency() reads /sys on every call (several microseconds):
  // asked only when the work could use a second thread.
  const std::int64_t hw = wanted > 1 ? std::max<std::int64_t>(1, std::thread::hardware_concurrency()) : 1;
  const std::int64_t threads = std::clamp<std::int64_t>(wanted, 1, hw);
  if (threads == 1) {
    for (std::int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  const std::int64_t chunk = (n + threads - 1) / threads;
  std::vector<std::jthread> workers;
  workers.reserve(static_cast<std::size_t>(threads - 1));
  auto run = [&fn, n, chunk](std::int64_t t) {
    const std::int64_t end = std::min(n, (t + 1) * chunk);
    for (std::int64_t i = t * chunk; i < end; ++i) fn(i);
  };
  for (std::int64_t t = 1; t < threads; ++t) workers.emplace_back(run, t);
  run(0);
}

}  // namespace mlakv::cpu
