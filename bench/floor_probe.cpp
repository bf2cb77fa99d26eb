// The floor for one checkpoint: what a checkpoint of a `parallelism`-wide, `depth`-deep
// pipeline costs with nothing but raw ZeroMQ, msgpack and the disk, measured on this machine
// in the same run as snapflow (bench/run-comparison reports snapflow / floor).
//
// One coordinator (ROUTER) and `workers` workers (DEALER to the coordinator, PULL for data,
// PUSH to every other worker), all over TCP loopback as the real processes are. The workers
// are processes of their own (forked, each with its own ZeroMQ context), as snapflow's
// coordinator and snapflow-worker processes are; --threads runs them as threads of this
// process instead, which spares every hand-off between a worker and the coordinator the
// switch between address spaces that the real cluster pays. Subtask
// (stage, index) lives on worker index % workers, as snapflow's slot sharing places it. A round:
//   trigger -> each source subtask (one control frame each)
//   barrier -> stage 1 by hash (every source subtask to every stage-1 subtask), then forward;
//              a frame between workers, an in-memory hand-off within one (no serialisation)
//   ack     -> every subtask acks once it has all its input barriers (P * depth control frames);
//              a subtask of stage 1 first writes and fsyncs `state_bytes` of state
//   durable -> the coordinator makes the metadata durable as snapflow's does for a periodic
//              checkpoint: chk-<id> (its parent fsynced) and an empty
//              `_metadata` are made before the round starts, as snapflow prepares the next
//              checkpoint between two; after the last ack the metadata is written into that
//              file, unsynced, and appended on whole 4 KiB blocks to a log file zero-filled
//              and fsynced before the first round, then fdatasync
//   notify  -> one control frame per subtask; "notified" = the last one received (each worker
//              reports when it received its notifications, in steady-clock time, which is
//              the same clock in every process).
// Every frame is a msgpack map, encoded by the sender and decoded by the receiver.
//
// With --pin, worker w and the ZeroMQ I/O thread of its own context run on CPU w mod the CPUs
// this process may use, as snapflow-worker processes placed with --cpus do; the coordinator
// keeps any CPU, and with workers as processes its I/O thread runs under SCHED_BATCH, as
// snapflow-coordinator's does. Without --pin, worker threads (--threads) share the
// coordinator's context, and every thread may run on any CPU.
//
//   floor_probe --parallelism P --depth D [--workers W] [--rounds N] [--pause-ms M]
//               [--state-bytes B] [--dir FOLDER] [--pin] [--threads]   prints one JSON object
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <msgpack.hpp>
#include <zmq.hpp>

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

struct options {
  int parallelism = 4;
  int depth = 3;
  int workers = 2;
  int rounds = 200;
  int pause_ms = 10;
  std::int64_t state_bytes = 0;
  std::string dir;
  bool pin = false;
  bool threads = false;  // workers as threads of this process instead of processes
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "floor_probe: %s\nusage: floor_probe --parallelism P --depth D [--workers W] "
               "[--rounds N] [--pause-ms M] [--state-bytes B] [--dir FOLDER] [--pin] [--threads]\n",
               why.c_str());
  std::exit(2);
}

std::int64_t parse_int(const std::string& flag, const char* text, std::int64_t lo,
                       std::int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
    usage(flag + " must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
          " (got '" + text + "')");
  return v;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--pin" || flag == "--threads") {
      (flag == "--pin" ? o.pin : o.threads) = true;
      --i;  // a flag without a value
      continue;
    }
    if (i + 1 >= argc) usage("missing value for " + flag);
    const char* v = argv[i + 1];
    if (flag == "--parallelism")
      o.parallelism = static_cast<int>(parse_int(flag, v, 1, 256));
    else if (flag == "--depth")
      o.depth = static_cast<int>(parse_int(flag, v, 1, 32));
    else if (flag == "--workers")
      o.workers = static_cast<int>(parse_int(flag, v, 1, 64));
    else if (flag == "--rounds")
      o.rounds = static_cast<int>(parse_int(flag, v, 1, 1'000'000));
    else if (flag == "--pause-ms")
      o.pause_ms = static_cast<int>(parse_int(flag, v, 0, 60'000));
    else if (flag == "--state-bytes")
      o.state_bytes = parse_int(flag, v, 0, std::int64_t{1} << 30);
    else if (flag == "--dir")
      o.dir = v;
    else
      usage("unknown option " + flag);
  }
  // Subtask i lives on worker i % workers: a worker beyond the parallelism would hold none.
  o.workers = std::min(o.workers, o.parallelism);
  return o;
}

// ---- messages ------------------------------------------------------------------------------

enum class kind : int {
  trigger = 1, barrier = 2, ack = 3, notify = 4, hello = 5, stop = 6,
  peers = 7,     // coordinator -> worker at start: every worker's data endpoint
  notified = 8,  // worker -> coordinator: when its notifications of round `id` arrived
};

struct message {
  kind type = kind::trigger;
  std::int64_t id = 0;
  int stage = 0;
  int index = 0;
  std::string text;       // hello: the worker's data endpoint; peers: the endpoints, one per line
  std::int64_t at_ns = 0; // notified: steady-clock time
};

std::string encode(const message& m) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(buffer);
  // The checkpoint's own frames (trigger, barrier, ack, notify) are the five fields alone.
  pk.pack_map(5 + (m.text.empty() ? 0 : 1) + (m.at_ns == 0 ? 0 : 1));
  pk.pack("v");
  pk.pack(1);
  pk.pack("t");
  pk.pack(static_cast<int>(m.type));
  pk.pack("id");
  pk.pack(m.id);
  pk.pack("stage");
  pk.pack(m.stage);
  pk.pack("index");
  pk.pack(m.index);
  if (!m.text.empty()) {
    pk.pack("text");
    pk.pack(m.text);
  }
  if (m.at_ns != 0) {
    pk.pack("at");
    pk.pack(m.at_ns);
  }
  return std::string(buffer.data(), buffer.size());
}

message decode(const zmq::message_t& frame) {
  message m;
  msgpack::unpack_limit limit(16, 16, 1 << 16, 0, 0, 4);
  auto handle = msgpack::unpack(static_cast<const char*>(frame.data()), frame.size(), nullptr,
                                nullptr, limit);
  const auto& map = handle.get().via.map;
  for (std::uint32_t i = 0; i < map.size; ++i) {
    const auto key = map.ptr[i].key.as<std::string>();
    if (key == "t") m.type = static_cast<kind>(map.ptr[i].val.as<int>());
    if (key == "id") m.id = map.ptr[i].val.as<std::int64_t>();
    if (key == "stage") m.stage = map.ptr[i].val.as<int>();
    if (key == "index") m.index = map.ptr[i].val.as<int>();
    if (key == "text") m.text = map.ptr[i].val.as<std::string>();
    if (key == "at") m.at_ns = map.ptr[i].val.as<std::int64_t>();
  }
  return m;
}

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             clock_type::now().time_since_epoch())
      .count();
}

// ---- disk ----------------------------------------------------------------------------------

void check(bool ok, const char* what, const fs::path& p) {
  if (ok) return;
  std::fprintf(stderr, "floor_probe: %s %s: %s\n", what, p.c_str(), std::strerror(errno));
  std::exit(1);
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  check(fd >= 0, "open folder", dir);
  check(::fsync(fd) == 0, "fsync folder", dir);
  ::close(fd);
}

// Creates chk-<id> under `root` unless there, its entry fsynced into `root` when new.
void create_round_folder(const fs::path& root, const fs::path& chk) {
  std::error_code ec;
  const bool created = fs::create_directory(chk, ec);
  check(!ec, "create", chk);
  if (created) fsync_dir(root);
}

// `file`, created empty, as checkpoint_storage::prepare_location does for a logged
// checkpoint (nothing synced); returns the open descriptor.
int prepare_empty(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  check(fd >= 0, "create", file);
  return fd;
}

// Writes all of `bytes` at `offset`.
void pwrite_all(int fd, const fs::path& file, const std::string& bytes, off_t offset) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done,
                               offset + static_cast<off_t>(done));
    check(n > 0, "write", file);
    done += static_cast<std::size_t>(n);
  }
}

// The metadata log: `records` slots of whole 4 KiB blocks, zeros written and fsynced up front
// (snapflow makes a 4 MiB segment the same way), so an append changes no file metadata and
// fdatasync writes the blocks and flushes.
class metadata_log_file {
 public:
  metadata_log_file(const fs::path& file, int records, std::size_t record_bytes)
      : file_(file), slot_((record_bytes + 32 + 4095) / 4096 * 4096) {
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    check(fd_ >= 0, "create", file);
    const std::string zeros(slot_, '\0');
    for (int i = 0; i < records; ++i) pwrite_all(fd_, file_, zeros, static_cast<off_t>(i) * slot_);
    check(::fsync(fd_) == 0, "fsync", file);
    fsync_dir(file.parent_path());
  }
  ~metadata_log_file() { ::close(fd_); }

  // Record `index`: a 32-byte header (its length in it), the bytes, padded to the slot.
  void append(int index, const std::string& bytes) {
    std::string record(slot_, '\0');
    std::memcpy(record.data(), "SFCKLOG1", 8);
    const auto length = static_cast<std::uint32_t>(bytes.size());
    std::memcpy(record.data() + 8, &length, sizeof length);
    std::memcpy(record.data() + 32, bytes.data(), bytes.size());
    pwrite_all(fd_, file_, record, static_cast<off_t>(index) * slot_);
    check(::fdatasync(fd_) == 0, "fdatasync", file_);
  }

 private:
  fs::path file_;
  std::size_t slot_;
  int fd_ = -1;
};

// Writes `bytes` to `fd` (open on `file`), fsyncs and closes it.
void finish_durably(int fd, const fs::path& file, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    check(n > 0, "write", file);
    done += static_cast<std::size_t>(n);
  }
  check(::fsync(fd) == 0, "fsync", file);
  ::close(fd);
}

// A stage-1 subtask's state: created, written, fsynced in the round's folder. (snapflow's
// tasks write a temp file and rename it, and fsync the folder: the floor does less here.)
void write_durably(const fs::path& file, const std::string& bytes) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd >= 0, "create", file);
  finish_durably(fd, file, bytes);
}

// ---- worker --------------------------------------------------------------------------------

class worker {
 public:
  worker(const options& o, int self, const fs::path& root, zmq::context_t& context)
      : o_(o), self_(self), root_(root), context_(context),
        control_(context, zmq::socket_type::dealer), data_in_(context, zmq::socket_type::pull) {
    control_.set(zmq::sockopt::linger, 0);
    data_in_.set(zmq::sockopt::linger, 0);
    data_in_.bind("tcp://127.0.0.1:*");
    for (int i = self; i < o.parallelism; i += o.workers) notifications_ += o.depth;
  }

  // Says hello with its data endpoint, learns every worker's, then serves until told to stop.
  void run(const std::string& coordinator) {
    control_.set(zmq::sockopt::routing_id, "w" + std::to_string(self_));
    control_.connect(coordinator);
    message hello{kind::hello, 0, 0, self_};
    hello.text = data_in_.get(zmq::sockopt::last_endpoint);
    (void)control_.send(zmq::buffer(encode(hello)), zmq::send_flags::none);
    zmq::message_t frame;
    (void)control_.recv(frame);
    const message peers = decode(frame);
    if (peers.type != kind::peers) {
      std::fprintf(stderr, "floor_probe: worker %d expected the peer list\n", self_);
      std::exit(1);
    }
    std::size_t from = 0;
    for (int w = 0; w < o_.workers; ++w) {
      const std::size_t to = std::min(peers.text.find('\n', from), peers.text.size());
      data_out_.emplace_back(context_, zmq::socket_type::push);
      data_out_.back().set(zmq::sockopt::linger, 0);
      if (w != self_) data_out_.back().connect(peers.text.substr(from, to - from));
      from = to + 1;
    }
    serve();
  }

 private:
  void serve() {
    zmq::pollitem_t items[] = {{control_.handle(), 0, ZMQ_POLLIN, 0},
                               {data_in_.handle(), 0, ZMQ_POLLIN, 0}};
    for (;;) {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
      if (items[0].revents & ZMQ_POLLIN) {
        zmq::message_t frame;
        while (control_.recv(frame, zmq::recv_flags::dontwait)) {
          const message m = decode(frame);
          if (m.type == kind::stop) return;
          if (m.type == kind::trigger) arrive(m.id, 0, m.index);
          if (m.type == kind::notify && ++notified_ == notifications_) {
            notified_ = 0;
            message done{kind::notified, m.id, 0, self_};
            done.at_ns = steady_ns();
            (void)control_.send(zmq::buffer(encode(done)), zmq::send_flags::none);
          }
          drain_local();
        }
      }
      if (items[1].revents & ZMQ_POLLIN) {
        zmq::message_t frame;
        while (data_in_.recv(frame, zmq::recv_flags::dontwait)) {
          const message m = decode(frame);
          arrive(m.id, m.stage, m.index);
          drain_local();
        }
      }
    }
  }

  int inputs_of(int stage) const {
    if (stage == 0) return 1;                  // the trigger
    if (stage == 1) return o_.parallelism;     // hash: every source subtask
    return 1;                                  // forward
  }

  // A barrier (or the trigger) reached subtask (stage, index), which lives here.
  void arrive(std::int64_t id, int stage, int index) {
    const int n = ++pending_[{id, stage, index}];
    if (n < inputs_of(stage)) return;
    pending_.erase({id, stage, index});
    if (stage == 1 && o_.state_bytes > 0) {
      if (state_.size() != static_cast<std::size_t>(o_.state_bytes))
        state_.assign(static_cast<std::size_t>(o_.state_bytes), static_cast<char>(index));
      // The coordinator made the round's folder before it sent the triggers.
      write_durably(root_ / ("chk-" + std::to_string(id)) / ("state-" + std::to_string(index)),
                    state_);
    }
    (void)control_.send(zmq::buffer(encode({kind::ack, id, stage, index})),
                        zmq::send_flags::none);
    if (stage + 1 >= o_.depth) return;
    if (stage == 0) {
      for (int i = 0; i < o_.parallelism; ++i) forward({kind::barrier, id, 1, i});
    } else {
      forward({kind::barrier, id, stage + 1, index});
    }
  }

  void forward(const message& m) {
    const int owner = m.index % o_.workers;
    if (owner == self_) {
      local_.push_back(m);
      return;
    }
    (void)data_out_[static_cast<std::size_t>(owner)].send(zmq::buffer(encode(m)),
                                                          zmq::send_flags::none);
  }

  void drain_local() {
    while (!local_.empty()) {
      const message m = local_.front();
      local_.pop_front();
      arrive(m.id, m.stage, m.index);
    }
  }

  const options& o_;
  int self_;
  fs::path root_;
  zmq::context_t& context_;
  zmq::socket_t control_;
  zmq::socket_t data_in_;
  std::vector<zmq::socket_t> data_out_;
  std::map<std::tuple<std::int64_t, int, int>, int> pending_;
  std::deque<message> local_;
  std::string state_;
  int notifications_ = 0;  // one per subtask of this worker
  int notified_ = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

std::string summary(const std::vector<double>& v) {
  char out[256];
  std::snprintf(out, sizeof out, "{\"count\":%zu,\"p50\":%.1f,\"p99\":%.1f,\"p999\":%.1f}",
                v.size(), percentile(v, 0.5), percentile(v, 0.99), percentile(v, 0.999));
  return out;
}

// The CPUs this process may run on, in order.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  check(::sched_getaffinity(0, sizeof set, &set) == 0, "read the CPU affinity of", "floor_probe");
  std::vector<int> out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) out.push_back(cpu);
  return out;
}

void pin_this_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  check(::sched_setaffinity(0, sizeof set, &set) == 0, "pin a thread to CPU", std::to_string(cpu));
}

// Worker w as a process of its own: forked before this process starts any thread, it waits for
// the coordinator's endpoint on `from_parent`, runs, and leaves without unwinding the parent's
// objects it inherited.
pid_t start_worker_process(const options& o, int w, const fs::path& root, int cpu,
                           int& to_child) {
  int fds[2];
  check(::pipe(fds) == 0, "create a pipe for", "worker " + std::to_string(w));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  check(pid >= 0, "fork", "worker " + std::to_string(w));
  if (pid > 0) {
    ::close(fds[0]);
    to_child = fds[1];
    return pid;
  }
  ::close(fds[1]);
  // A worker never outlives the probe, however the probe ends.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  std::string endpoint;
  char c = 0;
  while (::read(fds[0], &c, 1) == 1 && c != '\n') endpoint.push_back(c);
  ::close(fds[0]);
  if (endpoint.empty()) ::_exit(1);  // the parent gave up before it bound
  // Pinned before its context exists, so ZeroMQ's I/O thread inherits the CPU.
  if (cpu >= 0) pin_this_thread(cpu);
  {
    zmq::context_t context(1);
    worker self(o, w, root, context);
    self.run(endpoint);
  }
  std::fflush(nullptr);
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  const fs::path root = o.dir.empty() ? fs::temp_directory_path() /
                                            ("floor-probe-" + std::to_string(::getpid()))
                                      : fs::path(o.dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  check(!ec, "create", root);
  const std::vector<int> cpus = o.pin ? allowed_cpus() : std::vector<int>{};
  auto cpu_of = [&](int w) {
    return o.pin ? cpus[static_cast<std::size_t>(w) % cpus.size()] : -1;
  };

  // Processes first, while this one has no thread yet (fork copies only the caller).
  std::vector<pid_t> children;
  std::vector<int> to_children;
  for (int w = 0; !o.threads && w < o.workers; ++w) {
    int to_child = -1;
    children.push_back(start_worker_process(o, w, root, cpu_of(w), to_child));
    to_children.push_back(to_child);
  }

  // The coordinator's I/O thread as snapflow-coordinator's: woken by a trigger frame, it waits
  // for the coordinator thread, which blocks in its receive right after a round's triggers.
  zmq::context_t context(1);
  if (o.pin && !o.threads) context.set(zmq::ctxopt::thread_sched_policy, SCHED_BATCH);
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::router_mandatory, true);
  // A worker that died must end the probe with an error, not leave it waiting for ever.
  router.set(zmq::sockopt::rcvtimeo, 30'000);
  router.bind("tcp://127.0.0.1:*");
  const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  auto receive = [&](zmq::message_t& id, zmq::message_t& payload, const char* what) {
    if (!router.recv(id) || !router.recv(payload)) {
      std::fprintf(stderr, "floor_probe: no %s from a worker in 30 s\n", what);
      std::exit(1);
    }
  };
  // A child that died already closed its pipe: the write below then fails and says so.
  ::signal(SIGPIPE, SIG_IGN);
  for (const int fd : to_children) {
    const std::string line = endpoint + "\n";
    check(::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()),
          "hand the endpoint to", "a worker");
    ::close(fd);
  }

  // --threads: worker threads; with --pin one context per worker, its I/O thread on the
  // worker's CPU, without it the coordinator's context.
  std::vector<std::unique_ptr<zmq::context_t>> worker_contexts;
  for (int w = 0; o.threads && o.pin && w < o.workers; ++w) {
    worker_contexts.push_back(std::make_unique<zmq::context_t>());
    check(zmq_ctx_set(worker_contexts.back()->handle(), ZMQ_THREAD_AFFINITY_CPU_ADD,
                      cpu_of(w)) == 0,
          "pin the I/O thread of", "worker " + std::to_string(w));
  }
  std::vector<std::thread> threads;
  for (int w = 0; o.threads && w < o.workers; ++w) {
    zmq::context_t& worker_context =
        o.pin ? *worker_contexts[static_cast<std::size_t>(w)] : context;
    threads.emplace_back([&, w, cpu = cpu_of(w)] {
      if (cpu >= 0) pin_this_thread(cpu);
      worker self(o, w, root, worker_context);
      self.run(endpoint);
    });
  }

  // Every worker says hello with its data endpoint; each then gets the whole list.
  std::vector<std::string> ids(static_cast<std::size_t>(o.workers));
  std::vector<std::string> data_endpoints(static_cast<std::size_t>(o.workers));
  for (int n = 0; n < o.workers; ++n) {
    zmq::message_t id, payload;
    receive(id, payload, "hello");
    const message hello = decode(payload);
    if (hello.type != kind::hello || hello.index < 0 || hello.index >= o.workers) {
      std::fprintf(stderr, "floor_probe: a worker's hello was not one\n");
      std::exit(1);  // worker threads may still run: no unwinding past them
    }
    ids[static_cast<std::size_t>(hello.index)] = id.to_string();
    data_endpoints[static_cast<std::size_t>(hello.index)] = hello.text;
  }
  auto owner = [&](int index) -> const std::string& {
    return ids[static_cast<std::size_t>(index % o.workers)];
  };
  auto send = [&](const std::string& to, const message& m) {
    try {
      (void)router.send(zmq::buffer(to), zmq::send_flags::sndmore);
      (void)router.send(zmq::buffer(encode(m)), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {  // ROUTER_MANDATORY: the worker is gone
      std::fprintf(stderr, "floor_probe: cannot send to worker %s: %s\n", to.c_str(), e.what());
      std::exit(1);
    }
  };
  message peers{kind::peers};
  for (const auto& e : data_endpoints) peers.text += e + "\n";
  for (const auto& id : ids) send(id, peers);

  const int subtasks = o.parallelism * o.depth;
  const int warmup = std::min(20, o.rounds);
  std::vector<double> e2e_us, notified_us, acked_us, metadata_us;
  std::string metadata(static_cast<std::size_t>(subtasks) * 96, 'm');
  metadata_log_file log(root / "_checkpoints-1.log", warmup + o.rounds, metadata.size());
  for (int r = 1; r <= warmup + o.rounds; ++r) {
    const fs::path chk = root / ("chk-" + std::to_string(r));
    // Before the round, as snapflow's coordinator prepares the next checkpoint's location
    // between two.
    create_round_folder(root, chk);
    const int metadata_fd = prepare_empty(chk / "_metadata");
    const auto start = clock_type::now();
    for (int i = 0; i < o.parallelism; ++i) send(owner(i), {kind::trigger, r, 0, i});
    for (int acks = 0; acks < subtasks; ++acks) {
      zmq::message_t id, payload;
      receive(id, payload, "acknowledgement");
      (void)decode(payload);
    }
    const auto acked = clock_type::now();
    pwrite_all(metadata_fd, chk / "_metadata", metadata, 0);
    ::close(metadata_fd);
    log.append(r - 1, metadata);
    const auto durable = clock_type::now();
    for (int s = 0; s < o.depth; ++s)
      for (int i = 0; i < o.parallelism; ++i) send(owner(i), {kind::notify, r, s, i});
    // Each worker reports once its last notification arrived; only those frames come now.
    std::int64_t last_ns = 0;
    for (int n = 0; n < o.workers; ++n) {
      zmq::message_t id, payload;
      receive(id, payload, "notification report");
      const message done = decode(payload);
      if (done.type != kind::notified || done.id != r) {
        std::fprintf(stderr, "floor_probe: round %d: expected a worker's notified report\n", r);
        std::exit(1);
      }
      last_ns = std::max(last_ns, done.at_ns);
    }
    if (r > warmup) {
      const auto last = clock_type::time_point(std::chrono::nanoseconds(last_ns));
      e2e_us.push_back(std::chrono::duration<double, std::micro>(durable - start).count());
      notified_us.push_back(std::chrono::duration<double, std::micro>(last - start).count());
      acked_us.push_back(std::chrono::duration<double, std::micro>(acked - start).count());
      metadata_us.push_back(std::chrono::duration<double, std::micro>(durable - acked).count());
    }
    fs::remove_all(chk, ec);
    // Pacing as periodic checkpoints are paced; a benchmark's interval, not synchronisation.
    if (o.pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.pause_ms));
  }
  fs::remove(root / "_checkpoints-1.log", ec);  // as the rounds' folders: nothing left behind
  for (const auto& id : ids) send(id, {kind::stop, 0, 0, 0});
  for (auto& t : threads) t.join();
  int failed_children = 0;
  for (const pid_t pid : children) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      ++failed_children;
  }
  if (o.dir.empty()) fs::remove_all(root, ec);
  if (failed_children > 0) {
    std::fprintf(stderr, "floor_probe: %d worker process(es) failed\n", failed_children);
    return 1;
  }

  std::printf(
      "{\"system\":\"floor\",\"parallelism\":%d,\"depth\":%d,\"workers\":%d,\"state_bytes\":%lld,"
      "\"layout\":\"%s\",\"rounds\":%d,\"end_to_end_us\":%s,\"notified_us\":%s,"
      "\"breakdown_us\":{\"last_ack\":%s,\"metadata\":%s}}\n",
      o.parallelism, o.depth, o.workers, static_cast<long long>(o.state_bytes),
      o.threads ? "threads" : "processes", o.rounds, summary(e2e_us).c_str(),
      summary(notified_us).c_str(), summary(acked_us).c_str(), summary(metadata_us).c_str());
  return 0;
}
