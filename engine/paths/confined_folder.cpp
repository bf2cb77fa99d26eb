#include "engine/paths/confined_folder.hpp"

#include <system_error>

namespace snapflow {

namespace fs = std::filesystem;

namespace {

fs::path absolute_normal(const fs::path& p) {
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  if (ec) abs = p;
  return abs.lexically_normal();
}

// `child` (absolute, lexically normal) is `parent` or below it.
bool is_within(const fs::path& parent, const fs::path& child) {
  auto p = parent.begin();
  auto c = child.begin();
  for (; p != parent.end(); ++p, ++c) {
    if (p->empty() && std::next(p) == parent.end()) return true;  // trailing separator
    if (c == child.end() || *p != *c) return false;
  }
  return true;
}

error refused(std::string_view path, const std::string& why) {
  return error{"path '" + std::string(path) + "' refused: " + why};
}

}  // namespace

confined_folder::confined_folder(fs::path root) : root_(absolute_normal(root)) {
  // lexically_normal keeps a trailing separator ("a/b/"): drop it so comparisons are by name.
  if (!root_.has_filename() && root_.has_relative_path()) root_ = root_.parent_path();
}

bool confined_folder::lexically_contains(const fs::path& path) const {
  return is_within(root_, path);
}

result<fs::path> confined_folder::resolve(std::string_view relative) const {
  if (relative.empty()) return refused(relative, "it is empty");
  if (relative.find('\0') != std::string_view::npos) return refused(relative, "it holds a NUL byte");
  const fs::path p(relative);
  if (p.is_absolute() || p.has_root_name() || p.has_root_directory())
    return refused(relative, "it is absolute; only names inside " + root_.string() + " are allowed");
  const fs::path candidate = (root_ / p).lexically_normal();
  if (!lexically_contains(candidate))
    return refused(relative, "it climbs out of " + root_.string() + " with '..'");
  return check_symlinks(candidate);
}

result<fs::path> confined_folder::admit(std::string_view path) const {
  if (path.empty()) return refused(path, "it is empty");
  if (path.find('\0') != std::string_view::npos) return refused(path, "it holds a NUL byte");
  const fs::path candidate = absolute_normal(fs::path(path));
  if (!lexically_contains(candidate))
    return refused(path, "it is outside " + root_.string());
  return check_symlinks(candidate);
}

// Walks from the root to `candidate` one name at a time; each name that exists and is a
// symlink must resolve (a dangling link could be created through later) to a place inside the
// root as the root itself resolves. The first name that does not exist ends the walk: nothing
// below it can be a link yet.
result<fs::path> confined_folder::check_symlinks(fs::path candidate) const {
  std::error_code ec;
  const fs::path real_root = fs::weakly_canonical(root_, ec);
  if (ec) return error{"cannot resolve " + root_.string() + ": " + ec.message()};
  fs::path walked = root_;
  const fs::path rest = candidate.lexically_relative(root_);
  for (const fs::path& name : rest) {
    if (name.empty() || name == ".") continue;
    walked /= name;
    const fs::file_status st = fs::symlink_status(walked, ec);
    if (ec || st.type() == fs::file_type::not_found) break;
    if (st.type() != fs::file_type::symlink) continue;
    const fs::path target = fs::canonical(walked, ec);
    if (ec)
      return refused(candidate.string(), "the symlink " + walked.string() + " leads nowhere");
    if (!is_within(real_root, target))
      return refused(candidate.string(),
                     "the symlink " + walked.string() + " leads out of " + root_.string());
  }
  return candidate;
}

result<fs::path> admit_under_any(const std::vector<confined_folder>& roots, std::string_view path,
                                 std::string_view what) {
  std::string why;
  for (const confined_folder& root : roots) {
    auto admitted = root.admit(path);
    if (admitted) return admitted;
    if (why.empty()) why = admitted.err().message;
  }
  std::string names;
  for (const confined_folder& root : roots) names += (names.empty() ? "" : ", ") + root.root().string();
  return error{std::string(what) + " '" + std::string(path) + "' is outside the allowed roots (" +
               (names.empty() ? std::string("none") : names) + ")" +
               (why.empty() ? std::string() : ": " + why)};
}

}  // namespace snapflow
