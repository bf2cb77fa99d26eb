#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace snapflow {

// A folder that paths from outside (a worker's state handle, a REST savepoint target, a job's
// file parameter) may name things under, and nothing outside it. Every such path passes here
// before anything reads, writes or deletes it:
// - resolve() takes a path relative to the folder. Refused: empty, absolute, a NUL byte, a
//   `..` that climbs out, or a symlink on the way (the file itself included) that leads out.
// - admit() takes an absolute path (or one relative to the process's working folder) that
//   must lie inside: the same checks after making it absolute.
// The symlink check resolves what exists of the path at the time of the call (lstat along the
// way); a caller that deletes afterwards must delete with unlink, which never follows the last
// component, so a symlink placed later removes only itself.
class confined_folder {
 public:
  // `root` is made absolute and lexically normal; it need not exist yet.
  explicit confined_folder(std::filesystem::path root);

  const std::filesystem::path& root() const { return root_; }

  result<std::filesystem::path> resolve(std::string_view relative) const;
  result<std::filesystem::path> admit(std::string_view path) const;

  // True when the absolute, lexically normal `path` is the root or below it (no I/O).
  bool lexically_contains(const std::filesystem::path& path) const;

 private:
  result<std::filesystem::path> check_symlinks(std::filesystem::path candidate) const;

  std::filesystem::path root_;
};

// The first of `roots` that admits `path`, or an error naming the path and every root.
result<std::filesystem::path> admit_under_any(const std::vector<confined_folder>& roots,
                                              std::string_view path, std::string_view what);

}  // namespace snapflow
