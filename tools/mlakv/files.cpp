// SPDX-License-Identifier: Apache-2.0
#include "files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mlakv/error.h"

namespace mlakv::tool {
namespace {

[[noreturn]] void fail(const std::string& flag, const std::string& path, const std::string& why) {
  throw Error(ErrorCode::kValue, flag + ": " + path + ": " + why);
}

const char* kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// An open descriptor of a regular file (O_NONBLOCK: opening a FIFO never waits for a writer).
class RegularFile {
 public:
  RegularFile(const std::string& flag, const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) fail(flag, path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail(flag, path, std::string("cannot stat: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(flag, path, std::string("must be a regular file, got ") + kind(st.st_mode));
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  ~RegularFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace

std::uint64_t regular_file_size(const std::string& flag, const std::string& path) {
  return RegularFile(flag, path).size();
}

std::string read_file_range(const std::string& flag, const std::string& path, std::uint64_t offset,
                            std::uint64_t bytes) {
  const RegularFile file(flag, path);
  if (offset > file.size() || bytes > file.size() - offset) {
    fail(flag, path,
         "needs bytes [" + std::to_string(offset) + ", " + std::to_string(offset) + " + " + std::to_string(bytes) +
             ") but the file holds " + std::to_string(file.size()));
  }
  std::string data(static_cast<std::size_t>(bytes), '\0');
  std::uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(file.fd(), data.data() + done, static_cast<std::size_t>(bytes - done),
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(flag, path, n == 0 ? "shorter than its size (changed while read)" : std::strerror(errno));
    done += static_cast<std::uint64_t>(n);
  }
  return data;
}

}  // namespace mlakv::tool
