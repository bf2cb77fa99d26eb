#include "transport/worker_endpoint.hpp"

#include <unistd.h>

#include <cassert>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "engine/hop_trace.hpp"
#include "transport/async_socket.hpp"
#include "transport/envelope.hpp"
#include "transport/exception_text.hpp"
#include "transport/wire_conversions.hpp"

namespace snapflow::transport {

namespace {

using namespace std::chrono_literals;

constexpr int frames_per_turn = 64;
// Between closing a connection and opening its replacement (see reconnect).
constexpr std::chrono::milliseconds reconnect_pause{100};
constexpr std::size_t max_log_lines_per_interval = 20;
// An acknowledgement batch stays within what the coordinator takes (register_ack's
// max_batch_bytes): a new frame is begun when the estimate would pass it (an acknowledgement
// without state is under 200 bytes) or when this many acknowledgements are in it, which bounds
// the coordinator's work per frame too.
constexpr std::size_t ack_bytes_estimate = 256;
constexpr std::size_t batch_fixed_bytes = 64;
constexpr std::size_t max_acks_per_batch = 4096;
// The room the endpoint's reused frame keeps between messages.
constexpr std::size_t max_kept_scratch_bytes = 64 * 1024;

std::size_t estimated_bytes(const wire::acknowledge_checkpoint& ack) {
  std::size_t n = ack_bytes_estimate + ack.job.size();
  for (const auto& h : ack.state_handles)
    n += 64 + h.path.size() + (h.inline_state ? h.inline_state->size() : 0);
  return n;
}

std::int64_t steady_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void log_coroutine_end(const char* name, std::exception_ptr error) {
  if (error) spdlog::critical("worker endpoint: the {} stopped: {}", name, exception_text(error));
}

template <typename T>
std::string describe(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

}  // namespace

// One connection to the coordinator: a fresh DEALER socket and what waits to be sent on it.
// Starting over means a new connection, so nothing queued for the old one (reports about tasks
// since cancelled, ZeroMQ's own buffered frames) reaches the coordinator afterwards.
struct worker_endpoint::connection {
  connection(const asio::any_io_executor& executor, std::unique_ptr<async_socket> s)
      : socket(std::move(s)), wake(executor) {}

  void close() {
    closed = true;
    handshakes.stop();  // before the socket it watches goes
    socket->close();
    wake.cancel();
  }

  std::unique_ptr<async_socket> socket;
  connection_monitor handshakes;
  std::deque<std::string> outgoing;
  asio::steady_timer wake;
  bool writer_waiting = false;
  bool closed = false;
};

// One report of a task: an encoded frame, or an acknowledgement kept as a value so that the
// acknowledgements ready at the same moment can share one batch frame. Neither (an empty frame
// and no ack) is the cue for a heartbeat.
struct worker_endpoint::task_report {
  std::string frame;
  std::optional<wire::acknowledge_checkpoint> ack;
};

// Where task threads leave their reports: a mutex-protected list the endpoint's thread takes
// in one go. Separate from the endpoint so the listeners that tasks hold never keep the
// endpoint (and its thread-bound socket) alive on a task thread.
class worker_endpoint::task_inbox {
 public:
  task_inbox(asio::any_io_executor executor, std::weak_ptr<worker_endpoint> endpoint,
             std::size_t max_frames)
      : executor_(std::move(executor)), endpoint_(std::move(endpoint)), max_frames_(max_frames) {}

  void push(task_report report) {
    // Encoded off the lock, and only while the direct path looks open (checked again below).
    const bool own_thread =
        std::this_thread::get_id() == owner_thread_.load(std::memory_order_relaxed);
    // Each task thread keeps its own frame's room (an acknowledgement is a few hundred bytes).
    thread_local std::string direct_frame;
    if (direct_frame.capacity() > max_kept_scratch_bytes) direct_frame = std::string();
    direct_frame.clear();
    if (report.ack && !own_thread && direct_open_.load(std::memory_order_relaxed))
      wire::encode(*report.ack, direct_frame);
    bool now = false;
    bool post_flush = false;
    {
      std::lock_guard lock(mutex_);
      // An acknowledgement from a task thread with nothing queued or being flushed ahead of it,
      // while the endpoint's thread holds the path open: onto the socket from here.
      if (!direct_frame.empty() && direct_ != nullptr && frames_.empty() && !flushing_) {
        if (!direct_->try_send_from_any_thread(direct_frame)) {
          ++direct_sent_;
          hop_trace::record("w.direct_ack", 1);
          return;
        }
        // Refused (a send in flight, a full queue): the ordinary way, behind what came first.
      }
      // A report made on the endpoint's own thread (a task_executor answering a trigger at
      // once) with nothing queued before it goes out now: the same order, one hop less. While
      // the endpoint handles a message it is queued instead, and goes out when that message
      // is handled, with every other report the message caused (one batch of acks).
      now = frames_.empty() && own_thread && !holding_;
      if (!now) {
        if (frames_.size() >= max_frames_) {
          ++dropped_;
          return;
        }
        frames_.push_back(std::move(report));
        queued_.store(frames_.size(), std::memory_order_release);
        post_flush = !(own_thread && holding_) && !std::exchange(flush_posted_, true);
      }
    }
    if (now) {
      if (auto self = endpoint_.lock()) self->deliver_task_report(std::move(report));
    } else if (post_flush) {
      hop_trace::record("w.post_flush", 0);
      asio::post(executor_, [endpoint = endpoint_] {
        if (auto self = endpoint.lock()) self->flush_task_reports();
      });
    }
  }

  // The thread that runs the endpoint's executor; reports made there may skip the queue.
  void set_owner_thread(std::thread::id id) { owner_thread_.store(id, std::memory_order_relaxed); }

  // Swaps every queued report into `out` (emptied first; its room becomes the queue's, so
  // neither side allocates again in steady state). The direct path stays shut until end_flush,
  // so nothing overtakes the reports taken while they are being sent.
  void take(std::vector<task_report>& out) {
    out.clear();
    std::lock_guard lock(mutex_);
    flush_posted_ = false;
    flushing_ = true;
    std::swap(out, frames_);
    queued_.store(0, std::memory_order_release);
  }

  void end_flush(async_socket* direct) {
    std::lock_guard lock(mutex_);
    flushing_ = false;
    set_direct_locked(direct);
  }

  // The endpoint's thread: the socket task threads may send on, or null to shut the path. It
  // is shut before the socket is closed or anything is queued ahead, and a send in progress
  // holds the mutex, so the socket outlives every use made of it here.
  void set_direct(async_socket* direct) {
    std::lock_guard lock(mutex_);
    set_direct_locked(direct);
  }

  std::uint64_t direct_sent() const { return direct_sent_.load(std::memory_order_relaxed); }

  // Called on the owner thread around the handling of one message from the coordinator. Only
  // that thread reads it (push looks at it only on its own thread), so it takes no lock.
  void hold(bool holding) { holding_ = holding; }

  // Whether a report made now may go out at once, ahead of the queue, without the lock: made
  // on the endpoint's own thread, neither held back nor in a flush, with nothing queued (the
  // queue's size is mirrored in queued_ for this). One another thread queued before it is
  // seen here; one queued at this very moment is concurrent with it, so either order is one
  // the two could have had.
  bool owner_may_send_now() const {
    return std::this_thread::get_id() == owner_thread_.load(std::memory_order_relaxed) &&
           !holding_ && !flushing_ && queued_.load(std::memory_order_acquire) == 0;
  }

  std::shared_ptr<worker_endpoint> endpoint() const { return endpoint_.lock(); }

  std::uint64_t dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
  }

 private:
  void set_direct_locked(async_socket* direct) {
    direct_ = direct;
    direct_open_.store(direct != nullptr, std::memory_order_relaxed);
  }

  asio::any_io_executor executor_;
  std::weak_ptr<worker_endpoint> endpoint_;
  std::size_t max_frames_;
  mutable std::mutex mutex_;
  std::vector<task_report> frames_;
  std::atomic<std::size_t> queued_{0};  // frames_.size(), for owner_may_send_now
  bool flush_posted_ = false;
  bool flushing_ = false;  // written by the owner thread only, under the mutex
  bool holding_ = false;   // the owner thread's alone (see hold)
  async_socket* direct_ = nullptr;
  std::atomic<bool> direct_open_{false};  // a hint read off the lock: direct_ != nullptr
  std::atomic<std::uint64_t> direct_sent_{0};
  std::uint64_t dropped_ = 0;
  std::atomic<std::thread::id> owner_thread_{};
};

// The task_executor_listener tasks call: encodes on the caller's thread, then queues.
class worker_endpoint::listener_proxy final : public task_executor_listener {
 public:
  explicit listener_proxy(std::shared_ptr<task_inbox> inbox) : inbox_(std::move(inbox)) {}

  void task_state_changed(const job_id& job, const execution_attempt_id& attempt,
                          execution_state state, const std::string& message) override {
    // States the protocol has no name for (scheduled, canceling) are not reported.
    const auto s = to_wire(state);
    if (!s) return;
    // Before an attempt's end, a heartbeat with its final record counters (the empty frame is
    // the cue: no encoded message is empty), so the coordinator has them when the job ends.
    if (*s == wire::task_state::finished || *s == wire::task_state::failed ||
        *s == wire::task_state::canceled)
      inbox_->push({});
    inbox_->push({wire::encode(wire::task_state_update{job, attempt, *s, message}), {}});
  }
  void acknowledge_checkpoint(const checkpoint_ack& ack) override {
    // Made on the endpoint's own thread with nothing waiting ahead (a source taking its
    // trigger, the stub executor): sent from here, through the endpoint's kept acknowledgement,
    // with no report copied or queued.
    if (inbox_->owner_may_send_now()) {
      if (auto endpoint = inbox_->endpoint()) {
        endpoint->send_ack_now(ack);
        return;
      }
    }
    inbox_->push({{}, to_wire(ack)});
  }
  void decline_checkpoint(const checkpoint_decline& decline) override {
    inbox_->push({wire::encode(to_wire(decline)), {}});
  }
  void source_exhausted(const job_id& job, const execution_attempt_id& attempt,
                        checkpoint_id last_barrier) override {
    inbox_->push({wire::encode(wire::source_exhausted{job, attempt, last_barrier}), {}});
  }

 private:
  std::shared_ptr<task_inbox> inbox_;
};

worker_endpoint::worker_endpoint(asio::any_io_executor executor, zmq::context_t& context,
                                 worker_endpoint_options options)
    : executor_(std::move(executor)),
      context_(context),
      options_(std::move(options)),
      tick_timer_(executor_),
      handshake_retry_timer_(executor_),
      reconnect_timer_(executor_),
      interval_(options_.heartbeat_interval),
      timeout_(options_.heartbeat_timeout),
      log_limiter_(std::chrono::duration_cast<std::chrono::microseconds>(
                       options_.bad_input_log_interval)
                       .count(),
                   max_log_lines_per_interval) {
  assert(!options_.worker_id.empty());
  assert(interval_.count() > 0);
  assert(timeout_ > interval_);
}

worker_endpoint::~worker_endpoint() { stop(); }

std::shared_ptr<task_executor_listener> worker_endpoint::listener() {
  if (!inbox_)
    inbox_ = std::make_shared<task_inbox>(executor_, weak_from_this(), options_.max_queued_frames);
  return std::make_shared<listener_proxy>(inbox_);
}

void worker_endpoint::set_executor(std::shared_ptr<task_executor> executor) {
  assert(!running_);
  tasks_ = std::move(executor);
}

worker_endpoint_counters worker_endpoint::counters() const {
  worker_endpoint_counters c = counters_;
  if (inbox_) {
    c.direct_acks = inbox_->direct_sent();
    c.frames_sent += c.direct_acks;
  }
  return c;
}

std::uint64_t worker_endpoint::dropped_task_reports() const {
  return counters_.dropped_task_reports + (inbox_ ? inbox_->dropped() : 0);
}

std::int64_t worker_endpoint::now_us() const { return steady_us(); }

std::error_code worker_endpoint::start(fatal_handler on_fatal) {
  assert(tasks_ && "set_executor before start");
  assert(!running_);
  if (!inbox_) (void)listener();
  on_fatal_ = std::move(on_fatal);
  running_ = true;
  if (auto e = open_connection()) {
    running_ = false;
    return e;
  }
  asio::co_spawn(
      executor_, [self = shared_from_this()] { return self->ticker(); },
      [](std::exception_ptr e) { log_coroutine_end("ticker", e); });
  return {};
}

void worker_endpoint::stop() {
  if (!running_) return;
  running_ = false;
  registered_ = false;
  update_direct_path();
  if (connection_) connection_->close();
  tick_timer_.cancel();
  handshake_retry_timer_.cancel();
  reconnect_timer_.cancel();
}

void worker_endpoint::new_session() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  do {
    session_ = rng();
  } while (session_ == 0);  // 0 means "no session" on the wire
}

std::error_code worker_endpoint::open_connection() {
  socket_options so;
  so.max_frame_bytes = options_.max_frame_bytes;
  so.routing_id = options_.worker_id;
  so.shared_sends = true;  // task threads send their acknowledgements themselves
  // A coordinator host that vanished is noticed by ZeroMQ too, and reconnection attempts back
  // off to at most the pause of a failed handshake.
  so.zmtp_heartbeat_interval_ms = static_cast<int>(interval_.count());
  so.zmtp_heartbeat_timeout_ms = static_cast<int>(timeout_.count());
  so.reconnect_interval_max_ms = static_cast<int>(options_.handshake_retry_max.count());
  // The old connection goes first: the coordinator's ROUTER lets no second connection take
  // this worker's id while the first is open (ROUTER_HANDOVER off).
  if (inbox_) inbox_->set_direct(nullptr);  // before the old socket goes
  if (connection_) connection_->close();
  auto socket = std::make_unique<async_socket>(executor_, context_, zmq::socket_type::dealer, so);
  if (options_.curve) {
    if (auto e = apply_curve_client(socket->native_handle(), *options_.curve)) return e;
  }
  auto c = std::make_shared<connection>(executor_, std::move(socket));
  // Before connecting, so not even the first handshake's failure goes unseen.
  auto monitored = c->handshakes.start(
      context_, c->socket->native_handle(),
      [weak = weak_from_this(), executor = executor_,
       weak_c = std::weak_ptr<connection>(c)](const handshake_event& event) {
        asio::post(executor, [weak, weak_c, event] {
          auto self = weak.lock();
          auto conn = weak_c.lock();
          if (self && conn) self->on_handshake_failed(conn, event);
        });
      });
  if (monitored) return monitored;
  if (auto e = c->socket->connect(options_.coordinator_address)) {
    c->close();
    return e;
  }
  connection_ = std::move(c);
  registered_ = false;
  new_session();
  last_heard_us_ = now_us();
  asio::post(executor_,
             [self = shared_from_this(), c = connection_] { self->start_reading(c); });
  asio::co_spawn(
      executor_, [self = shared_from_this(), c = connection_] { return self->writer(c); },
      [](std::exception_ptr e) { log_coroutine_end("writer", e); });
  send_register();
  return {};
}

void worker_endpoint::reconnect() {
  ++counters_.reconnects;
  // The old connection is closed now and the new one opened a moment later: the coordinator's
  // ROUTER keeps this worker's id for the old connection until it has seen it close, and a
  // connection that arrives before that never gets the id (ROUTER_HANDOVER off).
  if (inbox_) inbox_->set_direct(nullptr);
  if (connection_) connection_->close();
  registered_ = false;
  // The ticker's patience counts from here: were it to count from the last frame heard, every
  // tick within the pause would call reconnect() again, and each call pushes the timer below
  // back, so the new connection would never be opened.
  last_heard_us_ = now_us();
  reconnect_timer_.expires_after(reconnect_pause);
  reconnect_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !self->running_) return;
    if (auto e = self->open_connection()) {
      // The address connected before, so this is not the configuration's fault: try later.
      spdlog::error("cannot reconnect to the coordinator at {}: {}",
                    self->options_.coordinator_address, e.message());
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The reader, the writer and the ticker.

// Runs on the executor (posted by open_connection): the socket belongs to that thread.
void worker_endpoint::start_reading(const std::shared_ptr<connection>& c) {
  inbox_->set_owner_thread(std::this_thread::get_id());
  if (c->closed) return;  // replaced before it got going
  // Every frame through one callback, no coroutine per frame (async_socket::receive_each).
  c->socket->receive_each(
      [this, self = shared_from_this(), c](received_frame& in) {
        if (c->closed) return;
        if (in.error) {  // a multipart message: dropped, and reading goes on
          ++counters_.frames_received;
          ++counters_.bad_frames;
          return;
        }
        try {
          on_frame(in.payload);
        } catch (...) {
          spdlog::critical("worker endpoint: handling a frame from the coordinator failed: {}; "
                           "cancelling every task and reconnecting",
                           current_exception_text());
          start_over_after_fault(c);
          return;
        }
        if (in.payload.capacity() > max_kept_scratch_bytes) in.payload = std::string();
      },
      [c](std::error_code why) {
        if (why != asio::error::operation_aborted && !c->closed)
          spdlog::error("receiving from the coordinator failed: {}", why.message());
      },
      frames_per_turn);
}

// Nothing in on_frame throws by design; if something does, what this session holds is no longer
// known, so it ends as after a silent coordinator: every task cancelled, what they reported
// dropped (not sent on the next session), a fresh connection.
void worker_endpoint::start_over_after_fault(const std::shared_ptr<connection>& c) {
  if (!running_ || connection_ != c) return;
  try {
    drop_tasks("handling a frame from the coordinator failed");
    flush_task_reports();  // not registered now: dropped and counted
    reconnect();
  } catch (...) {
    spdlog::critical("worker endpoint: cannot start over: {}; the heartbeat timeout will try again",
                     current_exception_text());
  }
}

asio::awaitable<void> worker_endpoint::writer(std::shared_ptr<connection> c) {
  int frames_this_turn = 0;
  while (!c->closed) {
    if (c->outgoing.empty()) {
      c->wake.expires_at(asio::steady_timer::time_point::max());
      c->writer_waiting = true;
      update_direct_path();
      std::error_code ignored;
      co_await c->wake.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
      c->writer_waiting = false;
      frames_this_turn = 0;
      continue;
    }
    std::string frame = std::move(c->outgoing.front());
    c->outgoing.pop_front();
    if (const std::error_code quick = c->socket->try_send(frame);
        quick != std::errc::resource_unavailable_try_again) {
      if (quick == asio::error::operation_aborted) co_return;
      if (quick)
        spdlog::error("sending to the coordinator failed: {}", quick.message());
      else
        ++counters_.frames_sent;
      if (++frames_this_turn == frames_per_turn) {
        frames_this_turn = 0;
        co_await asio::post(executor_, asio::use_awaitable);
      }
      continue;
    }
    // A DEALER send waits while the coordinator is unreachable; the ticker gives up on this
    // connection after the heartbeat timeout and closes it, which ends the wait.
    const std::error_code error = co_await c->socket->send(std::move(frame));
    if (c->closed) co_return;
    if (error) {
      if (error == asio::error::operation_aborted) co_return;
      spdlog::error("sending to the coordinator failed: {}", error.message());
      continue;
    }
    ++counters_.frames_sent;
    if (++frames_this_turn == frames_per_turn) {
      frames_this_turn = 0;
      co_await asio::post(executor_, asio::use_awaitable);
    }
  }
}

asio::awaitable<void> worker_endpoint::ticker() {
  while (running_) {
    tick_timer_.expires_after(interval_);
    std::error_code ec;
    co_await tick_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!running_) co_return;
    if (ec == asio::error::operation_aborted) continue;  // the interval changed: re-arm
    const std::int64_t silent_us = now_us() - last_heard_us_;
    // Registering, a fresh connection is tried sooner: a reconnection can reach the
    // coordinator before the close of the connection it replaces, and the coordinator's ROUTER
    // lets no second connection take this worker's id while the first is open (ROUTER_HANDOVER
    // off), so the frames of that attempt never arrive as this worker's.
    const auto patience = registered_ ? timeout_ : std::min(timeout_, 4 * interval_);
    if (silent_us > std::chrono::duration_cast<std::chrono::microseconds>(patience).count()) {
      if (registered_) {
        spdlog::warn("nothing heard from the coordinator at {} for {} ms: cancelling every task "
                     "and reconnecting",
                     options_.coordinator_address, silent_us / 1000);
        drop_tasks("the coordinator is unreachable");
      } else if (log_limiter_.allow("coordinator-silent", now_us()).allowed) {
        spdlog::info("no answer from the coordinator at {} yet; still trying",
                     options_.coordinator_address);
      }
      reconnect();
      continue;
    }
    if (registered_) {
      send_heartbeat();
    } else if (connection_ && connection_->outgoing.empty()) {
      // No answer to the last register_worker yet (it may have been lost with a connection);
      // resending within a session is harmless, the coordinator treats it as a resend.
      send_register();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Receiving.

void worker_endpoint::on_frame(std::string_view payload) {
  ++counters_.frames_received;
  // Any frame on the connection means the coordinator is there; until it accepts this worker,
  // only its register_ack counts (on_register_ack), so a connection on which registering never
  // succeeds is given up after the timeout.
  if (registered_) last_heard_us_ = now_us();
  // A trigger, the message of every checkpoint, is read into a kept struct when it is
  // canonical (what a snapflow coordinator sends): no message variant, no allocation.
  // Not held back: a single trigger makes one report per attempt at most, and each goes out as
  // it is made (batching the reports of one message is for trigger_checkpoint_batch).
  if (payload.size() <= options_.max_frame_bytes && wire::decode_canonical(payload, trigger_)) {
    on_trigger(trigger_);
    return;
  }
  wire::decode_result decoded = wire::decode(payload, options_.max_frame_bytes);
  if (!decoded) {
    ++counters_.bad_frames;
    if (auto d = log_limiter_.allow("coordinator", now_us()); d.allowed)
      spdlog::warn("bad frame from the coordinator: {}{}", describe(decoded.error()),
                   d.suppressed ? "; " + std::to_string(d.suppressed) + " more not logged"
                                : std::string());
    return;
  }
  // What the tasks report while this message is handled (a stub executor acknowledging a
  // batch of triggers at once) goes out right after it, acknowledgements in one frame.
  inbox_->hold(true);
  {
    // Released however on_message ends (an exception is survived: start_over_after_fault).
    struct release_hold {
      task_inbox& inbox;
      ~release_hold() { inbox.hold(false); }
    } const held{*inbox_};
    on_message(std::move(decoded).value());
  }
  flush_task_reports();
}

void worker_endpoint::on_message(wire::message&& m) {
  std::visit(
      [&](auto& body) {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, wire::register_ack>) {
          on_register_ack(body);
        } else if constexpr (std::is_same_v<T, wire::not_registered>) {
          on_not_registered(body);
        } else if constexpr (std::is_same_v<T, wire::heartbeat>) {
          // Nothing to do: hearing it is the point.
        } else if (!registered_) {
          // Before registering the worker runs nothing, and must not start to (protocol 5.1).
          ++counters_.ignored_messages;
        } else if constexpr (std::is_same_v<T, wire::deploy_task>) {
          tasks_->deploy(from_wire(body));
        } else if constexpr (std::is_same_v<T, wire::cancel_task>) {
          tasks_->cancel(body.job, body.attempt);
        } else if constexpr (std::is_same_v<T, wire::finish_task>) {
          tasks_->finish(body.job, body.attempt);
        } else if constexpr (std::is_same_v<T, wire::trigger_checkpoint>) {
          on_trigger(body);
        } else if constexpr (std::is_same_v<T, wire::notify_checkpoint_complete>) {
          tasks_->notify_checkpoint_complete(body.job, body.attempt, body.checkpoint);
        } else if constexpr (std::is_same_v<T, wire::notify_checkpoint_aborted>) {
          tasks_->notify_checkpoint_aborted(body.job, body.attempt, body.checkpoint,
                                            body.latest_completed_checkpoint_id.value_or(0));
        } else if constexpr (std::is_same_v<T, wire::trigger_checkpoint_batch>) {
          hop_trace::record("w.trigger", body.checkpoint);
          // The entries differ only in their attempt: convert the shared part once.
          const wire::trigger_checkpoint first = body.entry(body.attempts.front());
          const std::int64_t timestamp_us = timestamp_us_from_wire(first);
          const checkpoint_options options = options_from_wire(first);
          for (const auto& attempt : body.attempts)
            tasks_->trigger_checkpoint(body.job, attempt, body.checkpoint, timestamp_us, options);
        } else if constexpr (std::is_same_v<T, wire::notify_checkpoint_complete_batch>) {
          for (const auto& attempt : body.attempts)
            tasks_->notify_checkpoint_complete(body.job, attempt, body.checkpoint);
        } else if constexpr (std::is_same_v<T, wire::notify_checkpoint_aborted_batch>) {
          for (const auto& attempt : body.attempts)
            tasks_->notify_checkpoint_aborted(body.job, attempt, body.checkpoint,
                                              body.latest_completed_checkpoint_id.value_or(0));
        } else {
          ++counters_.ignored_messages;  // a message only workers send
        }
      },
      m);
}

void worker_endpoint::on_trigger(const wire::trigger_checkpoint& m) {
  // Before registering the worker runs nothing, and must not start to (protocol 5.1).
  if (!registered_) {
    ++counters_.ignored_messages;
    return;
  }
  hop_trace::record("w.trigger", m.checkpoint);
  tasks_->trigger_checkpoint(m.job, m.attempt, m.checkpoint, timestamp_us_from_wire(m),
                             options_from_wire(m));
}

void worker_endpoint::on_register_ack(const wire::register_ack& ack) {
  if (!ack.accepted) {
    const std::string why = "the coordinator at " + options_.coordinator_address +
                            " refused to register worker " + options_.worker_id + ": " +
                            (ack.reason.empty() ? std::string("no reason given") : ack.reason);
    spdlog::error("{}", why);
    stop();
    if (on_fatal_) on_fatal_(why);
    return;
  }
  last_heard_us_ = now_us();
  if (registered_) return;  // the answer to a resend
  registered_ = true;
  handshake_backoff_ = std::chrono::milliseconds(0);
  update_direct_path();
  coordinator_max_batch_bytes_ = ack.max_batch_bytes;
  ++counters_.registrations;
  // The coordinator's timing rules, so both sides agree when to give the other up.
  if (ack.heartbeat_interval_ms > 0 && ack.heartbeat_timeout_ms > ack.heartbeat_interval_ms) {
    const std::chrono::milliseconds interval(ack.heartbeat_interval_ms);
    timeout_ = std::chrono::milliseconds(ack.heartbeat_timeout_ms);
    if (interval != interval_) {
      interval_ = interval;
      tick_timer_.cancel();  // the ticker re-arms with the new interval
    }
  }
  spdlog::info("registered with the coordinator at {} as worker {} ({} slots, heartbeat every {} "
               "ms, timeout {} ms)",
               options_.coordinator_address, options_.worker_id, options_.slots,
               interval_.count(), timeout_.count());
}

void worker_endpoint::on_not_registered(const wire::not_registered& m) {
  if (!registered_) return;  // our register_worker is on its way, or about to be resent
  spdlog::warn("the coordinator no longer knows this worker ({}): cancelling every task and "
               "registering again",
               m.reason);
  drop_tasks("the coordinator no longer knows this worker");
  new_session();
  last_heard_us_ = now_us();  // the timeout for this registration starts now
  send_register();
}

void worker_endpoint::on_handshake_failed(const std::shared_ptr<connection>& c,
                                          const handshake_event& event) {
  if (!running_ || c != connection_ || c->closed) return;  // an old connection's late report
  ++counters_.handshake_failures;
  const bool retried_by_zeromq = event.failure == handshake_failure::no_detail;
  // An error, not a warning: a worker that cannot complete its handshake never registers, and
  // nothing else says why (a CURVE key pair the coordinator does not list, the wrong
  // coordinator key, CURVE on one side only).
  if (auto d = log_limiter_.allow("handshake", now_us()); d.allowed)
    spdlog::error("the handshake with the coordinator at {} failed: {} (detail {}){}; check "
                  "--curve-secret-key, --curve-coordinator-key and the coordinator's allowlist; "
                  "retrying",
                  options_.coordinator_address, to_string(event.failure), event.detail,
                  d.suppressed > 0 ? " (" + std::to_string(d.suppressed) + " more since)" : "");
  if (retried_by_zeromq) return;  // ZeroMQ reconnects by itself, backing off to the maximum
  // ZeroMQ gives the connection up for good: start over on a fresh one after a pause.
  handshake_backoff_ = handshake_backoff_.count() == 0
                           ? options_.handshake_retry_min
                           : std::min(handshake_backoff_ * 2, options_.handshake_retry_max);
  handshake_retry_timer_.expires_after(handshake_backoff_);
  handshake_retry_timer_.async_wait(
      [weak = weak_from_this(), weak_c = std::weak_ptr<connection>(c)](std::error_code ec) {
        auto self = weak.lock();
        if (ec || !self || !self->running_ || self->connection_ != weak_c.lock()) return;
        if (self->registered_) return;
        self->reconnect();
      });
}

void worker_endpoint::drop_tasks(const std::string& why) {
  registered_ = false;
  update_direct_path();
  spdlog::debug("dropping every task: {}", why);
  tasks_->cancel_all();
}

// ---------------------------------------------------------------------------------------------
// Sending.

void worker_endpoint::send_register() {
  wire::register_worker m;
  m.worker_id = options_.worker_id;
  m.slots = options_.slots;
  m.data_endpoint = tasks_->data_endpoint();
  m.protocol_version = options_.protocol_version;
  m.pid = ::getpid();
  m.session = session_;
  // Half the frame limit: room for the estimate the coordinator makes of a batch to be off.
  m.max_batch_bytes = options_.max_frame_bytes / 2;
  m.data_roots.reserve(options_.data_roots.size());
  for (const auto& root : options_.data_roots) m.data_roots.push_back(wire::data_root{root});
  m.programs = options_.programs;
  send(m);
}

void worker_endpoint::send(const wire::message& m) {
  wire::encode(m, scratch_frame_);
  send_scratch_frame();
}

void worker_endpoint::send(const wire::acknowledge_checkpoint& ack) {
  wire::encode(ack, scratch_frame_);
  send_scratch_frame();
}

void worker_endpoint::send_scratch_frame() {
  if (!send_at_once(scratch_frame_)) queue_frame(scratch_frame_);
  // A large frame (a heartbeat with many tasks' counters) does not keep its room for good.
  if (scratch_frame_.capacity() > max_kept_scratch_bytes) scratch_frame_ = std::string();
}

void worker_endpoint::send_frame(std::string frame) {
  if (!send_at_once(frame)) queue_frame(std::move(frame));
}

bool worker_endpoint::send_at_once(std::string_view frame) {
  if (!running_ || !connection_ || connection_->closed) return true;  // dropped: no connection
  if (!connection_->writer_waiting || !connection_->outgoing.empty()) return false;
  // The writer is idle: no send is in flight and nothing queued to overtake.
  const std::error_code error = connection_->socket->try_send(frame);
  if (!error) {
    ++counters_.frames_sent;
    return true;
  }
  if (error == std::errc::resource_unavailable_try_again) return false;
  spdlog::error("sending to the coordinator failed: {}", error.message());
  return true;
}

void worker_endpoint::queue_frame(std::string frame) {
  if (!running_ || !connection_ || connection_->closed) return;
  if (connection_->outgoing.size() >= options_.max_queued_frames) {
    ++counters_.dropped_task_reports;
    return;
  }
  if (connection_->outgoing.empty()) inbox_->set_direct(nullptr);  // nothing may overtake it
  connection_->outgoing.push_back(std::move(frame));
  if (connection_->writer_waiting) connection_->wake.cancel();
}

void worker_endpoint::flush_task_reports() {
  hop_trace::record("w.flush", 0);
  // Acknowledgements next to each other go in one batch; any other report ends the batch
  // first, so the coordinator sees every report in the order the tasks made it.
  // Both vectors are members kept between flushes (see worker_endpoint.hpp), emptied here.
  std::vector<wire::acknowledge_checkpoint>& acks = ack_batch_;
  acks.clear();
  std::size_t acks_bytes = batch_fixed_bytes;
  std::vector<task_report>& reports = taken_reports_;
  inbox_->take(reports);
  // However this ends (an encoding that throws included), the flush ends with it: a flush left
  // open would keep task threads off the direct path for good.
  struct flush_end {
    worker_endpoint& self;
    ~flush_end() {
      self.taken_reports_.clear();
      self.inbox_->end_flush(self.direct_path());
    }
  } end_flush{*this};
  for (auto& report : reports) {
    if (report.ack && coordinator_max_batch_bytes_ > 0) {
      const std::size_t bytes = estimated_bytes(*report.ack);
      if (!acks.empty() && (acks.size() == max_acks_per_batch ||
                            acks_bytes + bytes > coordinator_max_batch_bytes_)) {
        send_acks(acks);
        acks_bytes = batch_fixed_bytes;
      }
      acks.push_back(std::move(*report.ack));
      acks_bytes += bytes;
      continue;
    }
    if (!acks.empty()) {
      send_acks(acks);
      acks_bytes = batch_fixed_bytes;
    }
    deliver_task_report(std::move(report));
  }
  if (!acks.empty()) send_acks(acks);
}

async_socket* worker_endpoint::direct_path() const {
  if (!running_ || !registered_ || !connection_ || connection_->closed ||
      !connection_->writer_waiting || !connection_->outgoing.empty())
    return nullptr;
  return connection_->socket.get();
}

void worker_endpoint::update_direct_path() {
  if (inbox_) inbox_->set_direct(direct_path());
}

void worker_endpoint::send_acks(std::vector<wire::acknowledge_checkpoint>& acks) {
  assert(!acks.empty());
  hop_trace::record("w.send_acks", static_cast<std::int64_t>(acks.size()));
  if (!registered_) {
    counters_.dropped_task_reports += acks.size();
  } else if (acks.size() == 1) {
    send(acks.front());
  } else {
    send(wire::acknowledge_checkpoint_batch{std::move(acks)});
  }
  acks.clear();
}

void worker_endpoint::send_ack_now(const checkpoint_ack& ack) {
  if (!registered_) {  // see deliver_task_report
    ++counters_.dropped_task_reports;
    return;
  }
  hop_trace::record("w.send_acks", 1);
  to_wire(ack, kept_ack_);
  send(kept_ack_);
}

void worker_endpoint::deliver_task_report(task_report report) {
  // Reports from before registering belong to tasks the coordinator has given up on; the
  // worker sends nothing but register_worker until it is accepted (protocol 5.1).
  if (!registered_) {
    ++counters_.dropped_task_reports;
    return;
  }
  if (report.ack) {
    send(*report.ack);
    return;
  }
  if (report.frame.empty()) {
    send_heartbeat();  // a task is about to report its end: its final counters first
    return;
  }
  send_frame(std::move(report.frame));
}

void worker_endpoint::send_heartbeat() {
  wire::heartbeat beat{options_.worker_id, wall_clock_ms(), {}};
  if (tasks_) {
    auto counters = tasks_->take_io_counters();
    if (!counters.empty()) {
      beat.tasks.emplace();
      beat.tasks->reserve(counters.size());
      for (const auto& c : counters) beat.tasks->push_back(to_wire(c));
    }
  }
  send(std::move(beat));
}

}  // namespace snapflow::transport
