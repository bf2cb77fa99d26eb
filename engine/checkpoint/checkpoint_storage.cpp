#include "engine/checkpoint/checkpoint_storage.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <charconv>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include <msgpack.hpp>

#include "engine/checkpoint/crc32c.hpp"
#include "engine/checkpoint/posix_io.hpp"

namespace snapflow {

namespace fs = std::filesystem;
using posix_io::fd_guard;
using posix_io::fsync_dir;
using posix_io::is_out_of_space;
using posix_io::out_of_space;
using posix_io::os_error;
using posix_io::parent_or_dot;
using posix_io::write_all;

namespace {

// ---- the durability tests' fault injector (see write_fault_injector).

std::mutex fault_injector_mutex;
checkpoint_storage::write_fault_injector fault_injector;  // guarded by the mutex
std::atomic<bool> fault_injector_set{false};

// True when the injector asks the write to stop before `step`.
bool injected_crash(const fs::path& file, checkpoint_storage::write_step step) {
  if (!fault_injector_set.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(fault_injector_mutex);
  return fault_injector && fault_injector(file, step);
}

error crash_error(const fs::path& file, checkpoint_storage::write_step step) {
  return error{"injected crash before step " + std::to_string(static_cast<int>(step)) +
               " of writing " + file.string()};
}

fs::path temp_path(const fs::path& file) {
  fs::path tmp = file;
  tmp += ".tmp";
  return tmp;
}

// Creates `dir` and any missing ancestors, fsyncing each new folder's parent so the new entries
// survive a crash along with the file written into them.
result<void> create_directories_durably(const fs::path& dir) {
  std::vector<fs::path> missing;
  fs::path p = dir;
  // Bounded by the depth of the path.
  for (;;) {
    std::error_code ec;
    const bool exists = fs::exists(p, ec);
    if (ec) return error{"stat " + p.string() + ": " + ec.message()};
    if (exists) break;
    missing.push_back(p);
    fs::path parent = p.parent_path();
    if (parent.empty() || parent == p) break;
    p = std::move(parent);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    // EEXIST: another thread created it meanwhile (two checkpoints of one job), which is fine.
    if (::mkdir(it->c_str(), 0755) != 0 && errno != EEXIST)
      return os_error("create folder", *it, errno);
    if (auto r = fsync_dir(parent_or_dot(*it)); !r) return r;
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return error{"not a folder: " + dir.string()};
  return success();
}

// The rest of a durable write once `<file>.tmp` is open on `fd`: write, fsync, close, rename
// over `file`, fsync the folder. Removes the temp file when a step fails.
result<void> commit_temp_file(fd_guard& fd, const fs::path& file, std::string_view bytes) {
  using step = checkpoint_storage::write_step;
  const fs::path tmp = temp_path(file);
  // Two halves only so a durability test can stop between them (a torn temp file); one
  // write otherwise, a system call less on the way to "complete".
  const std::string_view first =
      fault_injector_set.load(std::memory_order_acquire) ? bytes.substr(0, bytes.size() / 2)
                                                         : bytes;
  if (injected_crash(file, step::write_first_half))
    return crash_error(file, step::write_first_half);
  int failed_errno = 0;
  auto r = write_all(fd.get(), first, tmp, &failed_errno);
  if (r && injected_crash(file, step::write_rest)) return crash_error(file, step::write_rest);
  if (r) r = write_all(fd.get(), bytes.substr(first.size()), tmp, &failed_errno);
  if (r && injected_crash(file, step::fsync_temp)) return crash_error(file, step::fsync_temp);
  if (r && ::fsync(fd.get()) != 0) {
    failed_errno = errno;
    r = os_error("fsync", tmp, errno);
  }
  fd.reset();
  if (!r) {
    ::unlink(tmp.c_str());
    // A full disk says how much room the file needs, and where.
    if (is_out_of_space(failed_errno))
      return out_of_space(parent_or_dot(file), file.filename().string(), bytes.size());
    return r;
  }
  if (injected_crash(file, step::rename)) return crash_error(file, step::rename);
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return os_error("rename " + tmp.filename().string() + " into", file, e);
  }
  if (injected_crash(file, step::fsync_folder)) return crash_error(file, step::fsync_folder);
  // The rename is only durable once the folder's entry is.
  return fsync_dir(parent_or_dot(file));
}

// ---- little-endian fixed-width fields of the metadata frame.

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}
std::uint32_t get_u32(std::string_view in) {
  assert(in.size() >= 4);
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return v;
}
std::uint64_t get_u64(std::string_view in) {
  assert(in.size() >= 8);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return v;
}

constexpr std::size_t header_bytes = 12 + 4 + 8;  // magic, version, body length
constexpr std::size_t trailer_bytes = 4;          // CRC-32C
// The body nests: map > subtasks array > subtask map > handles array > handle map.
constexpr std::size_t max_body_depth = 6;

// ---- msgpack body.

// Packs straight into the metadata frame's string: one buffer for header, body and trailer.
struct string_sink {
  std::string& out;
  void write(const char* data, std::size_t size) { out.append(data, size); }
};
using packer = msgpack::packer<string_sink>;

void pack_str(packer& pk, std::string_view s) {
  assert(s.size() <= std::numeric_limits<std::uint32_t>::max());
  pk.pack_str(static_cast<std::uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

void pack_bin(packer& pk, std::string_view s) {
  assert(s.size() <= std::numeric_limits<std::uint32_t>::max());
  pk.pack_bin(static_cast<std::uint32_t>(s.size()));
  pk.pack_bin_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

void encode_body(const completed_checkpoint& c, std::string& out) {
  string_sink sink{out};
  packer pk(sink);
  pk.pack_map(8);
  pack_str(pk, "job");
  pack_str(pk, c.job);
  pack_str(pk, "id");
  pk.pack(c.id);
  pack_str(pk, "kind");
  pk.pack(static_cast<std::uint8_t>(c.kind));
  pack_str(pk, "trigger_us");
  pk.pack(c.trigger_timestamp_us);
  pack_str(pk, "completion_us");
  pk.pack(c.completion_timestamp_us);
  pack_str(pk, "location");
  pack_str(pk, c.location);
  pack_str(pk, "subtasks");
  pk.pack_array(static_cast<std::uint32_t>(c.subtask_states.size()));
  for (const auto& [subtask, state] : c.subtask_states) {
    pk.pack_map(state.keyed ? 5 : 4);
    pack_str(pk, "vertex");
    pk.pack(subtask.vertex);
    pack_str(pk, "index");
    pk.pack(subtask.index);
    pack_str(pk, "state_size");
    pk.pack(state.state_size);
    if (state.keyed) {
      // [max parallelism, first key group, last key group]; absent for non-keyed state.
      pack_str(pk, "key_groups");
      pk.pack_array(3);
      pk.pack(state.keyed->max_parallelism);
      pk.pack(state.keyed->first_key_group);
      pk.pack(state.keyed->last_key_group);
    }
    pack_str(pk, "handles");
    pk.pack_array(static_cast<std::uint32_t>(state.handles.size()));
    for (const auto& h : state.handles) {
      // "sharing" only for a shared file (absent: the checkpoint's own).
      pk.pack_map(h.is_shared() ? 4 : 3);
      if (h.is_shared()) {
        pack_str(pk, "sharing");
        pack_str(pk, to_string(h.sharing));
      }
      if (h.is_inline()) {
        pack_str(pk, "bytes");
        pk.pack_bin(static_cast<std::uint32_t>(h.inline_bytes->size()));
        pk.pack_bin_body(h.inline_bytes->data(), static_cast<std::uint32_t>(h.inline_bytes->size()));
      } else {
        pack_str(pk, "path");
        pack_str(pk, h.path);
      }
      pack_str(pk, "size");
      pk.pack(h.size);
      pack_str(pk, "crc");
      pk.pack(h.checksum);
    }
  }
  pack_str(pk, "master_states");
  pk.pack_map(static_cast<std::uint32_t>(c.master_states.size()));
  for (const auto& [name, bytes] : c.master_states) {
    pack_str(pk, name);
    pack_bin(pk, bytes);
  }
}

// Readers over an unpacked object. They check every type themselves (msgpack's convert throws),
// and name the offending field.
error bad_field(std::string_view field, std::string_view expected) {
  return error{"checkpoint metadata: field '" + std::string(field) + "' is missing or not " +
               std::string(expected)};
}

const msgpack::object* find_field(const msgpack::object& map, std::string_view key) {
  assert(map.type == msgpack::type::MAP);
  for (std::uint32_t i = 0; i < map.via.map.size; ++i) {
    const auto& kv = map.via.map.ptr[i];
    if (kv.key.type == msgpack::type::STR &&
        std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key)
      return &kv.val;
  }
  return nullptr;
}

bool read_u64(const msgpack::object* o, std::uint64_t& out) {
  if (o == nullptr || o->type != msgpack::type::POSITIVE_INTEGER) return false;
  out = o->via.u64;
  return true;
}

bool read_i64(const msgpack::object* o, std::int64_t& out) {
  if (o == nullptr) return false;
  if (o->type == msgpack::type::NEGATIVE_INTEGER) {
    out = o->via.i64;
    return true;
  }
  if (o->type == msgpack::type::POSITIVE_INTEGER &&
      o->via.u64 <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    out = static_cast<std::int64_t>(o->via.u64);
    return true;
  }
  return false;
}

bool read_u32(const msgpack::object* o, std::uint32_t& out) {
  std::uint64_t v = 0;
  if (!read_u64(o, v) || v > std::numeric_limits<std::uint32_t>::max()) return false;
  out = static_cast<std::uint32_t>(v);
  return true;
}

bool read_str(const msgpack::object* o, std::string& out) {
  if (o == nullptr || o->type != msgpack::type::STR) return false;
  out.assign(o->via.str.ptr, o->via.str.size);
  return true;
}

// Master states are bytes; a str is accepted too (what another writer might produce).
bool read_bytes(const msgpack::object* o, std::string& out) {
  if (o != nullptr && o->type == msgpack::type::BIN) {
    out.assign(o->via.bin.ptr, o->via.bin.size);
    return true;
  }
  return read_str(o, out);
}

result<state_handle> read_handle(const msgpack::object& o) {
  if (o.type != msgpack::type::MAP) return bad_field("handles[]", "a map");
  state_handle h;
  // A handle names a file or carries the bytes, never both.
  const msgpack::object* bytes = find_field(o, "bytes");
  if (bytes != nullptr) {
    if (find_field(o, "path") != nullptr) return bad_field("handles[]", "a path or bytes, not both");
    if (bytes->type != msgpack::type::BIN) return bad_field("bytes", "bin");
    h.inline_bytes.emplace(bytes->via.bin.ptr, bytes->via.bin.size);
  } else if (!read_str(find_field(o, "path"), h.path)) {
    return bad_field("path", "a string");
  }
  if (!read_u64(find_field(o, "size"), h.size)) return bad_field("size", "an unsigned integer");
  if (!read_u32(find_field(o, "crc"), h.checksum)) return bad_field("crc", "a 32-bit unsigned");
  if (const msgpack::object* sharing = find_field(o, "sharing")) {
    std::string name;
    if (!read_str(sharing, name)) return bad_field("sharing", "a string");
    if (name == to_string(handle_sharing::shared_new))
      h.sharing = handle_sharing::shared_new;
    else if (name == to_string(handle_sharing::shared_reused))
      h.sharing = handle_sharing::shared_reused;
    else
      return bad_field("sharing", "\"shared_new\" or \"shared_reused\"");
    if (h.is_inline()) return bad_field("handles[]", "a file when shared");
  }
  return h;
}

// "key_groups": [max parallelism, first, last], a non-empty range inside the max parallelism.
// Absent (metadata of non-keyed state or from before it was recorded): no scope.
result<std::optional<keyed_state_scope>> read_key_groups(const msgpack::object& subtask) {
  const msgpack::object* o = find_field(subtask, "key_groups");
  if (o == nullptr) return std::optional<keyed_state_scope>{};
  const auto invalid = [] {
    return bad_field("key_groups", "[max parallelism, first, last] with first <= last < max");
  };
  if (o->type != msgpack::type::ARRAY || o->via.array.size != 3) return invalid();
  keyed_state_scope scope;
  const msgpack::object* v = o->via.array.ptr;
  if (!read_u32(&v[0], scope.max_parallelism) || !read_u32(&v[1], scope.first_key_group) ||
      !read_u32(&v[2], scope.last_key_group) || scope.first_key_group > scope.last_key_group ||
      scope.last_key_group >= scope.max_parallelism)
    return invalid();
  return std::optional<keyed_state_scope>{scope};
}

result<completed_checkpoint> read_body(const msgpack::object& root) {
  if (root.type != msgpack::type::MAP) return error{"checkpoint metadata: body is not a map"};
  completed_checkpoint c;
  if (!read_str(find_field(root, "job"), c.job)) return bad_field("job", "a string");
  if (!read_i64(find_field(root, "id"), c.id) || c.id < 1)
    return bad_field("id", "a positive integer");
  std::uint64_t kind = 0;
  if (!read_u64(find_field(root, "kind"), kind) ||
      kind > static_cast<std::uint64_t>(checkpoint_trigger_kind::periodic))
    return bad_field("kind", "0, 1 or 2");
  c.kind = static_cast<checkpoint_trigger_kind>(kind);
  if (!read_i64(find_field(root, "trigger_us"), c.trigger_timestamp_us))
    return bad_field("trigger_us", "an integer");
  if (!read_i64(find_field(root, "completion_us"), c.completion_timestamp_us))
    return bad_field("completion_us", "an integer");
  if (!read_str(find_field(root, "location"), c.location)) return bad_field("location", "a string");

  const msgpack::object* subtasks = find_field(root, "subtasks");
  if (subtasks == nullptr || subtasks->type != msgpack::type::ARRAY)
    return bad_field("subtasks", "an array");
  for (std::uint32_t i = 0; i < subtasks->via.array.size; ++i) {
    const msgpack::object& s = subtasks->via.array.ptr[i];
    if (s.type != msgpack::type::MAP) return bad_field("subtasks[]", "a map");
    subtask_id id;
    subtask_state state;
    if (!read_u32(find_field(s, "vertex"), id.vertex)) return bad_field("vertex", "a u32");
    if (!read_u32(find_field(s, "index"), id.index)) return bad_field("index", "a u32");
    if (!read_u64(find_field(s, "state_size"), state.state_size))
      return bad_field("state_size", "an unsigned integer");
    auto keyed = read_key_groups(s);
    if (!keyed) return keyed.err();
    state.keyed = *keyed;
    const msgpack::object* handles = find_field(s, "handles");
    if (handles == nullptr || handles->type != msgpack::type::ARRAY)
      return bad_field("handles", "an array");
    state.handles.reserve(handles->via.array.size);
    for (std::uint32_t j = 0; j < handles->via.array.size; ++j) {
      auto h = read_handle(handles->via.array.ptr[j]);
      if (!h) return h.err();
      state.handles.push_back(std::move(h).value());
    }
    if (!c.subtask_states.emplace(id, std::move(state)).second)
      return error{"checkpoint metadata: subtask v" + std::to_string(id.vertex) + "#" +
                   std::to_string(id.index) + " appears twice"};
  }

  const msgpack::object* masters = find_field(root, "master_states");
  if (masters == nullptr || masters->type != msgpack::type::MAP)
    return bad_field("master_states", "a map");
  for (std::uint32_t i = 0; i < masters->via.map.size; ++i) {
    const auto& kv = masters->via.map.ptr[i];
    std::string name;
    std::string bytes;
    if (!read_str(&kv.key, name)) return bad_field("master_states key", "a string");
    if (!read_bytes(&kv.val, bytes)) return bad_field("master_states value", "bytes");
    if (!c.master_states.emplace(std::move(name), std::move(bytes)).second)
      return error{"checkpoint metadata: master state appears twice"};
  }
  return c;
}

// "chk-<id>" with a canonical positive decimal id (no sign, no leading zeros), else nullopt.
std::optional<checkpoint_id> parse_checkpoint_folder(std::string_view name) {
  constexpr std::string_view prefix = "chk-";
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.empty() || digits.front() == '0') return std::nullopt;
  checkpoint_id id = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || end != digits.data() + digits.size() || id < 1) return std::nullopt;
  return id;
}

}  // namespace

checkpoint_storage::checkpoint_storage(fs::path job_dir, std::size_t retained)
    : job_dir_(std::move(job_dir)), log_(std::make_unique<metadata_log>(job_dir_, retained)) {
  assert(!job_dir_.empty());
}

checkpoint_storage::~checkpoint_storage() = default;

fs::path checkpoint_storage::checkpoint_dir(checkpoint_id id) const {
  return checkpoint_dir(job_dir_, id);
}

fs::path checkpoint_storage::checkpoint_dir(const fs::path& job_dir, checkpoint_id id) {
  assert(id >= 1);
  return job_dir / ("chk-" + std::to_string(id));
}

fs::path checkpoint_storage::savepoint_dir(const fs::path& base, const job_id& job,
                                           checkpoint_id id) {
  assert(id >= 1);
  assert(!job.empty());
  return base / ("savepoint-" + job.substr(0, 6) + "-" + std::to_string(id));
}

std::string checkpoint_storage::encode_metadata(const completed_checkpoint& checkpoint) {
  std::string out;
  // Room for a small job's metadata in one allocation; larger ones grow as they pack.
  out.reserve(4096);
  out.append(metadata_magic);
  put_u32(out, metadata_version);
  put_u64(out, 0);  // the body's length, filled in below
  encode_body(checkpoint, out);
  std::string length;
  put_u64(length, out.size() - header_bytes);
  out.replace(header_bytes - length.size(), length.size(), length);
  put_u32(out, crc32c(out));
  return out;
}

result<completed_checkpoint> checkpoint_storage::decode_metadata(std::string_view bytes) {
  if (bytes.size() < header_bytes + trailer_bytes)
    return error{"checkpoint metadata: " + std::to_string(bytes.size()) +
                 " bytes is shorter than the header (torn write?)"};
  if (bytes.substr(0, metadata_magic.size()) != metadata_magic)
    return error{"checkpoint metadata: bad magic (not a snapflow metadata file)"};
  const std::uint32_t version = get_u32(bytes.substr(metadata_magic.size()));
  if (version != metadata_version)
    return error{"checkpoint metadata: unsupported format version " + std::to_string(version)};
  const std::uint64_t body_size = get_u64(bytes.substr(metadata_magic.size() + 4));
  if (body_size != bytes.size() - header_bytes - trailer_bytes)
    return error{"checkpoint metadata: body length " + std::to_string(body_size) +
                 " does not match the file (" + std::to_string(bytes.size()) +
                 " bytes; torn write?)"};
  const std::uint32_t stored_crc = get_u32(bytes.substr(bytes.size() - trailer_bytes));
  const std::uint32_t actual_crc = crc32c(bytes.substr(0, bytes.size() - trailer_bytes));
  if (stored_crc != actual_crc) return error{"checkpoint metadata: checksum mismatch"};

  const std::string_view body = bytes.substr(header_bytes, body_size);
  // No container or string can be longer than the body holds: a forged length cannot make the
  // unpacker reserve more memory than the file's size.
  const std::size_t n = body.size();
  const msgpack::unpack_limit limit(n, n, n, n, n, max_body_depth);
  try {
    std::size_t offset = 0;
    msgpack::object_handle handle =
        msgpack::unpack(body.data(), body.size(), offset, nullptr, nullptr, limit);
    if (offset != body.size()) return error{"checkpoint metadata: trailing bytes after the body"};
    return read_body(handle.get());
  } catch (const std::exception& e) {
    return error{std::string("checkpoint metadata: malformed body: ") + e.what()};
  } catch (...) {
    return error{"checkpoint metadata: malformed body"};
  }
}

result<void> checkpoint_storage::write_metadata(const completed_checkpoint& checkpoint) {
  assert(!checkpoint.location.empty());
  assert(checkpoint.id >= 1);
  return write_file_durably(fs::path(checkpoint.location) / metadata_file_name,
                            encode_metadata(checkpoint));
}

result<void> checkpoint_storage::write_metadata(const completed_checkpoint& checkpoint,
                                               prepared_metadata file) const {
  assert(!checkpoint.location.empty());
  assert(checkpoint.id >= 1);
  assert(file.is_open());
  assert(file.folder() == fs::path(checkpoint.location));
  const fs::path target = file.folder() / metadata_file_name;
  const bool logged = file.logged();
  assert(!logged || parent_or_dot(target.parent_path()) == job_dir_);
  fd_guard fd(file.release());
  const std::string bytes = encode_metadata(checkpoint);
  // Into the empty `_metadata` prepare_location made: no path is looked up, nothing renamed.
  // Whole once fsynced (or, logged, once in the log); until then a crash leaves it short,
  // which its length and checksum reject.
  const std::string_view all(bytes);
  const std::string_view first = fault_injector_set.load(std::memory_order_acquire)
                                     ? all.substr(0, all.size() / 2)
                                     : all;
  if (injected_crash(target, write_step::write_first_half))
    return crash_error(target, write_step::write_first_half);
  int failed_errno = 0;
  auto r = write_all(fd.get(), first, target, &failed_errno);
  if (r && injected_crash(target, write_step::write_rest))
    return crash_error(target, write_step::write_rest);
  if (r) r = write_all(fd.get(), all.substr(first.size()), target, &failed_errno);
  // A logged checkpoint's sync is its log append (below); the file itself is not synced.
  if (r && injected_crash(target, write_step::fsync_temp))
    return crash_error(target, write_step::fsync_temp);
  if (r && !logged && ::fsync(fd.get()) != 0) {
    failed_errno = errno;
    r = os_error("fsync", target, errno);
  }
  // A full disk says how much room the metadata needs, and where.
  if (!r && is_out_of_space(failed_errno))
    r = out_of_space(target.parent_path(), "checkpoint " + std::to_string(checkpoint.id) + "'s metadata",
                     bytes.size());
  // Written through a descriptor, so a file removed meanwhile (its folder discarded) would
  // take the bytes and vanish: only a file still in its folder is a checkpoint.
  struct stat st {};
  const bool stat_ok = ::fstat(fd.get(), &st) == 0;
  if (r && !stat_ok) r = os_error("stat", target, errno);
  const bool removed = stat_ok && st.st_nlink == 0;
  if (r && removed)
    r = error{"the metadata file " + target.string() +
              " was removed before its checkpoint completed"};
  fd.reset();
  if (r && logged) r = log_->append(checkpoint.id, bytes);
  // A failed checkpoint leaves no metadata, not even a torn one; a file removed meanwhile is
  // gone already, and whatever now has its name is not this write's.
  if (!r && !removed) ::unlink(target.c_str());
  return r;
}

namespace {

// The file's metadata, decoded; `dir` names it in errors.
result<completed_checkpoint> read_metadata_file(const fs::path& dir) {
  auto bytes = checkpoint_storage::read_file(dir / checkpoint_storage::metadata_file_name,
                                             checkpoint_storage::max_metadata_bytes);
  if (!bytes) return bytes.err();
  if (bytes->empty())  // prepared (prepare_location), never written
    return error{"no metadata written in " + dir.string() + " (the checkpoint did not complete)"};
  auto checkpoint = checkpoint_storage::decode_metadata(*bytes);
  if (!checkpoint) return error{checkpoint.err().message + " in " + dir.string()};
  checkpoint->location = dir.string();
  return checkpoint;
}

// The log's copy of chk-<id>'s metadata, when `dir` is a checkpoint folder and the log in its
// parent holds a whole record of that id that decodes to it.
std::optional<completed_checkpoint> logged_metadata(const fs::path& dir, checkpoint_id id,
                                                    const std::vector<metadata_log::record>* log) {
  std::optional<std::string> bytes;
  if (log) {
    for (auto it = log->rbegin(); it != log->rend() && !bytes; ++it)
      if (it->id == id) bytes = it->metadata;
  } else {
    bytes = metadata_log::find(parent_or_dot(dir), id);
  }
  if (!bytes) return std::nullopt;
  auto checkpoint = checkpoint_storage::decode_metadata(*bytes);
  if (!checkpoint || checkpoint->id != id) return std::nullopt;
  checkpoint->location = dir.string();
  return std::move(checkpoint).value();
}

}  // namespace

result<completed_checkpoint> checkpoint_storage::read_metadata(const fs::path& dir) {
  auto checkpoint = read_metadata_file(dir);
  if (checkpoint) return checkpoint;
  // Only while the folder is there: a discarded checkpoint's record outlives its folder.
  std::error_code ec;
  if (auto id = parse_checkpoint_folder(dir.filename().string()); id && fs::is_directory(dir, ec))
    if (auto logged = logged_metadata(dir, *id, nullptr)) return std::move(*logged);
  return checkpoint;
}

std::vector<std::filesystem::path> checkpoint_storage::unreferenced_shared_files(
    const std::filesystem::path& job_dir, const std::vector<completed_checkpoint>& kept) {
  const std::filesystem::path folder = job_dir / shared_folder_name;
  std::set<std::filesystem::path> named;
  for (const completed_checkpoint& c : kept)
    for (const state_handle& h : c.all_handles())
      if (h.is_shared()) named.insert(std::filesystem::path(h.path).lexically_normal());
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end;
       it.increment(ec)) {
    // Only regular files directly inside: a symlink or a folder there is not ours to follow.
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    const auto path = std::filesystem::absolute(it->path(), ec).lexically_normal();
    if (!ec && !named.contains(path)) out.push_back(path);
  }
  return out;
}

checkpoint_storage::shared_sweep_result checkpoint_storage::remove_unreferenced_shared_files(
    const std::filesystem::path& job_dir, const std::vector<completed_checkpoint>& kept) {
  shared_sweep_result out;
  for (auto& file : unreferenced_shared_files(job_dir, kept)) {
    std::error_code ec;
    if (std::filesystem::remove(file, ec))
      out.removed.push_back(std::move(file));
    else if (ec)
      out.failures.push_back("cannot remove " + file.string() + ": " + ec.message());
  }
  return out;
}

checkpoint_storage::recovered checkpoint_storage::recover() const {
  recovered out;
  std::error_code ec;
  if (!fs::exists(job_dir_, ec)) {
    if (ec) out.warnings.push_back("cannot look for checkpoints in " + job_dir_.string() + ": " +
                                   ec.message());
    return out;
  }
  metadata_log::scanned log = metadata_log::scan(job_dir_);
  out.warnings = std::move(log.warnings);
  std::set<checkpoint_id> logged_ids;
  for (const auto& r : log.records) logged_ids.insert(r.id);
  fs::directory_iterator it(job_dir_, ec);
  if (ec) {
    out.warnings.push_back("cannot list " + job_dir_.string() + ": " + ec.message());
    return out;
  }
  // A failed increment leaves the iterator at its end: the error is read after the loop.
  for (const fs::directory_iterator end; it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("chk-", 0) != 0) continue;  // the id counter, shared state, ...
    const auto id = parse_checkpoint_folder(name);
    if (!id) {
      out.warnings.push_back("skipping " + name + ": not a checkpoint folder name");
      continue;
    }
    std::error_code dir_ec;
    if (!it->is_directory(dir_ec)) {
      out.warnings.push_back("skipping " + name + ": not a folder");
      continue;
    }
    // Unless the log holds it: a logged checkpoint with its state inline whose file's entry a
    // crash of the machine took.
    if (fs::is_empty(it->path(), dir_ec) && !dir_ec && !logged_ids.contains(*id)) {
      out.empty_folders.push_back(it->path());
      continue;
    }
    auto checkpoint = read_metadata_file(it->path());
    if (!checkpoint) {
      // A logged checkpoint whose unsynced file a crash of the machine took: whole in the
      // log, and written back so that the folder reads right again.
      if (auto from_log = logged_metadata(it->path(), *id, &log.records)) {
        const fs::path file = it->path() / metadata_file_name;
        if (auto rewritten = write_file_durably(file, encode_metadata(*from_log)); rewritten)
          out.repaired.push_back(*id);
        else  // still recovered, from the log
          out.warnings.push_back("checkpoint " + std::to_string(*id) +
                                 ": restoring its metadata file from the log: " +
                                 rewritten.err().message);
        out.checkpoints.push_back(std::move(*from_log));
        continue;
      }
      // Most often a checkpoint that was still in progress when the process died.
      out.warnings.push_back("skipping " + name + ": " + checkpoint.err().message);
      const fs::path file = it->path() / metadata_file_name;
      std::error_code file_ec;
      bool incomplete = !fs::exists(file, file_ec) && !file_ec;
      // An empty one was prepared and never written. A torn or corrupt one is kept: it may be
      // a completed checkpoint the disk damaged, for a person to look at.
      if (!incomplete && !file_ec) incomplete = fs::is_regular_file(file, file_ec) &&
                                                fs::file_size(file, file_ec) == 0 && !file_ec;
      if (incomplete) out.incomplete_folders.push_back(it->path());
      continue;
    }
    if (checkpoint->id != *id) {
      out.warnings.push_back("skipping " + name + ": its metadata is for checkpoint " +
                             std::to_string(checkpoint->id));
      continue;
    }
    out.checkpoints.push_back(std::move(checkpoint).value());
  }
  if (ec) out.warnings.push_back("listing " + job_dir_.string() + " stopped: " + ec.message());
  std::sort(out.checkpoints.begin(), out.checkpoints.end(),
            [](const completed_checkpoint& a, const completed_checkpoint& b) {
              return a.id < b.id;
            });
  return out;
}

result<void> checkpoint_storage::premake_locations(const std::vector<fs::path>& dirs) {
  std::set<fs::path> parents;
  for (const auto& dir : dirs) {
    assert(!dir.empty());
    const fs::path parent = parent_or_dot(dir);
    if (parents.insert(parent).second)
      if (auto r = create_directories_durably(parent); !r) return r;
    // EEXIST: made before (a crash left it, or a preparation at trigger time), which is fine.
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return os_error("create folder", dir, errno);
  }
  for (const auto& parent : parents)
    if (auto r = fsync_dir(parent); !r) return r;
  return success();
}

result<prepared_metadata> checkpoint_storage::prepare_location(const fs::path& dir,
                                                              prepare_options options) {
  assert(!dir.empty());
  const fs::path file = dir / metadata_file_name;
  if (injected_crash(file, write_step::create_folders))
    return crash_error(file, write_step::create_folders);
  std::error_code ec;
  if (!options.folder_premade || !fs::is_directory(dir, ec))
    if (auto r = create_directories_durably(dir); !r) return r.err();
  if (injected_crash(file, write_step::create_temp))
    return crash_error(file, write_step::create_temp);
  // An empty `_metadata` already there is a preparation that was never written (a crash
  // between two checkpoints leaves one for the next id): reused. Never truncated: a file with
  // bytes in it is refused here and left as it is.
  fd_guard fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) return os_error("create", file, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return os_error("stat", file, errno);
  if (st.st_size != 0)
    return error{"cannot prepare " + dir.string() + ": it holds a metadata file already"};
  // The log makes a logged checkpoint durable: its file's entry and bytes need no sync.
  if (options.logged) return prepared_metadata(dir, fd.release(), true);
  // Room for a small job's metadata, allocated now rather than by the write at completion
  // (the size stays 0 until then). Only a hint: a file system without fallocate still works.
  (void)::fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 0, 4096);
  // The new entry durable now, so that completing needs the file's own fsync only.
  if (injected_crash(file, write_step::fsync_folder))
    return crash_error(file, write_step::fsync_folder);
  if (auto r = fsync_dir(dir); !r) return r.err();
  return prepared_metadata(dir, fd.release(), false);
}

result<void> checkpoint_storage::seal(const std::vector<fs::path>& folders) const {
  const auto keep_log = [&](error e) -> result<void> {
    (void)log_->close(false);
    return e;
  };
  for (const auto& dir : folders) {
    const fs::path file = dir / metadata_file_name;
    fd_guard fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ENOENT) continue;  // discarded meanwhile
      return keep_log(os_error("open", file, errno));
    }
    if (::fsync(fd.get()) != 0) return keep_log(os_error("fsync", file, errno));
    if (auto r = fsync_dir(dir); !r) return keep_log(r.err());
  }
  return log_->close();
}

result<void> checkpoint_storage::discard_location(const fs::path& dir) {
  assert(!dir.empty());
  std::error_code ec;
  fs::remove_all(dir, ec);
  // Gone meanwhile (another discard of it, or a sweep) is as good as removed.
  if (ec && ec != std::errc::no_such_file_or_directory)
    return error{"remove " + dir.string() + ": " + ec.message()};
  return success();
}

std::optional<checkpoint_id> checkpoint_storage::checkpoint_folder_id(
    std::string_view folder_name) {
  return parse_checkpoint_folder(folder_name);
}

checkpoint_storage::sweep_result checkpoint_storage::sweep_orphans(
    checkpoint_id from, checkpoint_id to, const std::set<checkpoint_id>& keep) const {
  sweep_result out;
  std::error_code ec;
  fs::directory_iterator it(job_dir_, ec);
  if (ec) {
    // No folder yet is nothing to sweep.
    if (ec != std::errc::no_such_file_or_directory)
      out.failures.push_back("cannot list " + job_dir_.string() + ": " + ec.message());
    return out;
  }
  std::vector<std::pair<checkpoint_id, fs::path>> orphans;
  // A failed increment leaves the iterator at its end: the error is read after the loop.
  for (const fs::directory_iterator end; it != end; it.increment(ec)) {
    const auto id = parse_checkpoint_folder(it->path().filename().string());
    if (!id || *id < from || *id > to || keep.contains(*id)) continue;
    std::error_code dir_ec;
    if (it->is_directory(dir_ec)) orphans.emplace_back(*id, it->path());
  }
  if (ec) out.failures.push_back("listing " + job_dir_.string() + " stopped: " + ec.message());
  for (const auto& [id, dir] : orphans) {
    if (auto r = discard_location(dir); !r)
      out.failures.push_back(r.err().message);
    else
      out.removed.push_back(id);
  }
  return out;
}

result<void> checkpoint_storage::discard_state(const std::vector<state_handle>& handles) {
  std::size_t failures = 0;
  std::string first;
  for (const auto& h : handles) {
    if (h.is_inline() || h.path.empty()) continue;  // nothing on disk
    std::error_code ec;
    fs::remove(h.path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      if (failures++ == 0) first = "remove " + h.path + ": " + ec.message();
    }
  }
  if (failures > 0)
    return error{"could not remove " + std::to_string(failures) + " of " +
                 std::to_string(handles.size()) + " state files; first: " + first};
  return success();
}

result<void> checkpoint_storage::verify_state(const state_handle& h) {
  if (h.is_inline()) {
    if (h.inline_bytes->size() != h.size)
      return error{"inline state has " + std::to_string(h.inline_bytes->size()) +
                   " bytes, expected " + std::to_string(h.size)};
    if (crc32c(*h.inline_bytes) != h.checksum) return error{"inline state fails its checksum"};
    return success();
  }
  const fs::path path(h.path);
  fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return os_error("open state file", path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return os_error("stat state file", path, errno);
  if (static_cast<std::uint64_t>(st.st_size) != h.size)
    return error{"state file " + h.path + " has " + std::to_string(st.st_size) +
                 " bytes, expected " + std::to_string(h.size)};
  std::string buffer(std::size_t{1} << 20, '\0');
  std::uint32_t crc = 0;
  std::uint64_t remaining = h.size;
  while (remaining > 0) {
    const std::size_t want = static_cast<std::size_t>(
        std::min<std::uint64_t>(remaining, buffer.size()));
    const ssize_t n = ::read(fd.get(), buffer.data(), want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return os_error("read state file", path, errno);
    }
    if (n == 0) return error{"state file " + h.path + " shrank while being verified"};
    crc = crc32c(std::string_view(buffer.data(), static_cast<std::size_t>(n)), crc);
    remaining -= static_cast<std::uint64_t>(n);
  }
  if (crc != h.checksum) return error{"state file " + h.path + " fails its checksum"};
  return success();
}

void checkpoint_storage::set_write_fault_injector(write_fault_injector injector) {
  std::lock_guard lock(fault_injector_mutex);
  fault_injector_set.store(static_cast<bool>(injector), std::memory_order_release);
  fault_injector = std::move(injector);
}

result<void> checkpoint_storage::write_file_durably(const fs::path& file, std::string_view bytes) {
  assert(!file.empty());
  assert(file.has_filename());
  if (injected_crash(file, write_step::create_folders))
    return crash_error(file, write_step::create_folders);
  if (auto r = create_directories_durably(parent_or_dot(file)); !r) return r;
  if (injected_crash(file, write_step::create_temp))
    return crash_error(file, write_step::create_temp);
  const fs::path tmp = temp_path(file);
  fd_guard fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return os_error("create", tmp, errno);
  return commit_temp_file(fd, file, bytes);
}

result<void> checkpoint_storage::create_folders_durably(const fs::path& dir) {
  return create_directories_durably(dir);
}

result<std::string> checkpoint_storage::read_file(const fs::path& file, std::uint64_t max_bytes) {
  fd_guard fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return os_error("open", file, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return os_error("stat", file, errno);
  if (!S_ISREG(st.st_mode)) return error{"not a regular file: " + file.string()};
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    return error{file.string() + " has " + std::to_string(size) + " bytes, more than the " +
                 std::to_string(max_bytes) + " allowed"};
  std::string out(static_cast<std::size_t>(size), '\0');
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return os_error("read", file, errno);
    }
    if (n == 0) break;  // shrank meanwhile: return what is there, the checksum decides
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  return out;
}

}  // namespace snapflow
