#include "engine/checkpoint/snapshot_adoption.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_storage.hpp"
#include "engine/checkpoint/posix_io.hpp"
#include "engine/paths/confined_folder.hpp"

namespace snapflow {

namespace fs = std::filesystem;
using posix_io::fd_guard;
using posix_io::fsync_dir;
using posix_io::os_error;

namespace {

constexpr std::size_t copy_buffer_bytes = 1 << 20;

error crashed(snapshot_adoption::step s) {
  return error{"adoption stopped by the crash injector after step " +
               std::to_string(static_cast<int>(s))};
}

// Creates `dir` and its missing ancestors, each new entry fsynced into its parent.
result<void> make_folder_durably(const fs::path& dir) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = dir; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0755) != 0 && errno != EEXIST)
      return os_error("create folder", *it, errno);
    if (auto r = fsync_dir(posix_io::parent_or_dot(*it)); !r) return r;
  }
  return success();
}

// A byte copy of the regular file `from` (never through a symlink), fsynced.
result<void> copy_durably(const fs::path& from, const fs::path& to) {
  fd_guard in(::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (in.get() < 0) return os_error("open", from, errno);
  fd_guard out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (out.get() < 0) return os_error("create", to, errno);
  std::string buffer(copy_buffer_bytes, '\0');
  for (;;) {
    const ssize_t n = ::read(in.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os_error("read", from, errno);
    if (n == 0) break;
    const std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
    if (auto w = posix_io::write_all(out.get(), chunk, to); !w) return w;
  }
  if (::fsync(out.get()) != 0) return os_error("fsync", to, errno);
  return success();
}

bool same_file(const fs::path& a, const fs::path& b) {
  struct stat sa {}, sb {};
  return ::lstat(a.c_str(), &sa) == 0 && ::lstat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// A hard link `to` of `from`; a copy where the file system cannot link (another file system,
// no hard links, the link limit). `to` already linked to `from` (a retry) is fine.
result<void> link_or_copy(const fs::path& from, const fs::path& to) {
  if (::link(from.c_str(), to.c_str()) == 0) return success();
  const int e = errno;
  if (e == EEXIST && same_file(from, to)) return success();
  if (e == EXDEV || e == EPERM || e == EMLINK || e == EOPNOTSUPP) return copy_durably(from, to);
  return os_error("link " + from.string() + " as", to, e);
}

// `path` (absolute, from the metadata) confined to `folder`: its name relative to the folder,
// and the file a regular one, not a symlink.
result<fs::path> confined_name(const confined_folder& folder, const std::string& path,
                               std::string_view what) {
  auto admitted = folder.admit(path);
  if (!admitted) return error{std::string(what) + " " + admitted.err().message};
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(*admitted, ec);
  if (ec || st.type() != fs::file_type::regular)
    return error{std::string(what) + " " + path + " is missing or not a regular file"};
  fs::path name = admitted->lexically_relative(folder.root());
  if (name.empty() || name == ".")
    return error{std::string(what) + " " + path + " names its folder"};
  return name;
}

struct adoption_plan {
  completed_checkpoint checkpoint;            // rewritten for the new job
  std::map<fs::path, fs::path> shared_links;  // old shared file -> new one
};

// Steps 1 and the metadata of 3: what to link, and the metadata naming the new places.
result<adoption_plan> plan(const fs::path& source, const fs::path& job_dir, const job_id& job) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(source, ec);
  if (ec || st.type() != fs::file_type::directory)
    return error{"snapshot " + source.string() + " is not a folder (a symlink is not followed)"};
  auto read = checkpoint_storage::read_metadata(source);
  if (!read) return error{"cannot adopt snapshot " + source.string() + ": " + read.err().message};
  adoption_plan out{std::move(*read), {}};
  completed_checkpoint& c = out.checkpoint;
  const fs::path target = checkpoint_storage::checkpoint_dir(job_dir, c.id);
  const confined_folder own(source);
  const confined_folder old_shared(own.root().parent_path() /
                                   checkpoint_storage::shared_folder_name);
  const fs::path new_shared = job_dir / checkpoint_storage::shared_folder_name;
  for (auto& [subtask, state] : c.subtask_states) {
    for (state_handle& h : state.handles) {
      if (h.is_inline()) continue;
      if (h.is_shared()) {
        auto name = confined_name(old_shared, h.path, "shared state file");
        if (!name) return name.err();
        out.shared_links.emplace(old_shared.root() / *name, new_shared / *name);
        h.path = (new_shared / *name).string();
      } else {
        auto name = confined_name(own, h.path, "state file");
        if (!name) return name.err();
        h.path = (target / *name).string();
      }
    }
  }
  c.job = job;
  c.location = target.string();
  // A claimed savepoint is the job's checkpoint: subsumed and deleted like one.
  if (c.is_savepoint()) c.kind = checkpoint_trigger_kind::manual;
  return out;
}

// Step 3's files: every file of `source` linked under `staging`, folders made alike; a symlink
// or anything but files and folders is refused. `_metadata` (and a leftover temp of it) is
// written new, never linked.
result<void> stage_files(const fs::path& source, const fs::path& staging,
                         std::vector<fs::path>& folders) {
  std::error_code ec;
  fs::recursive_directory_iterator it(source, fs::directory_options::none, ec);
  if (ec) return error{"cannot list " + source.string() + ": " + ec.message()};
  for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(source);
    const fs::file_status st = it->symlink_status(ec);
    if (ec) return error{"cannot inspect " + it->path().string() + ": " + ec.message()};
    if (st.type() == fs::file_type::directory) {
      if (::mkdir((staging / rel).c_str(), 0755) != 0 && errno != EEXIST)
        return os_error("create folder", staging / rel, errno);
      folders.push_back(staging / rel);
      continue;
    }
    if (st.type() != fs::file_type::regular)
      return error{"snapshot " + source.string() + " holds " + it->path().string() +
                   ", which is not a regular file (a symlink is never followed)"};
    const std::string name = rel.filename().string();
    if (rel == checkpoint_storage::metadata_file_name ||
        name == std::string(checkpoint_storage::metadata_file_name) + ".tmp")
      continue;
    if (auto r = link_or_copy(it->path(), staging / rel); !r) return r;
  }
  if (ec) return error{"listing " + source.string() + " stopped: " + ec.message()};
  return success();
}

}  // namespace

std::string snapshot_adoption::staging_name(checkpoint_id id) {
  return "adopting-chk-" + std::to_string(id);
}

result<completed_checkpoint> snapshot_adoption::adopt(const fs::path& source_in,
                                                      const fs::path& job_dir_in,
                                                      const job_id& job,
                                                      const crash_injector& crash) {
  const fs::path source = confined_folder(source_in).root();
  const fs::path job_dir = confined_folder(job_dir_in).root();
  if (confined_folder(job_dir).lexically_contains(source) ||
      confined_folder(source).lexically_contains(job_dir))
    return error{"cannot adopt snapshot " + source.string() + " into " + job_dir.string() +
                 ": one lies inside the other"};
  auto planned = plan(source, job_dir, job);
  if (!planned) return planned.err();
  const completed_checkpoint& c = planned->checkpoint;
  const fs::path target = c.location;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(target, ec)))
    return error{"cannot adopt snapshot " + source.string() + ": " + target.string() +
                 " exists already"};

  // 2. Shared files, linked under the same names. A failure from here on takes back what it
  // made in the job's folder (only new names: the source keeps its own).
  std::vector<fs::path> folders{job_dir};
  std::vector<fs::path> made;
  const fs::path staging = job_dir / staging_name(c.id);
  const auto undo = [&](error e) -> result<completed_checkpoint> {
    for (const auto& link : made) ::unlink(link.c_str());
    (void)checkpoint_storage::discard_location(staging);
    return e;
  };
  for (const auto& [from, to] : planned->shared_links) {
    if (auto r = make_folder_durably(to.parent_path()); !r) return undo(r.err());
    std::error_code exists_ec;
    const bool there = fs::exists(fs::symlink_status(to, exists_ec));
    if (auto r = link_or_copy(from, to); !r) return undo(r.err());
    if (!there) made.push_back(to);
    folders.push_back(to.parent_path());
  }
  if (crash && crash(step::shared_linked)) return crashed(step::shared_linked);

  // 3. The folder's files in a staging folder (a leftover of an interrupted adoption is ours).
  if (auto r = checkpoint_storage::discard_location(staging); !r) return undo(r.err());
  if (auto r = make_folder_durably(staging); !r) return undo(r.err());
  folders.push_back(staging);
  if (auto r = stage_files(source, staging, folders); !r) return undo(r.err());
  if (crash && crash(step::folder_staged)) return crashed(step::folder_staged);
  // write_file_durably renames a fresh temp over the name: nothing is written through a link.
  if (auto r = checkpoint_storage::write_file_durably(
          staging / checkpoint_storage::metadata_file_name,
          checkpoint_storage::encode_metadata(c));
      !r)
    return undo(r.err());
  if (crash && crash(step::metadata_rewritten)) return crashed(step::metadata_rewritten);

  // 4. Every changed folder durable (copies were fsynced as they were made), then published.
  for (auto it = folders.rbegin(); it != folders.rend(); ++it)
    if (auto r = fsync_dir(*it); !r) return undo(r.err());
  if (crash && crash(step::synced)) return crashed(step::synced);
  if (::rename(staging.c_str(), target.c_str()) != 0)
    return undo(os_error("rename to", target, errno));
  if (auto r = fsync_dir(job_dir); !r) return r.err();
  if (crash && crash(step::published)) return crashed(step::published);
  return c;
}

result<void> snapshot_adoption::release_source(const fs::path& source) {
  if (auto r = checkpoint_storage::discard_location(source); !r) return r;
  return fsync_dir(posix_io::parent_or_dot(confined_folder(source).root()));
}

}  // namespace snapflow
