#include "transport/data/network_data_plane.hpp"
#include "transport/frame_limits.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <tuple>
#include <vector>

#include <spdlog/spdlog.h>

#include "engine/hop_trace.hpp"
#include "engine/runtime/local_channel.hpp"
#include "engine/runtime/thread_name.hpp"
#include "transport/data/data_frame.hpp"

namespace snapflow::data {

namespace {

using namespace std::chrono_literals;

// How long a waiting producer or the idle I/O thread sleeps before it looks at its flags again
// (cancel, stop); data and credits wake them at once.
constexpr long poll_timeout_ms = 50;
// The longest a consumer holds back a credit below half a window (network_data_plane::core::
// note_consumed). Released by the I/O thread's turns, at most a poll timeout apart.
constexpr std::chrono::milliseconds credit_hold_max{50};
// Frames the I/O thread takes in one go before it sends the credits they freed.
constexpr int frames_per_turn = 256;

// For the hop trace: a barrier ends the batch it travels in (it flushes the output).
bool carries_barrier(const element_batch& batch) {
  return !batch.empty() && std::holds_alternative<checkpoint_barrier>(batch.back());
}

// End of input is the last element a channel carries: a connection that closes after it lost
// nothing.
bool ends_input(const element_batch& batch) {
  return !batch.empty() && std::holds_alternative<end_of_input>(batch.back());
}

// Reads one ZeroMQ monitor event (two frames: 2 bytes of event and 4 of value in host order,
// then the endpoint) without waiting; nothing when none is queued.
std::optional<std::pair<std::uint16_t, std::uint32_t>> take_monitor_event(zmq::socket_t& monitor) {
  zmq::message_t head;
  if (!monitor.recv(head, zmq::recv_flags::dontwait)) return std::nullopt;
  // The parts of a message arrive together: the rest is there to drain.
  for (bool more = head.more(); more;) {
    zmq::message_t rest;
    if (!monitor.recv(rest, zmq::recv_flags::dontwait)) break;
    more = rest.more();
  }
  if (head.size() < 6) return std::pair<std::uint16_t, std::uint32_t>{0, 0};
  std::uint16_t event = 0;
  std::uint32_t value = 0;
  std::memcpy(&event, head.data(), sizeof event);
  std::memcpy(&value, static_cast<const char*>(head.data()) + sizeof event, sizeof value);
  return std::pair{event, value};
}

// Watches `socket`'s connections for `events` through a PAIR socket of the caller's, which the
// caller polls itself (no thread). An inproc address unique in the process.
zmq::socket_t monitor_socket(zmq::context_t& context, zmq::socket_t& socket, int events) {
  static std::atomic<std::uint64_t> next_id{0};
  const std::string address = "inproc://snapflow-data-monitor-" + std::to_string(next_id++);
  if (zmq_socket_monitor(socket.handle(), address.c_str(), events) != 0)
    throw zmq::error_t();
  zmq::socket_t monitor(context, zmq::socket_type::pair);
  monitor.set(zmq::sockopt::linger, 0);
  monitor.connect(address);
  return monitor;
}

// A channel apart from its attempt: where the attempts of one channel meet.
using route_id = std::tuple<job_id, vertex_id, std::uint32_t, vertex_id, std::uint32_t>;

route_id route_of(const channel_key& k) {
  return {k.job, k.source, k.producer, k.target, k.consumer};
}

std::string random_routing_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::uint64_t a = rng();
  const std::uint64_t b = rng();
  // A leading non-zero byte: ZeroMQ reserves routing ids that start with 0.
  std::string id = "d";
  id.append(reinterpret_cast<const char*>(&a), sizeof a);
  id.append(reinterpret_cast<const char*>(&b), sizeof b);
  return id;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The consuming end: a bounded queue the I/O thread fills and the task thread drains.

class network_input_channel final : public input_channel {
 public:
  // `zap` (CURVE only) lets `producer_key` connect while this channel is open.
  network_input_channel(std::shared_ptr<network_data_plane::core> core, channel_key key,
                        std::size_t capacity, std::shared_ptr<byte_gauge> gauge,
                        std::shared_ptr<data_zap_handler> zap, std::string producer_key)
      : core_(std::move(core)),
        key_(std::move(key)),
        capacity_(capacity),
        gauge_(std::move(gauge)),
        zap_(std::move(zap)),
        producer_key_(std::move(producer_key)) {
    if (zap_) zap_->vouch(producer_key_);
  }
  ~network_input_channel() override {
    gauge_->subtract(queued_bytes_);
    // A connection already made stays; a new one from this key needs another channel naming it.
    if (zap_) zap_->withdraw(producer_key_);
  }

  std::optional<element_batch> try_take() override;
  std::optional<queued_barrier> take_first_barrier() override;
  bool has_priority_barrier() const override { return priority_queued_.load() > 0; }
  void set_max_in_flight_bytes(std::uint64_t bytes) override;
  void announce_in_flight_bytes(std::uint64_t bytes) override;
  std::uint64_t buffered_record_bytes() const override { return queued_record_bytes_.load(); }
  void set_wakeup(std::shared_ptr<task_wakeup> wakeup) override {
    std::lock_guard lock(mutex_);
    wakeup_ = std::move(wakeup);
  }
  void cancel() override {
    std::shared_ptr<task_wakeup> w;
    {
      std::lock_guard lock(mutex_);
      cancelled_ = true;
      w = wakeup_;
    }
    if (w) w->notify();
  }

  std::optional<std::string> broken() const override {
    std::lock_guard lock(mutex_);
    if (!queue_.empty()) return std::nullopt;  // what came before the loss goes first
    return broken_;
  }

  // I/O thread or control thread: a batch of this channel was lost; nothing after it is
  // delivered.
  void break_with(std::string why) {
    std::shared_ptr<task_wakeup> w;
    {
      std::lock_guard lock(mutex_);
      if (broken_) return;
      broken_ = std::move(why);
      w = wakeup_;
    }
    if (w) w->notify();
  }

  // I/O thread (or the control thread when it adopts pending batches). False when the buffer
  // is full: the producer ignored its credit (or, for a priority batch, sent more than
  // max_priority_batches the consumer has not taken). `lock_free`: the caller holds no lock of
  // the plane, so a batch ending in a barrier may be taken on this thread by an idle consumer
  // (task_wakeup::notify_barrier), whose work takes the plane's locks. A priority batch only
  // wakes the task: such a runner takes the barrier at the front, and this one is not there.
  bool deliver(element_batch batch, bool priority, bool lock_free) {
    const bool barrier_here = lock_free && !priority && carries_barrier(batch);
    std::shared_ptr<task_wakeup> w;
    {
      std::lock_guard lock(mutex_);
      if (cancelled_ || broken_) return true;
      const std::size_t prioritized = priority_queued_.load();
      if (priority ? prioritized >= max_priority_batches
                   : queue_.size() - prioritized >= capacity_)
        return false;
      const std::uint64_t bytes = approximate_bytes(batch);
      queued_bytes_ += bytes;
      gauge_->add(bytes);
      queued_record_bytes_.store(queued_record_bytes_.load() + record_bytes(batch));
      queue_.push_back(queued{std::move(batch), priority});
      if (priority) priority_queued_.fetch_add(1);
      w = wakeup_;
    }
    if (w) {
      if (barrier_here)
        w->notify_barrier();
      else
        w->notify();
    }
    return true;
  }

 private:
  struct queued {
    element_batch batch;
    bool priority = false;  // took no credit: neither counted against capacity_ nor consumed_
  };
  // Takes the batch at `at` out of the queue and the gauge. A batch that took credit counts as
  // consumed: `consumed` gets the new count and `bytes` grows by its record bytes (for
  // note_consumed); else both are left as they were. Under mutex_.
  element_batch extract(std::deque<queued>::iterator at, std::uint64_t& consumed,
                        std::uint64_t& bytes);

  std::shared_ptr<network_data_plane::core> core_;
  const channel_key key_;
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::deque<queued> queue_;
  std::atomic<std::size_t> priority_queued_{0};  // written under mutex_
  std::optional<std::string> broken_;
  std::shared_ptr<task_wakeup> wakeup_;
  const std::shared_ptr<byte_gauge> gauge_;  // the worker's buffered bytes
  const std::shared_ptr<data_zap_handler> zap_;
  const std::string producer_key_;
  std::uint64_t queued_bytes_ = 0;  // counted in gauge_
  std::atomic<std::uint64_t> queued_record_bytes_{0};  // written under mutex_
  std::uint64_t consumed_ = 0;
  bool cancelled_ = false;
};

// ---------------------------------------------------------------------------------------------
// What the I/O thread, the control thread and task threads share: the channels by route, and
// the credits waiting to go back to producers.

class network_data_plane::core {
 public:
  // `zap`: the data plane's ZAP handler with CURVE, else null.
  core(std::size_t capacity, int event_fd, std::shared_ptr<data_zap_handler> zap)
      : capacity_(capacity), event_fd_(event_fd), zap_(std::move(zap)) {}
  ~core() { ::close(event_fd_); }

  int event_fd() const { return event_fd_; }
  const std::shared_ptr<byte_gauge>& gauge() const { return gauge_; }

  void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof one);
  }

  // Control thread.
  std::shared_ptr<input_channel> open_input(const std::shared_ptr<core>& self,
                                            const channel_key& key,
                                            const channel_peer& producer,
                                            const std::string& producer_key) {
    auto input =
        std::make_shared<network_input_channel>(self, key, capacity_, gauge_, zap_, producer_key);
    std::lock_guard lock(mutex_);
    route& r = routes_[route_of(key)];
    if (r.opened || r.attempt != key.attempt) {
      // A new attempt (or the first): whatever is pending belongs to another one.
      if (r.attempt > key.attempt && !r.pending.empty()) {
        // Data of a newer deployment arrived already: this attempt is stale itself and will be
        // cancelled; leave the route to the newer one.
        return input;
      }
      r = route{};
      r.attempt = key.attempt;
    }
    r.opened = true;
    r.input = input;
    r.producer_key = producer_key;
    r.producer_endpoint = producer.endpoint;
    if (zap_ && !r.pending.empty() && r.pending_key != producer_key) {
      // Another key (a worker the coordinator trusts, but not this channel's producer) sent
      // these before the consumer was deployed.
      note_wrong_key(key, r.pending_key, r.pending.size());
      r.pending.clear();
      r.pending_priority = 0;
      r.next_seq = 0;
    }
    for (auto& p : r.pending)
      input->deliver(std::move(p.batch), p.priority, false);  // under mutex_
    if (r.broken) input->break_with(*r.broken);
    r.pending.clear();
    r.pending_priority = 0;
    return input;
  }

  // Control thread: one end of a channel whose producer and consumer both run in this process.
  // Both ends get the same local_channel, whichever is opened first: batches move between the
  // task threads without encoding or a socket, bounded by the same capacity (the producer
  // finds no room while the consumer's buffer is full, as it finds no credit otherwise).
  std::shared_ptr<local_channel> open_local(const channel_key& key, bool producer_end) {
    std::lock_guard lock(mutex_);
    const route_id id = route_of(key);
    local_route& r = local_routes_[id];
    if (r.channel && r.attempt > key.attempt) {
      // An end of an older deployment opened after the newer one: it is being replaced; a
      // cancelled channel ends its task at once.
      auto stale = std::make_shared<local_channel>(capacity_);
      stale->cancel();
      return stale;
    }
    if (!r.channel || r.attempt < key.attempt) {
      // The first end of this attempt (an older attempt's unpaired end is dropped with it).
      r = local_route{};
      r.attempt = key.attempt;
      r.channel = std::make_shared<local_channel>(capacity_);
      r.channel->set_gauge(gauge_);
    }
    (producer_end ? r.producer_opened : r.consumer_opened) = true;
    auto channel = r.channel;
    // Both ends hold it now: the route has done its job.
    if (r.producer_opened && r.consumer_opened) local_routes_.erase(id);
    return channel;
  }

  std::size_t local_routes_waiting() const {
    std::lock_guard lock(mutex_);
    return local_routes_.size();
  }

  // Task thread: the consumer of `key` has taken `consumed` batches, the last ones with `bytes`
  // of records.
  void note_consumed(const channel_key& key, std::uint64_t consumed, std::uint64_t bytes) {
    {
      std::lock_guard lock(mutex_);
      auto it = routes_.find(route_of(key));
      if (it == routes_.end() || it->second.attempt != key.attempt) return;
      route& r = it->second;
      r.consumed = std::max(r.consumed, consumed);
      r.uncredited_bytes += bytes;
      // A credit goes back once the producer has used half its window since the last one: at
      // a trickle of batches that is one credit frame (and one wake-up of this plane's thread
      // and two of ZeroMQ's) per half window instead of per batch, and under load it is still
      // every batch. A producer that waits has its whole window here (next_seq - credited >=
      // capacity), so the take of its last batch sends one. Unless frames were lost on the
      // way (refused as bad, dropped at a reconnect): then next_seq stays short, and a credit
      // held back longer than credit_hold_max goes anyway (release_held_credits).
      if (r.consumed <= r.credited) return;
      // Under a byte bound the producer may wait with less than its window sent: the credit
      // goes once every batch that arrived was taken, or half the bound's bytes were.
      const std::uint64_t bound = r.byte_bound();
      const bool bytes_due =
          bound != 0 && (r.consumed >= r.next_seq || r.uncredited_bytes * 2 >= bound);
      if (!bytes_due && r.next_seq - r.credited < credit_after_) {
        if (r.held_since == std::chrono::steady_clock::time_point{}) {
          r.held_since = std::chrono::steady_clock::now();
          held_.insert(it->first);
        }
        return;
      }
      dirty_.insert(it->first);
    }
    wake();
  }

  // Task thread (the consumer's): the job's byte bound, which makes credits go sooner.
  void set_byte_bound(const channel_key& key, std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    auto it = routes_.find(route_of(key));
    if (it == routes_.end() || it->second.attempt != key.attempt) return;
    it->second.max_bytes = bytes;
  }

  // Task thread (the consumer's): its debloated bound goes to the producer in a credit, now if
  // the producer is known, else with the first credit.
  void announce_byte_bound(const channel_key& key, std::uint64_t bytes) {
    {
      std::lock_guard lock(mutex_);
      auto it = routes_.find(route_of(key));
      if (it == routes_.end() || it->second.attempt != key.attempt) return;
      if (it->second.announced == bytes) return;
      it->second.announced = bytes;
      if (it->second.peer.empty()) return;
      dirty_.insert(it->first);
    }
    wake();
  }

  // I/O thread, every turn: credits held back since before `now - credit_hold_max` become due.
  void release_held_credits(std::chrono::steady_clock::time_point now) {
    std::lock_guard lock(mutex_);
    for (auto it = held_.begin(); it != held_.end();) {
      auto r = routes_.find(*it);
      if (r == routes_.end()) {
        it = held_.erase(it);
        continue;
      }
      if (now - r->second.held_since < credit_hold_max) {
        ++it;
        continue;
      }
      dirty_.insert(*it);
      it = held_.erase(it);
    }
  }

  // I/O thread. `sender_key`: the CURVE key of the connection (the ZAP user id); empty
  // without CURVE. `fd`: the connection's file descriptor (on_connections_closed).
  void on_data(const std::string& peer, const std::string& sender_key, int fd, data_frame&& f) {
    std::shared_ptr<network_input_channel> input;
    {
      std::lock_guard lock(mutex_);
      auto [it, fresh] = routes_.try_emplace(route_of(f.key));
      route& r = it->second;
      if (fresh || f.key.attempt > r.attempt) {
        // The producer of a deployment whose consumer is not (yet) deployed here.
        if (!fresh && r.opened) r.input.reset();
        r = route{};
        r.attempt = f.key.attempt;
      } else if (f.key.attempt < r.attempt) {
        ++counters_.stale_batches;
        return;
      }
      if (zap_) {
        // Only the producer's own key may feed a channel. Before the consumer is deployed the
        // first sender is remembered and checked when it is.
        const std::string& expected = r.opened ? r.producer_key : r.pending_key;
        if (expected.empty() && !r.opened) {
          r.pending_key = sender_key;
        } else if (expected != sender_key) {
          note_wrong_key(f.key, sender_key, 1);
          return;
        }
      }
      // A priority batch carries the number of the next batch without priority and does not
      // advance it: a batch lost before it shows as a gap here, and its own loss as none (it
      // carries no records; its checkpoint does not complete).
      if (f.seq != r.next_seq && !r.broken) {
        ++counters_.sequence_gaps;
        r.broken = "data plane: " + describe(f.key) + ": batch " + std::to_string(f.seq) +
                   " arrived where " + std::to_string(r.next_seq) +
                   " was due: batches were lost on the way";
        spdlog::error("{}", *r.broken);
      }
      if (!f.priority) r.next_seq = f.seq + 1;
      if (r.broken) {
        // Nothing after a loss is delivered: the consumer fails once it took what came before.
        r.pending.clear();
        r.pending_priority = 0;
        if (auto input = r.opened ? r.input.lock() : nullptr) input->break_with(*r.broken);
        return;
      }
      r.peer = peer;
      r.fd = fd;
      if (!f.priority) r.ended = ends_input(f.elements);
      if (!r.opened) {
        const std::size_t regular = r.pending.size() - r.pending_priority;
        if (f.priority ? r.pending_priority >= max_priority_batches : regular >= capacity_) {
          ++(f.priority ? counters_.priority_refused : counters_.overflow_batches);
          return;
        }
        if (f.priority) ++r.pending_priority;
        r.pending.push_back(pending_batch{std::move(f.elements), f.priority});
        return;
      }
      input = r.input.lock();
      if (!input) {
        ++counters_.stale_batches;  // the consumer is gone (ended or cancelled)
        return;
      }
    }
    if (hop_trace::enabled() && carries_barrier(f.elements)) hop_trace::record("d.recv", 1);
    if (!input->deliver(std::move(f.elements), f.priority, true)) {
      std::lock_guard lock(mutex_);
      ++(f.priority ? counters_.priority_refused : counters_.overflow_batches);
    }
  }

  // I/O thread: the connections on these file descriptors closed, and every frame they carried
  // was taken. A channel they fed that had not ended is broken: its producer's worker stopped
  // (a crashed process has its sockets closed by the kernel) or the network failed, and nothing
  // more will come from that attempt. The consumer fails once it took what arrived, rather than
  // wait for the coordinator to notice.
  void on_connections_closed(const std::set<int>& fds) {
    if (fds.empty()) return;
    std::vector<std::pair<std::shared_ptr<network_input_channel>, std::string>> broken;
    {
      std::lock_guard lock(mutex_);
      counters_.connections_closed += fds.size();
      for (auto& [id, r] : routes_) {
        if (r.fd < 0 || !fds.contains(r.fd) || r.ended || r.broken) continue;
        ++counters_.channels_lost;
        const std::string from =
            r.producer_endpoint.empty() ? std::string() : " (worker at " + r.producer_endpoint + ")";
        std::string why = "data plane: " + describe(channel_key_of(id, r.attempt)) +
                          ": the connection from its producer" + from +
                          " closed before its end of input: that worker stopped or the network "
                          "failed";
        spdlog::warn("{}", why);
        r.pending.clear();
        r.pending_priority = 0;
        r.fd = -1;
        if (auto input = r.opened ? r.input.lock() : nullptr)
          broken.emplace_back(std::move(input), why);
        r.broken = std::move(why);
      }
    }
    for (auto& [input, why] : broken) input->break_with(why);
  }

  // I/O thread: a connection was refused at the handshake (with CURVE).
  void on_handshake_refused(std::uint16_t event, std::uint32_t value) {
    std::lock_guard lock(mutex_);
    ++counters_.handshakes_refused;
    // A denied key is logged by the ZAP handler, with its address; the rest here, the first
    // few only.
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || counters_.handshakes_refused > 10) return;
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
      spdlog::warn("data plane: refused a connection: not a CURVE handshake (ZMTP error {:#x})",
                   value);
    else
      spdlog::warn("data plane: refused a connection: the handshake failed ({})",
                   zmq_strerror(static_cast<int>(value)));
  }

  void on_bad_frame(const wire::decode_error& e) {
    std::lock_guard lock(mutex_);
    ++counters_.bad_frames;
    // Rate-limited by count: the first few say what is wrong, the counter tells the rest.
    if (counters_.bad_frames <= 10)
      spdlog::warn("data plane: bad frame refused: {} {}", wire::to_string(e.code), e.detail);
  }

  void count_frame() {
    std::lock_guard lock(mutex_);
    ++counters_.frames_received;
  }

  // I/O thread: sends the credits of every channel whose consumer took batches since. A credit
  // ZeroMQ does not take now stays due and goes next time. True when it tried to send at all
  // (a send may process the socket's commands: see run()).
  bool send_credits(zmq::socket_t& router) {
    std::lock_guard lock(mutex_);
    bool tried = false;
    for (auto it = dirty_.begin(); it != dirty_.end();) {
      auto r = routes_.find(*it);
      if (r == routes_.end() || r->second.peer.empty()) {
        it = dirty_.erase(it);
        continue;
      }
      const std::string frame = encode(credit_frame{
          channel_key_of(r->first, r->second.attempt), r->second.consumed, r->second.announced});
      const std::string& peer = r->second.peer;
      bool sent = false;
      tried = true;
      try {
        sent = router.send(zmq::buffer(peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait)
                   .has_value() &&
               router.send(zmq::buffer(frame), zmq::send_flags::dontwait).has_value();
      } catch (const zmq::error_t&) {
        // host_unreachable: the producer's connection is gone (its worker died); its attempt
        // will be replaced.
        sent = true;
      }
      if (sent) {
        ++counters_.credits_sent;
        r->second.credited = r->second.consumed;
        r->second.uncredited_bytes = 0;
        r->second.held_since = {};
        held_.erase(*it);
        it = dirty_.erase(it);
      } else {
        ++it;
      }
    }
    return tried;
  }

  bool credits_due() const {
    std::lock_guard lock(mutex_);
    return !dirty_.empty();
  }

  // Room watches of output channels whose try_send found no credit (or ZeroMQ's queue full).
  // The producer's task thread owns its sockets; only their ZMQ_FDs are polled here, which
  // signal when a socket is handed a command (a credit or an activation arrived, the monitor
  // saw a closed connection). A watch fires once: the I/O thread notifies its wakeup and drops
  // it, and the task thread, which processes the socket's commands in its next try_send, arms
  // it again if there is still no room. A descriptor that stays readable thus costs one wake-up.
  std::uint64_t next_watch_id() { return next_watch_id_.fetch_add(1) + 1; }
  // Task thread (the channel's sender).
  void watch_for_room(std::uint64_t id, int socket_fd, int monitor_fd,
                      std::shared_ptr<task_wakeup> wakeup) {
    {
      std::lock_guard lock(watch_mutex_);
      watches_[id] = room_watch{socket_fd, monitor_fd, std::move(wakeup)};
    }
    wake();  // the I/O thread polls the descriptors from its next wait on
  }
  // Before the channel's sockets close.
  void unwatch(std::uint64_t id) {
    std::lock_guard lock(watch_mutex_);
    watches_.erase(id);
  }
  // I/O thread: appends the watched descriptors to `fds`, and their watches to `ids`.
  void add_watched(std::vector<pollfd>& fds, std::vector<std::uint64_t>& ids) const {
    std::lock_guard lock(watch_mutex_);
    for (const auto& [id, w] : watches_) {
      for (int fd : {w.socket_fd, w.monitor_fd}) {
        fds.push_back(pollfd{fd, POLLIN, 0});
        ids.push_back(id);
      }
    }
  }
  // I/O thread, after poll(2): fires the watches with a descriptor that turned readable (or
  // went bad: a closed socket's, whose watch is gone already).
  void fire_watches(const std::vector<pollfd>& fds, std::size_t first,
                    const std::vector<std::uint64_t>& ids) {
    std::vector<std::shared_ptr<task_wakeup>> due;
    {
      std::lock_guard lock(watch_mutex_);
      for (std::size_t k = 0; k < ids.size(); ++k) {
        if (fds[first + k].revents == 0) continue;
        auto it = watches_.find(ids[k]);
        if (it == watches_.end()) continue;
        due.push_back(std::move(it->second.wakeup));
        watches_.erase(it);
      }
    }
    for (auto& w : due)
      if (w) w->notify();
  }

  data_plane_counters counters() const {
    std::lock_guard lock(mutex_);
    return counters_;
  }

 private:
  struct pending_batch {
    element_batch batch;
    bool priority = false;
  };

  struct route {
    std::uint32_t attempt = 0;
    bool opened = false;  // the consumer of `attempt` is deployed here
    std::weak_ptr<network_input_channel> input;
    std::deque<pending_batch> pending;  // until it is
    std::size_t pending_priority = 0;   // of them, priority batches
    std::string peer;                   // the producer's routing id, for credits
    std::string producer_key;           // with CURVE: the key of `attempt`'s producer, once opened
    std::string pending_key;            // with CURVE: who sent `pending`
    std::string producer_endpoint;      // the producer's worker, once opened (for errors)
    int fd = -1;                        // the connection the last frame came on
    bool ended = false;                 // the last frame ended the input
    std::uint64_t next_seq = 0;
    std::uint64_t consumed = 0;
    std::uint64_t credited = 0;  // `consumed` as of the last credit handed to ZeroMQ
    // The byte bound: the job's (max_in_flight_bytes), the consumer's debloated one (sent in
    // credits), and the record bytes taken since the last credit. 0: none.
    std::uint64_t max_bytes = 0;
    std::uint64_t announced = 0;
    std::uint64_t uncredited_bytes = 0;
    std::uint64_t byte_bound() const {
      if (max_bytes == 0 || announced == 0) return std::max(max_bytes, announced);
      return std::min(max_bytes, announced);
    }
    // Nothing more is delivered: why (a batch went missing, the producer's connection closed).
    std::optional<std::string> broken;
    // Since when a credit (consumed > credited) is held back; the epoch when none is.
    std::chrono::steady_clock::time_point held_since{};
  };

  // A channel between two subtasks of this process, until both ends were opened.
  struct local_route {
    std::uint32_t attempt = 0;
    std::shared_ptr<local_channel> channel;
    bool producer_opened = false;
    bool consumer_opened = false;
  };

  // Under mutex_.
  void note_wrong_key(const channel_key& k, const std::string& sender, std::size_t batches) {
    counters_.wrong_key_frames += batches;
    if (counters_.wrong_key_frames <= 10)
      spdlog::warn(
          "data plane: dropped {} batch(es) for {} sent with CURVE key {}, which is not "
          "the key of that channel's producer",
          batches, describe(k), sender);
  }

  static channel_key channel_key_of(const route_id& id, std::uint32_t attempt) {
    const auto& [job, source, producer, target, consumer] = id;
    return channel_key{job, source, producer, target, consumer, attempt};
  }

  static std::string describe(const channel_key& k) {
    std::ostringstream os;
    os << k;
    return os.str();
  }

  const std::size_t capacity_;
  const std::uint64_t credit_after_ = std::max<std::uint64_t>(1, capacity_ / 2);
  const int event_fd_;
  const std::shared_ptr<data_zap_handler> zap_;
  // Bytes queued in this worker's input buffers, local channels included.
  const std::shared_ptr<byte_gauge> gauge_ = std::make_shared<byte_gauge>();
  mutable std::mutex mutex_;
  std::map<route_id, route> routes_;
  std::map<route_id, local_route> local_routes_;
  std::set<route_id> dirty_;
  std::set<route_id> held_;  // routes with a credit held back (route::held_since)
  data_plane_counters counters_;

  struct room_watch {
    int socket_fd = -1;
    int monitor_fd = -1;
    std::shared_ptr<task_wakeup> wakeup;
  };
  std::atomic<std::uint64_t> next_watch_id_{0};
  mutable std::mutex watch_mutex_;  // a leaf: nothing else is locked under it
  std::map<std::uint64_t, room_watch> watches_;
};

element_batch network_input_channel::extract(std::deque<queued>::iterator at,
                                             std::uint64_t& consumed, std::uint64_t& bytes) {
  const std::uint64_t held = approximate_bytes(at->batch);
  queued_bytes_ -= held;
  gauge_->subtract(held);
  const std::uint64_t records = record_bytes(at->batch);
  queued_record_bytes_.store(queued_record_bytes_.load() - records);
  if (at->priority) {
    priority_queued_.fetch_sub(1);
  } else {
    consumed = ++consumed_;
    bytes += records;
  }
  element_batch batch = std::move(at->batch);
  queue_.erase(at);
  return batch;
}

std::optional<element_batch> network_input_channel::try_take() {
  std::uint64_t consumed = 0;
  std::uint64_t bytes = 0;
  std::optional<element_batch> out;
  {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) return std::nullopt;
    out = extract(queue_.begin(), consumed, bytes);
  }
  if (consumed != 0) core_->note_consumed(key_, consumed, bytes);
  return out;
}

void network_input_channel::set_max_in_flight_bytes(std::uint64_t bytes) {
  core_->set_byte_bound(key_, bytes);
}

void network_input_channel::announce_in_flight_bytes(std::uint64_t bytes) {
  core_->announce_byte_bound(key_, bytes);
}

std::optional<queued_barrier> network_input_channel::take_first_barrier() {
  std::uint64_t consumed = 0;
  std::uint64_t bytes = 0;
  std::optional<queued_barrier> out;
  {
    std::lock_guard lock(mutex_);
    out = take_first_barrier_of(queue_, [&](auto it) { return extract(it, consumed, bytes); });
  }
  if (consumed != 0) core_->note_consumed(key_, consumed, bytes);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The producing end: a DEALER of its own, used by the sending task thread only.

class network_output_channel final : public output_channel {
 public:
  network_output_channel(std::shared_ptr<zmq::context_t> context,
                         std::shared_ptr<network_data_plane::core> core, channel_key key,
                         const channel_peer& consumer, const data_plane_options& options)
      : context_(std::move(context)),
        core_(std::move(core)),
        watch_id_(core_->next_watch_id()),
        socket_(*context_, zmq::socket_type::dealer),
        key_(std::move(key)),
        consumer_endpoint_(consumer.endpoint),
        capacity_(options.channel_capacity_batches),
        max_frame_bytes_(options.max_frame_bytes),
        finished_linger_ms_(options.finished_linger_ms) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::maxmsgsize,
                static_cast<std::int64_t>(transport::frame_ceiling_bytes(max_frame_bytes_)));
    // A fixed routing id keeps credits reaching this socket across a reconnect.
    socket_.set(zmq::sockopt::routing_id, random_routing_id());
    if (options.curve) {
      // The consumer's server must prove the key the coordinator named (refuse_peer checked
      // it is one); this worker proves its own, which the consumer's ZAP handler looks for.
      if (auto e = transport::apply_curve_client(
              socket_, transport::curve_client_config{*options.curve, consumer.public_key}))
        throw std::system_error(e, "cannot set up CURVE on a data channel");
    }
    // Before the connect, so that no closed connection goes unseen (connection_closed).
    monitor_ = monitor_socket(*context_, socket_, ZMQ_EVENT_DISCONNECTED);
    socket_.connect(consumer.endpoint);
    socket_fd_ = socket_.get(zmq::sockopt::fd);
    monitor_fd_ = monitor_.get(zmq::sockopt::fd);
  }

  ~network_output_channel() override {
    core_->unwatch(watch_id_);  // before its descriptors close
    (void)zmq_socket_monitor(socket_.handle(), nullptr, 0);
    monitor_.close();
    // Normally ended: let ZeroMQ deliver the last batches (end-of-input) after the task is
    // gone. Cancelled: nothing unsent matters any more.
    if (!cancelled_.load()) socket_.set(zmq::sockopt::linger, finished_linger_ms_);
    socket_.close();
  }

  bool send(element_batch batch) override { return send_frame(std::move(batch)); }

  send_status try_send(element_batch& batch) override {
    if (cancelled_.load()) return send_status::cancelled;
    // A batch over a frame's limits goes as halves, each taking credit (send_frame): rare
    // enough (a batch of huge records) to wait for them as send() does.
    if (batch.size() > max_elements_per_frame) return sent_or_cancelled(std::move(batch));
    const std::uint64_t bytes = record_bytes(batch);
    if (!has_credit(bytes)) return no_room();  // has_credit() read the socket's credits
    std::string frame = encode_data_frame(key_, seq_, batch);
    if (frame.size() > max_frame_bytes_) return sent_or_cancelled(std::move(batch));
    try {
      if (socket_.send(zmq::buffer(frame), zmq::send_flags::dontwait)) {
        if (hop_trace::enabled() && carries_barrier(batch)) hop_trace::record("d.send", 1);
        sent_one(bytes);
        batch.clear();
        return send_status::sent;
      }
    } catch (const zmq::error_t& e) {
      spdlog::error("data plane: sending on {} failed: {}", describe(), e.what());
      return send_status::cancelled;
    }
    // ZeroMQ's own queue is full (the peer is not reading). Reading processes the socket's
    // commands, so that its descriptor signals the next one (an activation) to the watch.
    take_credits();
    return no_room();
  }

  void set_room_wakeup(std::shared_ptr<task_wakeup> wakeup) override {
    room_wakeup_ = std::move(wakeup);
  }

  // Without credit and without taking any: the consumer keeps a priority batch beyond its
  // capacity. It carries the sequence number of the next batch and does not advance it.
  bool send_priority(element_batch batch) override {
    assert(is_single_barrier(batch));
    if (cancelled_.load()) return false;
    if (connection_closed()) throw lost_consumer();
    const std::string frame = encode_data_frame(key_, seq_, batch, true);
    for (;;) {
      try {
        if (socket_.send(zmq::buffer(frame), zmq::send_flags::dontwait)) {
          if (hop_trace::enabled()) hop_trace::record("d.send", 1);
          return true;
        }
      } catch (const zmq::error_t& e) {
        spdlog::error("data plane: sending on {} failed: {}", describe(), e.what());
        return false;
      }
      // ZeroMQ's own queue is full: credits keep the frames of a channel far below its
      // high-water mark while the consumer's worker reads, so this is a connection that does
      // not carry anything right now. Wait for it like send() does, until cancelled or closed.
      if (cancelled_.load()) return false;
      if (connection_closed()) throw lost_consumer();
      zmq::pollitem_t items[2] = {{socket_.handle(), 0, ZMQ_POLLOUT, 0},
                                  {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(poll_timeout_ms));
    }
  }

  bool can_send_now() override {
    if (cancelled_.load()) return false;
    if (!has_credit(0)) return false;
    // ZeroMQ's own queue takes one more frame (the peer is reading).
    return (socket_.get(zmq::sockopt::events) & ZMQ_POLLOUT) != 0;
  }

  void cancel() override {
    cancelled_ = true;
    // Set before the task started, never changed: safe to read from any thread.
    if (room_wakeup_) room_wakeup_->notify();
  }

  void set_max_in_flight_bytes(std::uint64_t bytes) override { max_bytes_.store(bytes); }
  std::uint64_t in_flight_bytes_bound() const override {
    const std::uint64_t configured = max_bytes_.load();
    const std::uint64_t announced = announced_bytes_.load();
    if (configured == 0 || announced == 0) return std::max(configured, announced);
    return std::min(configured, announced);
  }

 private:
  send_status sent_or_cancelled(element_batch batch) {
    return send_frame(std::move(batch)) ? send_status::sent : send_status::cancelled;
  }

  // try_send found no room: a closed connection fails the task (no credit will come);
  // otherwise the plane's I/O thread wakes the task once the socket hears anything.
  send_status no_room() {
    if (connection_closed()) throw lost_consumer();
    if (room_wakeup_) core_->watch_for_room(watch_id_, socket_fd_, monitor_fd_, room_wakeup_);
    return send_status::no_room;
  }

  bool send_frame(element_batch batch) {
    // The consumer refuses a frame over either limit (and would drop the connection over the
    // size): such a batch goes as two halves, in order, each a batch of its own for the
    // credits; one element that fits no frame fails the task.
    if (batch.size() > max_elements_per_frame) return send_halves(std::move(batch));
    std::string frame = encode_data_frame(key_, seq_, batch);
    if (frame.size() > max_frame_bytes_) {
      if (batch.size() == 1)
        throw std::length_error("data plane: one element of " + std::to_string(frame.size()) +
                                " bytes encoded is over the frame limit of " +
                                std::to_string(max_frame_bytes_) + " bytes (" + describe() + ")");
      return send_halves(std::move(batch));
    }
    const std::uint64_t bytes = record_bytes(batch);
    for (;;) {
      if (cancelled_.load()) return false;
      short wanted = ZMQ_POLLIN;
      if (has_credit(bytes)) {
        try {
          if (socket_.send(zmq::buffer(frame), zmq::send_flags::dontwait)) {
            if (hop_trace::enabled() && carries_barrier(batch)) hop_trace::record("d.send", 1);
            sent_one(bytes);
            return true;
          }
        } catch (const zmq::error_t& e) {
          spdlog::error("data plane: sending on {} failed: {}", describe(), e.what());
          return false;
        }
        wanted |= ZMQ_POLLOUT;  // ZeroMQ's own queue is full (the peer is not reading)
        take_credits();  // so that POLLIN below means new credit, not credit left unread
      }
      if (connection_closed()) throw lost_consumer();
      zmq::pollitem_t items[2] = {{socket_.handle(), 0, wanted, 0},
                                  {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(poll_timeout_ms));
    }
  }

  // Whether the connection to the consumer's worker closed since the channel opened: ZeroMQ
  // would reconnect, but batches in flight on the old connection are lost, and a consumer that
  // crashed sends no more credit; a producer waiting for it fails at once instead of until the
  // coordinator cancels it. Asked only while waiting, so sending costs nothing more.
  bool connection_closed() {
    while (auto event = take_monitor_event(monitor_))
      if (event->first == ZMQ_EVENT_DISCONNECTED) closed_ = true;
    return closed_;
  }

  bool send_halves(element_batch batch) {
    assert(batch.size() >= 2);
    const auto half = batch.begin() + static_cast<std::ptrdiff_t>(batch.size() / 2);
    element_batch first(std::make_move_iterator(batch.begin()), std::make_move_iterator(half));
    element_batch second(std::make_move_iterator(half), std::make_move_iterator(batch.end()));
    return send_frame(std::move(first)) && send_frame(std::move(second));
  }

  // Whether one more batch fits the consumer's window. Credits are read from the socket only
  // once the window as last seen is used up: they are cumulative, so an older count is only
  // conservative, and a read costs ZeroMQ's command check (a poll system call) on every
  // send, records and barriers alike. Unread credits stay bounded: between two reads at most
  // one window is sent, so at most two windows of credit frames can queue.
  // With a byte bound, a batch with `bytes` of records must also fit the bytes not covered by
  // a credit yet (or go alone). Credits are then read before every batch with records: they
  // carry the consumer's debloated bound, which may be smaller than the count as last seen
  // allows (one non-blocking read per batch, not per record).
  bool has_credit(std::uint64_t bytes) {
    if (bytes != 0 && max_bytes_.load() != 0) take_credits();
    if (fits(bytes)) return true;
    take_credits();
    return fits(bytes);
  }
  bool fits(std::uint64_t bytes) const {
    if (sent_ - consumed_ >= capacity_) return false;
    const std::uint64_t bound = in_flight_bytes_bound();
    return bytes == 0 || bound == 0 || unconsumed_bytes_ == 0 ||
           unconsumed_bytes_ + bytes <= bound;
  }
  void sent_one(std::uint64_t bytes) {
    ++sent_;
    ++seq_;
    unconsumed_.push_back(bytes);
    unconsumed_bytes_ += bytes;
  }

  void take_credits() {
    zmq::message_t msg;
    for (;;) {
      auto got = socket_.recv(msg, zmq::recv_flags::dontwait);
      if (!got) return;
      auto decoded = decode_data_frame(msg.to_string_view(), max_frame_bytes_);
      if (!decoded) continue;
      const auto* credit = std::get_if<credit_frame>(&decoded.value());
      if (credit == nullptr || credit->key != key_) continue;
      const std::uint64_t consumed = std::clamp(credit->consumed, consumed_, sent_);
      for (; consumed_ < consumed; ++consumed_) {
        unconsumed_bytes_ -= unconsumed_.front();
        unconsumed_.pop_front();
      }
      if (credit->max_bytes != 0) announced_bytes_.store(credit->max_bytes);
    }
  }

  std::string describe() const {
    std::ostringstream os;
    os << key_;
    return os.str();
  }

  channel_failure lost_consumer() const {
    return channel_failure("data plane: " + describe() +
                           ": the connection to its consumer's worker at " + consumer_endpoint_ +
                           " closed: that worker stopped or the network failed");
  }

  std::shared_ptr<zmq::context_t> context_;  // outlives the socket
  std::shared_ptr<network_data_plane::core> core_;
  const std::uint64_t watch_id_;  // its room watch at core_
  std::shared_ptr<task_wakeup> room_wakeup_;
  zmq::socket_t socket_;
  zmq::socket_t monitor_;  // socket_'s closed connections
  int socket_fd_ = -1;     // their ZMQ_FDs, polled by the room watch
  int monitor_fd_ = -1;
  const channel_key key_;
  const std::string consumer_endpoint_;
  const std::size_t capacity_;
  const std::size_t max_frame_bytes_;
  const int finished_linger_ms_;
  std::uint64_t sent_ = 0;
  std::uint64_t consumed_ = 0;
  std::uint64_t seq_ = 0;
  // Record bytes of each batch sent and not covered by a credit, oldest first, and their sum.
  std::deque<std::uint64_t> unconsumed_;
  std::uint64_t unconsumed_bytes_ = 0;
  std::atomic<std::uint64_t> max_bytes_{0};        // configured; 0: none
  std::atomic<std::uint64_t> announced_bytes_{0};  // the consumer's latest; 0: none
  bool closed_ = false;
  std::atomic<bool> cancelled_{false};
};

// ---------------------------------------------------------------------------------------------

result<std::shared_ptr<network_data_plane>> network_data_plane::create(
    const std::string& bind_address, data_plane_options options) {
  assert(options.channel_capacity_batches >= 1);
  assert(options.curve_unvouched_wait_ms >= 0);
  auto context = std::make_shared<zmq::context_t>(1);
  std::shared_ptr<data_zap_handler> zap;
  if (options.curve) {
    if (!transport::curve_available())
      return error{"CURVE was requested for the data plane but this libzmq was built without it"};
    // Before the bind: a CURVE server whose context has no ZAP handler lets every key in.
    zap = std::make_shared<data_zap_handler>(
        *context, std::chrono::milliseconds(options.curve_unvouched_wait_ms));
    if (auto e = zap->start())
      return error{"cannot start the data plane's ZAP handler: " + e.message()};
  }
  zmq::socket_t router(*context, zmq::socket_type::router);
  zmq::socket_t monitor;
  std::string endpoint;
  try {
    router.set(zmq::sockopt::linger, 0);
    // Oversized frames up to the ceiling arrive to be counted as bad frames (frame_limits.hpp).
    router.set(zmq::sockopt::maxmsgsize,
               static_cast<std::int64_t>(transport::frame_ceiling_bytes(options.max_frame_bytes)));
    if (options.curve) {
      if (auto e = transport::apply_curve_server(
              router, transport::curve_server_config{*options.curve, {}}))
        return error{"cannot set up CURVE on the data endpoint: " + e.message()};
    }
    // Closed connections break the channels they fed (run()); with CURVE, refused handshakes
    // are counted (no key, an unknown key).
    int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED;
    if (options.curve)
      events |= ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    monitor = monitor_socket(*context, router, events);
    router.bind(bind_address);
    endpoint = router.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return error{"cannot bind the data endpoint " + bind_address + ": " + e.what()};
  }
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return error{"cannot create an eventfd for the data plane"};
  auto shared = std::make_shared<core>(options.channel_capacity_batches, fd, zap);
  std::shared_ptr<network_data_plane> plane(
      new network_data_plane(options, std::move(context), std::move(shared)));
  plane->endpoint_ = endpoint;
  plane->zap_ = std::move(zap);
  // The sockets move to the I/O thread, which alone uses them from now on.
  plane->io_thread_ =
      std::thread([p = plane.get(), r = std::move(router), m = std::move(monitor)]() mutable {
        name_this_thread("data plane");
        p->run(std::move(r), std::move(m));
      });
  return plane;
}

network_data_plane::network_data_plane(data_plane_options options,
                                       std::shared_ptr<zmq::context_t> context,
                                       std::shared_ptr<core> shared)
    : options_(options), context_(std::move(context)), core_(std::move(shared)) {}

network_data_plane::~network_data_plane() {
  stopping_ = true;
  core_->wake();
  if (io_thread_.joinable()) io_thread_.join();
  // After the socket it guards is closed, before the context may terminate.
  if (zap_) zap_->stop();
}

std::optional<std::string> network_data_plane::refuse_peer(const channel_peer& peer) const {
  if (options_.curve) {
    if (peer.public_key.empty())
      return std::string(
          "this worker requires CURVE on its data channels, and the deployment "
          "names no public key for that worker (does the coordinator run without "
          "CURVE?)");
    if (!transport::is_z85_key(peer.public_key))
      return std::string(
          "the public key the deployment names for that worker is not a Z85 "
          "CURVE key");
    return std::nullopt;
  }
  if (!peer.public_key.empty())
    return std::string(
        "the deployment names a CURVE public key for that worker, but this "
        "worker runs its data plane without CURVE (start it with "
        "--curve-secret-key)");
  return std::nullopt;
}

std::shared_ptr<output_channel> network_data_plane::open_output(const channel_key& key,
                                                                const channel_peer& consumer) {
  assert(!refuse_peer(consumer));
  if (consumer.endpoint == endpoint_) return core_->open_local(key, true);
  return std::make_shared<network_output_channel>(context_, core_, key, consumer, options_);
}

std::shared_ptr<input_channel> network_data_plane::open_input(const channel_key& key,
                                                              const channel_peer& producer) {
  assert(!refuse_peer(producer));
  if (producer.endpoint == endpoint_) return core_->open_local(key, false);
  return core_->open_input(core_, key, producer,
                           options_.curve ? producer.public_key : std::string());
}

std::size_t network_data_plane::local_routes_waiting() const {
  return core_->local_routes_waiting();
}

data_plane_counters network_data_plane::counters() const {
  data_plane_counters c = core_->counters();
  if (zap_) c.keys_denied = zap_->denied();
  return c;
}

std::uint64_t network_data_plane::buffered_bytes() const {
  return core_->gauge()->current();
}

std::uint64_t network_data_plane::buffered_bytes_high_water() const {
  return core_->gauge()->high_water();
}

namespace {

// The data endpoint's closed connections, by file descriptor, on their way to
// core::on_connections_closed. A closed connection's last frames may still wait in the router
// when its event is read, so a closure read in one turn is applied in the next, after the
// router was drained again. A descriptor is reused by a later connection (ACCEPTED after
// DISCONNECTED): the frames read meanwhile cannot be told apart, so that closure is left to the
// coordinator's own detection rather than risk breaking a healthy channel.
struct closed_connections {
  std::set<int> fresh;  // read this turn
  std::set<int> due;    // read last turn: applied after this turn's drain

  void closed(int fd) { fresh.insert(fd); }
  void accepted(int fd) {
    fresh.erase(fd);
    due.erase(fd);
  }
};

// Takes every event the data endpoint's monitor has queued.
void take_monitor_events(zmq::socket_t& monitor, network_data_plane::core& core,
                         closed_connections& closed) {
  while (auto event = take_monitor_event(monitor)) {
    const auto [what, value] = *event;
    const int fd = static_cast<int>(value);
    if (what == ZMQ_EVENT_DISCONNECTED)
      closed.closed(fd);
    else if (what == ZMQ_EVENT_ACCEPTED)
      closed.accepted(fd);
    else if (what != 0)
      core.on_handshake_refused(what, value);
  }
}

}  // namespace

void network_data_plane::run(zmq::socket_t router, zmq::socket_t monitor) {
  // The thread waits in poll(2) on the sockets' ZMQ_FDs and the eventfd itself rather than in
  // zmq_poll, which pays a poll with no timeout and a ZMQ_EVENTS read (two more system calls)
  // on each side of every wait. ZMQ_FD is edge-triggered (transport/async_socket.cpp): it signals
  // when the socket is handed a command, and only a call that processes the socket's commands
  // re-arms it. A receive that finds nothing does; so the loop drains the router (and the
  // monitor) until they are empty before it waits. A send may process commands too (an
  // activation of a pipe with frames waiting), so after credits went out ZMQ_EVENTS is read
  // before waiting, and a readable router is drained first.
  const int router_fd = router.get(zmq::sockopt::fd);
  const int monitor_fd = monitor.get(zmq::sockopt::fd);
  // The router, the eventfd, the monitor, then the output channels' room watches (core::
  // watch_for_room), listed again before every wait.
  std::vector<pollfd> fds = {
      {router_fd, POLLIN, 0}, {core_->event_fd(), POLLIN, 0}, {monitor_fd, POLLIN, 0}};
  constexpr std::size_t fixed_fds = 3;
  std::vector<std::uint64_t> watch_ids;
  zmq::message_t peer;
  zmq::message_t payload;
  std::string sender_key;
  closed_connections closed;
  // The monitor is read only when its descriptor says so (it stays readable until ZeroMQ
  // processed what arrived), or every few turns that did not wait: no system call per turn.
  bool monitor_ready = true;
  int turns_since_monitor = 0;
  while (!stopping_.load()) {
    // Bounded turns, so credits for what was taken go out between them.
    int taken = 0;
    for (; taken < frames_per_turn; ++taken) {
      auto got = router.recv(peer, zmq::recv_flags::dontwait);
      if (!got) break;
      bool more = peer.more();
      if (!more) continue;  // a routing id without payload: not possible from a DEALER
      (void)router.recv(payload, zmq::recv_flags::none);  // the parts of a message arrive together
      more = payload.more();
      while (more) {
        // More than one payload part: not ours. Drain and refuse.
        zmq::message_t extra;
        (void)router.recv(extra, zmq::recv_flags::none);
        more = extra.more();
        if (!more) payload = zmq::message_t();
      }
      core_->count_frame();
      auto decoded = decode_data_frame(payload.to_string_view(), options_.max_frame_bytes);
      if (!decoded) {
        core_->on_bad_frame(decoded.error());
        continue;
      }
      data_message m = std::move(decoded).value();
      if (auto* f = std::get_if<data_frame>(&m)) {
        sender_key.clear();
        if (options_.curve) {
          // The key the ZAP handler let this connection in with.
          if (const char* user_id = zmq_msg_gets(payload.handle(), "User-Id")) sender_key = user_id;
        }
        core_->on_data(peer.to_string(), sender_key, zmq_msg_get(payload.handle(), ZMQ_SRCFD),
                       std::move(*f));
      }
      // Credits only travel to producers; one arriving here is ignored.
    }
    // Always before closures are applied: a descriptor reused meanwhile must be seen (its
    // ACCEPTED came before any frame of the new connection).
    if (monitor_ready || !closed.due.empty() || ++turns_since_monitor >= 16) {
      take_monitor_events(monitor, *core_, closed);
      monitor_ready = false;
      turns_since_monitor = 0;
    }
    if (taken < frames_per_turn) {
      // The router is drained: the closures read last turn have delivered all they carried.
      core_->on_connections_closed(closed.due);
      closed.due = std::exchange(closed.fresh, {});
    }
    core_->release_held_credits(std::chrono::steady_clock::now());
    const bool sent = core_->send_credits(router);
    // A turn cut short leaves frames behind; a send may have taken the router's wake-up;
    // closures read this turn wait for the next drain.
    if (taken == frames_per_turn || !closed.due.empty()) continue;
    if (sent && (router.get(zmq::sockopt::events) & ZMQ_POLLIN) != 0) continue;
    // With credits due that ZeroMQ did not take, look again soon rather than at the timeout.
    const int timeout = core_->credits_due() ? 5 : static_cast<int>(poll_timeout_ms);
    fds.resize(fixed_fds);
    watch_ids.clear();
    core_->add_watched(fds, watch_ids);
    for (auto& f : fds) f.revents = 0;
    if (::poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      spdlog::critical("data plane: poll failed: {}", std::strerror(errno));
      return;
    }
    core_->fire_watches(fds, fixed_fds, watch_ids);
    monitor_ready = (fds[2].revents & POLLIN) != 0;
    if (fds[1].revents & POLLIN) {
      std::uint64_t ignored = 0;
      [[maybe_unused]] auto n = ::read(core_->event_fd(), &ignored, sizeof ignored);
    }
  }
  (void)zmq_socket_monitor(router.handle(), nullptr, 0);
  monitor.close();
  router.close();
}

}  // namespace snapflow::data
