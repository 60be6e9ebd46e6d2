// SPDX-License-Identifier: Apache-2.0
#include "host_memory.h"

#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <utility>

#include "mlakv/error.h"
#include "sizes.h"

namespace mlakv::tool {
namespace {

// The process itself: the library, the tool and their allocators' slack.
constexpr double kBaseBytes = 64e6;

// The first number of `file`, or nullopt ("max", no such file).
std::optional<std::uint64_t> read_number(const std::string& file) {
  std::ifstream in(file);  // cgroup and /proc files: regular files of the kernel's
  std::uint64_t value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

// "VmSize:  3896 kB" of /proc/self/status, in bytes.
std::uint64_t own_size(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string word;
  while (status >> word) {
    std::uint64_t kib = 0;
    if (word == key && status >> kib) return kib * 1024;
  }
  return 0;
}

std::uint64_t meminfo_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// What the process may still allocate: the machine's available memory, less
// where a limit is tighter: `ulimit -v` / `-d` (less what the process maps
// already) and a cgroup's memory limit (v2 memory.max, v1
// memory.limit_in_bytes, less its usage), as containers and systemd-run set.
std::uint64_t available_host_memory() {
  std::uint64_t available = meminfo_available();
  const auto tighten = [&](std::uint64_t limit, std::uint64_t used) {
    available = std::min(available, limit > used ? limit - used : 0);
  };
  for (const auto& [resource, key] : {std::pair{RLIMIT_AS, "VmSize:"}, std::pair{RLIMIT_DATA, "VmData:"}}) {
    rlimit limit{};
    if (getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) tighten(limit.rlim_cur, own_size(key));
  }
  const std::pair<const char*, const char*> cgroups[] = {
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}};
  for (const auto& [limit_file, usage_file] : cgroups) {
    const std::optional<std::uint64_t> limit = read_number(limit_file);
    if (limit) tighten(*limit, read_number(usage_file).value_or(0));
  }
  return available;
}

}  // namespace

void check_host_memory(const std::string& flag, const std::string& what, std::int64_t tokens, double bytes_per_token,
                       double extra_bytes, std::string_view fewer) {
  const double need = bytes_per_token * static_cast<double>(tokens) + extra_bytes + kBaseBytes;
  const auto available = static_cast<double>(available_host_memory());
  if (need <= available) return;
  const auto fits = static_cast<std::int64_t>(std::max(0.0, (available - kBaseBytes - extra_bytes) / bytes_per_token));
  throw Error(ErrorCode::kValue,
              fmt::format("{}: {} need about {} of host memory, {} is available; {}", flag, what, format_size(need),
                          format_size(available), fmt::format(fmt::runtime(fewer), fits)));
}

}  // namespace mlakv::tool
