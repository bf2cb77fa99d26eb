#include "transport/async_socket.hpp"

#include <algorithm>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <cassert>
#include <functional>
#include <chrono>
#include <limits>
#include <mutex>
#include <utility>

#include <asio/post.hpp>

// How waiting works, and why.
//
// ZMQ_FD is not "readable when a message is there". It is the socket's command mailbox: it
// becomes readable when ZeroMQ's I/O thread posts a command (a message arrived, a full queue
// drained, a peer connected), and every zmq call on the socket may process those commands,
// which clears the descriptor whether or not the caller wanted the news. Asio watches the
// descriptor edge-triggered, so readiness that was cleared, or reported while nobody waited,
// never comes back. Three rules follow:
//
//  1. Try the operation first (dontwait); wait only after it says EAGAIN.
//  2. Before waiting, read ZMQ_EVENTS. It processes every pending command, so from then on any
//     new command makes the descriptor readable again, a fresh edge that reaches our wait. If
//     ZMQ_EVENTS already says "ready", try again instead of waiting. (A dontwait receive that
//     says EAGAIN has just processed every command itself; a send has not, it throttles.)
//  3. Any zmq call may eat the edge another coroutine is waiting for (the reader's send-side
//     twin, or the other way round). So after each operation, if the other direction is
//     parked, read ZMQ_EVENTS and wake it when it can proceed.
//
// One case ZMQ_EVENTS cannot describe: a ROUTER sends to one peer, and that peer's queue is
// full while others are not. POLLOUT then says "writable" (some pipe is) but our send still
// fails, and no flag will ever say when that one pipe drains. The writer then waits for any
// command (the drain posts one), for the reader's activity, or for a short backoff timer,
// whichever comes first, and tries again; the timer covers the one race where the drain's
// command was processed by our own ZMQ_EVENTS call. Retries are bounded by that backoff and
// by real activity on the socket, never a spin.
//
// Sends from other threads (shared_sends): every zmq call is then made under the state's
// mutex, and an operation holds it from its attempt until it is marked parked. Another
// thread's send therefore sees either an attempt still to come (which finds whatever that send
// let through) or a parked operation; rule 3 then applies to it as to the owner, except that
// the wake-up is posted to the owner's executor, the only thread that touches the descriptor.

namespace snapflow::transport {

namespace {

using namespace std::chrono_literals;

constexpr std::chrono::milliseconds first_retry_delay = 1ms;
constexpr std::chrono::milliseconds max_retry_delay = 100ms;
// EINTR from a dontwait call: try again at once, but not forever.
constexpr int max_interrupted_retries = 16;

class socket_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "snapflow.async_socket"; }
  std::string message(int value) const override {
    switch (static_cast<socket_errc>(value)) {
      case socket_errc::multipart_message:
        return "peer sent a multipart message; snapflow messages are one frame";
    }
    return "unknown async_socket error";
  }
};

class zmq_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "zmq"; }
  std::string message(int value) const override { return zmq_strerror(value); }
};

// ZeroMQ reports POSIX errno values plus a few of its own above ZMQ_HAUSNUMERO; the POSIX ones
// go to generic_category so callers can compare with std::errc.
std::error_code zmq_error(int value) {
  if (value < ZMQ_HAUSNUMERO) return {value, std::generic_category()};
  return {value, zmq_category()};
}

[[maybe_unused]] bool is_supported(zmq::socket_type type) {
  return type == zmq::socket_type::router || type == zmq::socket_type::dealer ||
         type == zmq::socket_type::pair || type == zmq::socket_type::push ||
         type == zmq::socket_type::pull;
}

// The outcome of one dontwait attempt.
struct attempt_result {
  bool done = false;       // false: EAGAIN, wait and try again
  std::error_code error;   // when done
  bool committed = false;  // part of a multipart message is out: the rest must follow
  // ZeroMQ processed every pending command right before it said EAGAIN (a dontwait receive
  // does), so the refusal is current and waiting needs no ZMQ_EVENTS of its own.
  bool drained = false;
};

attempt_result would_block(bool committed = false, bool drained = false) {
  return {false, {}, committed, drained};
}
attempt_result finished(std::error_code error = {}) { return {true, error, false, false}; }

}  // namespace

const std::error_category& socket_category() {
  static const socket_category_impl category;
  return category;
}

const std::error_category& zmq_category() {
  static const zmq_category_impl category;
  return category;
}

std::error_code make_error_code(socket_errc code) {
  return {static_cast<int>(code), socket_category()};
}

namespace detail {

// One direction of the socket: the coroutine currently receiving, or the one sending.
struct waiter {
  short want = 0;       // ZMQ_POLLIN or ZMQ_POLLOUT
  bool busy = false;    // an operation is in flight
  bool parked = false;  // it waits on the descriptor
};

struct async_socket_state : std::enable_shared_from_this<async_socket_state> {
  async_socket_state(const asio::any_io_executor& executor, zmq::context_t& context,
                     zmq::socket_type t, const socket_options& options)
      : socket(context, t), descriptor(executor), retry_timer(executor), type(t) {
    assert(is_supported(t));
    assert(options.max_frame_bytes > 0);
    assert(options.max_frame_bytes <=
           static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()));
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::maxmsgsize,
               static_cast<std::int64_t>(frame_ceiling_bytes(options.max_frame_bytes)));
    socket.set(zmq::sockopt::sndhwm, options.send_hwm);
    socket.set(zmq::sockopt::rcvhwm, options.receive_hwm);
    if (!options.routing_id.empty()) socket.set(zmq::sockopt::routing_id, options.routing_id);
    read_user_id = options.read_user_id;
    read_source_fd = options.read_source_fd;
    shared = options.shared_sends;
    if (t == zmq::socket_type::router) {
      // Unknown peer: an error instead of a silent drop; full peer: EAGAIN instead of a drop.
      socket.set(zmq::sockopt::router_mandatory, true);
      socket.set(zmq::sockopt::router_handover, options.router_handover);
    }
    if (options.zmtp_heartbeat_interval_ms > 0) {
      socket.set(zmq::sockopt::heartbeat_ivl, options.zmtp_heartbeat_interval_ms);
      socket.set(zmq::sockopt::heartbeat_timeout, options.zmtp_heartbeat_timeout_ms);
    }
    if (options.reconnect_interval_max_ms > 0)
      socket.set(zmq::sockopt::reconnect_ivl_max, options.reconnect_interval_max_ms);
    descriptor.assign(socket.get(zmq::sockopt::fd));
  }

  ~async_socket_state() { close(); }

  // Held around every zmq call (and the waiters' flags) when other threads may send.
  std::unique_lock<std::mutex> lock_if_shared() {
    return shared ? std::unique_lock<std::mutex>(mutex) : std::unique_lock<std::mutex>();
  }

  // Runs (posts) what waits for the reader to have read everything readable: called when the
  // reader parks, after an attempt found nothing left, and when the socket closes.
  void run_drain_waiters() {
    if (drain_waiters.empty()) return;
    auto waiters = std::move(drain_waiters);
    drain_waiters.clear();
    for (auto& w : waiters) asio::post(descriptor.get_executor(), std::move(w));
  }

  void close() {
    auto lock = lock_if_shared();
    if (!open) return;
    open = false;
    run_drain_waiters();
    retry_timer.cancel();
    // The descriptor belongs to ZeroMQ: hand it back instead of letting Asio close it.
    // release() also ends the pending waits with operation_aborted.
    descriptor.release();
    socket.close();
  }

  // ZMQ_EVENTS; processes every pending command as a side effect (rule 2).
  std::error_code poll_events(int& events) {
    for (int i = 0; i < max_interrupted_retries; ++i) {
      std::size_t size = sizeof events;
      if (zmq_getsockopt(socket.handle(), ZMQ_EVENTS, &events, &size) == 0) return {};
      if (zmq_errno() != EINTR) return zmq_error(zmq_errno());
    }
    return zmq_error(EINTR);
  }

  // Rule 3, given fresh ZMQ_EVENTS: wake each parked direction that can proceed. Cancelling
  // the descriptor reaches only parked ones; whoever is running has no wait outstanding.
  void wake_ready(int events) {
    if ((reader.parked && (events & reader.want)) || (writer.parked && (events & writer.want)))
      descriptor.cancel();
  }

  waiter& other_than(const waiter& w) { return &w == &reader ? writer : reader; }

  // Rule 3 from a thread other than the owner (under the mutex): the owner's executor does the
  // waking, since only it may touch the descriptor.
  void recheck_parked_from_other_thread() {
    if (!open || (!reader.parked && !writer.parked)) return;
    int events = 0;
    if (poll_events(events)) return;
    if ((reader.parked && (events & reader.want)) || (writer.parked && (events & writer.want)))
      asio::post(descriptor.get_executor(), [weak = weak_from_this()] {
        if (auto self = weak.lock(); self && self->open) self->descriptor.cancel();
      });
  }

  // Rule 3 after any zmq call that may have processed commands.
  void recheck_parked() {
    if (!open || (!reader.parked && !writer.parked)) return;
    int events = 0;
    if (poll_events(events)) return;  // the next operation will report it
    wake_ready(events);
  }

  void arm_retry_timer() {
    retry_timer.expires_after(retry_delay);
    retry_delay = std::min(retry_delay * 2, max_retry_delay);
    retry_timer.async_wait([weak = weak_from_this()](const asio::error_code& error) {
      if (error) return;
      if (auto self = weak.lock(); self && self->open) self->descriptor.cancel();
    });
  }

  zmq::socket_t socket;
  asio::posix::stream_descriptor descriptor;
  asio::steady_timer retry_timer;
  zmq::socket_type type;
  bool read_user_id = false;
  bool read_source_fd = false;
  bool shared = false;
  std::mutex mutex;  // used only when shared
  bool open = true;
  waiter reader{ZMQ_POLLIN};
  waiter writer{ZMQ_POLLOUT};
  std::vector<std::function<void()>> drain_waiters;  // async_socket::after_drain
  std::uint64_t send_waits = 0;
  std::chrono::milliseconds retry_delay = first_retry_delay;
};

}  // namespace detail

namespace {

using detail::waiter;
using state_ptr = std::shared_ptr<detail::async_socket_state>;

// Marks a direction busy for the length of one operation, even if the coroutine is destroyed
// while suspended.
class busy_guard {
 public:
  busy_guard(detail::async_socket_state& s, waiter& w) : s_(s), w_(w) {
    auto lock = s_.lock_if_shared();
    assert(!w_.busy && "one receive and one send at a time per socket");
    w_.busy = true;
  }
  ~busy_guard() {
    auto lock = s_.lock_if_shared();
    w_.busy = false;
    w_.parked = false;
  }
  busy_guard(const busy_guard&) = delete;
  busy_guard& operator=(const busy_guard&) = delete;

 private:
  detail::async_socket_state& s_;
  waiter& w_;
};

// One pass of drive() up to its wait, made under the socket's mutex when it is shared.
struct drive_step {
  enum { done, again, park } what = done;
  std::error_code error;      // done
  bool ready = false;         // park: ZMQ_EVENTS said ready yet the attempt was refused
  bool committed = false;     // park: part of a multipart message is out
};

template <typename Attempt>
drive_step attempt_or_park(detail::async_socket_state& s, waiter& self, Attempt& attempt,
                           bool& retried_while_ready, bool& counted_wait) {
  auto lock = s.lock_if_shared();
  if (!s.open) return {drive_step::done, asio::error::operation_aborted};
  const attempt_result result = attempt();
  if (result.done) {
    s.recheck_parked();
    if (&self == &s.writer) s.retry_delay = first_retry_delay;
    return {drive_step::done, result.error};
  }
  // Rule 2, unless the attempt itself ended with a full drain and nobody else needs rule 3.
  bool ready = false;
  if (!result.drained || s.other_than(self).parked) {
    int events = 0;
    if (auto error = s.poll_events(events)) return {drive_step::done, error};
    s.wake_ready(events);
    ready = (events & self.want) != 0;
    if (ready && !retried_while_ready) {
      retried_while_ready = true;
      return {drive_step::again};
    }
  }
  // Either not ready (the next command will make a fresh edge), or ready yet refused (a full
  // ROUTER peer): then a timer bounds the wait as well.
  if (ready) s.arm_retry_timer();
  if (&self == &s.writer && !counted_wait) {
    ++s.send_waits;
    counted_wait = true;
  }
  self.parked = true;
  return {drive_step::park, {}, ready, result.committed};
}

// Runs `attempt` until it is done, waiting on the descriptor in between by the rules above.
template <typename Attempt>
asio::awaitable<std::error_code> drive(state_ptr s, waiter& self, Attempt attempt) {
  bool retried_while_ready = false;
  bool counted_wait = false;
  for (;;) {
    const drive_step step =
        attempt_or_park(*s, self, attempt, retried_while_ready, counted_wait);
    if (step.what == drive_step::done) co_return step.error;
    if (step.what == drive_step::again) continue;
    if (&self == &s->reader) s->run_drain_waiters();
    asio::error_code wait_error;
    co_await s->descriptor.async_wait(asio::posix::descriptor_base::wait_read,
                                      asio::redirect_error(asio::use_awaitable, wait_error));
    {
      auto lock = s->lock_if_shared();
      self.parked = false;
    }
    retried_while_ready = false;
    if (step.ready) s->retry_timer.cancel();
    if (!s->open) co_return asio::error::operation_aborted;
    if (wait_error == asio::error::operation_aborted) {
      // The other direction or the retry timer woke us, or our caller gave up. A half-sent
      // multipart message cannot be abandoned, so only an uncommitted operation may stop here.
      if (!step.committed) {
        asio::cancellation_state cancel = co_await asio::this_coro::cancellation_state;
        if (cancel.cancelled() != asio::cancellation_type::none)
          co_return asio::error::operation_aborted;
      }
      continue;
    }
    if (wait_error) co_return wait_error;
  }
}

// Receives one part with dontwait. EAGAIN (and EINTR) mean "wait".
int receive_part(zmq::socket_t& socket, zmq::message_t& part) {
  return zmq_msg_recv(part.handle(), socket.handle(), ZMQ_DONTWAIT);
}

bool would_block_errno(int e) { return e == EAGAIN || e == EINTR; }

// The rest of a message whose first payload frame said "more": ZeroMQ delivers messages
// whole, so the parts are all there.
void discard_remaining_parts(zmq::socket_t& socket, zmq::message_t& last) {
  while (last.more()) {
    if (receive_part(socket, last) < 0) return;
  }
}

// One try at receiving a whole message into `out`: its routing id (ROUTER), payload and user
// id. Assigning keeps the strings' room, so a caller that receives into the same frame every
// time allocates nothing per message.
attempt_result receive_attempt(detail::async_socket_state& s, received_frame& out) {
  zmq::socket_t& socket = s.socket;
  zmq::message_t first;
  if (receive_part(socket, first) < 0) {
    // EAGAIN from a dontwait receive comes after a full command drain; EINTR does not.
    if (zmq_errno() == EAGAIN) return would_block(false, true);
    if (zmq_errno() == EINTR) return would_block();
    return finished(zmq_error(zmq_errno()));
  }
  zmq::message_t payload;
  if (s.type == zmq::socket_type::router) {
    out.routing_id.assign(static_cast<const char*>(first.data()), first.size());
    if (!first.more()) return finished(make_error_code(socket_errc::multipart_message));
    if (receive_part(socket, payload) < 0) return finished(zmq_error(zmq_errno()));
  } else {
    payload = std::move(first);
  }
  if (payload.more()) {
    discard_remaining_parts(socket, payload);
    return finished(make_error_code(socket_errc::multipart_message));
  }
  out.payload.assign(static_cast<const char*>(payload.data()), payload.size());
  if (s.read_user_id) {
    // Metadata is per connection and travels with every message; absent without ZAP.
    const char* user_id = zmq_msg_gets(payload.handle(), "User-Id");
    if (user_id != nullptr) out.user_id = user_id;
  }
  if (s.read_source_fd) out.source_fd = zmq_msg_get(payload.handle(), ZMQ_SRCFD);
  return finished();
}

asio::awaitable<received_frame> receive_on(state_ptr s) {
  busy_guard busy(*s, s->reader);
  received_frame out;
  out.error = co_await drive(s, s->reader, [&] { return receive_attempt(*s, out); });
  co_return out;
}

asio::awaitable<void> receive_into(state_ptr s, received_frame& out) {
  busy_guard busy(*s, s->reader);
  out.routing_id.clear();
  out.payload.clear();
  out.user_id.clear();
  out.error = co_await drive(s, s->reader, [&] { return receive_attempt(*s, out); });
}

asio::awaitable<std::error_code> send_on(state_ptr s, std::string routing_id,
                                         std::string payload) {
  busy_guard busy(*s, s->writer);
  const bool routed = s->type == zmq::socket_type::router;
  zmq::message_t id_frame(routing_id.data(), routing_id.size());
  zmq::message_t payload_frame(payload.data(), payload.size());
  bool id_sent = !routed;
  auto attempt = [&]() -> attempt_result {
    zmq::socket_t& socket = s->socket;
    if (!id_sent) {
      if (zmq_msg_send(id_frame.handle(), socket.handle(), ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0) {
        if (would_block_errno(zmq_errno())) return would_block();
        return finished(zmq_error(zmq_errno()));
      }
      id_sent = true;
    }
    if (zmq_msg_send(payload_frame.handle(), socket.handle(), ZMQ_DONTWAIT) < 0) {
      if (would_block_errno(zmq_errno())) return would_block(routed);
      return finished(zmq_error(zmq_errno()));
    }
    return finished();
  };
  co_return co_await drive(s, s->writer, attempt);
}

// async_socket::receive_each: drive()'s loop with plain completion handlers in place of
// coroutines. The same rules hold: attempt_or_park tries first, drains or reads ZMQ_EVENTS
// before a wait (rules 1 and 2) and wakes the parked send after a receive (rule 3).
class receive_loop : public std::enable_shared_from_this<receive_loop> {
 public:
  receive_loop(state_ptr s, async_socket::frame_handler on_frame,
               async_socket::end_handler on_end, int frames_per_turn)
      : s_(std::move(s)), on_frame_(std::move(on_frame)), on_end_(std::move(on_end)),
        frames_per_turn_(std::max(frames_per_turn, 1)) {}

  // A loop that never finished (its pending wait destroyed with the io_context, or left by an
  // exception from on_frame) gives the socket's receive side back.
  ~receive_loop() {
    if (!finished_) release();
  }

  void start() {
    {
      auto lock = s_->lock_if_shared();
      assert(!s_->reader.busy && "one receive at a time per socket");
      s_->reader.busy = true;
    }
    run();
  }

 private:
  // Reads until the socket would block (then parks) or the turn is used up (then posts).
  void run() {
    for (int frames = 0;;) {
      frame_.routing_id.clear();
      frame_.payload.clear();
      frame_.user_id.clear();
      auto attempt = [this] { return receive_attempt(*s_, frame_); };
      const drive_step step =
          attempt_or_park(*s_, s_->reader, attempt, retried_while_ready_, counted_wait_);
      if (step.what == drive_step::again) continue;
      if (step.what == drive_step::park) {
        s_->run_drain_waiters();
        s_->descriptor.async_wait(
            asio::posix::descriptor_base::wait_read,
            [self = shared_from_this(), ready = step.ready](const asio::error_code& error) {
              self->woken(error, ready);
            });
        return;
      }
      retried_while_ready_ = false;
      if (step.error && step.error != socket_errc::multipart_message) return finish(step.error);
      frame_.error = step.error;
      try {
        on_frame_(frame_);
      } catch (...) {
        // Reading ends, without on_end: the exception is the caller's news, and leaves the
        // executor's run() as any handler's does.
        finished_ = true;
        release();
        on_frame_ = nullptr;
        on_end_ = nullptr;
        throw;
      }
      if (!s_->open) return finish(asio::error::operation_aborted);
      if (++frames == frames_per_turn_) {
        asio::post(s_->descriptor.get_executor(), [self = shared_from_this()] { self->run(); });
        return;
      }
    }
  }

  void woken(const asio::error_code& error, bool armed_retry_timer) {
    {
      auto lock = s_->lock_if_shared();
      s_->reader.parked = false;
    }
    retried_while_ready_ = false;
    if (armed_retry_timer) s_->retry_timer.cancel();
    if (!s_->open) return finish(asio::error::operation_aborted);
    // operation_aborted while open: the send side, another thread or the retry timer woke us.
    if (error && error != asio::error::operation_aborted) return finish(error);
    run();
  }

  void release() {
    auto lock = s_->lock_if_shared();
    s_->reader.busy = false;
    s_->reader.parked = false;
  }

  void finish(std::error_code why) {
    finished_ = true;
    release();
    on_frame_ = nullptr;  // what it holds may hold this socket
    auto on_end = std::move(on_end_);
    on_end_ = nullptr;
    if (on_end) on_end(why);
  }

  state_ptr s_;
  async_socket::frame_handler on_frame_;
  async_socket::end_handler on_end_;
  const int frames_per_turn_;
  received_frame frame_;
  bool retried_while_ready_ = false;
  bool counted_wait_ = false;  // counts send waits only; attempt_or_park wants it
  bool finished_ = false;
};

// One dontwait attempt, no waiting. A ROUTER refuses a full peer at its routing id frame
// (ZMQ_ROUTER_MANDATORY), before anything is committed; once that frame is taken the payload
// frame is too.
std::error_code try_send_on(detail::async_socket_state& s, std::string_view routing_id,
                            std::string_view payload, bool routed) {
  auto lock = s.lock_if_shared();
  assert(!s.writer.busy && "try_send while a send is in flight");
  if (!s.open) return asio::error::operation_aborted;
  std::error_code result;
  if (routed) {
    zmq::message_t id_frame(routing_id.data(), routing_id.size());
    if (zmq_msg_send(id_frame.handle(), s.socket.handle(), ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0) {
      const int e = zmq_errno();
      s.recheck_parked();  // rule 3: the call may have processed commands
      return would_block_errno(e) ? std::make_error_code(std::errc::resource_unavailable_try_again)
                                  : zmq_error(e);
    }
  }
  zmq::message_t payload_frame(payload.data(), payload.size());
  if (zmq_msg_send(payload_frame.handle(), s.socket.handle(), ZMQ_DONTWAIT) < 0) {
    const int e = zmq_errno();
    result = would_block_errno(e) && !routed
                 ? std::make_error_code(std::errc::resource_unavailable_try_again)
                 : zmq_error(e);
  }
  s.recheck_parked();
  return result;
}

}  // namespace

async_socket::async_socket(const asio::any_io_executor& executor, zmq::context_t& context,
                       zmq::socket_type type, const socket_options& options)
    : state_(std::make_shared<detail::async_socket_state>(executor, context, type, options)) {}

async_socket::~async_socket() { close(); }

async_socket& async_socket::operator=(async_socket&& other) noexcept {
  if (this != &other) {
    close();
    state_ = std::move(other.state_);
  }
  return *this;
}

std::error_code async_socket::bind(const std::string& endpoint) {
  assert(state_ && state_->open);
  // bind and connect process pending commands too (rule 3).
  auto lock = state_->lock_if_shared();
  const int rc = zmq_bind(state_->socket.handle(), endpoint.c_str());
  const int error = zmq_errno();
  state_->recheck_parked();
  return rc == 0 ? std::error_code() : zmq_error(error);
}

std::error_code async_socket::connect(const std::string& endpoint) {
  assert(state_ && state_->open);
  auto lock = state_->lock_if_shared();
  const int rc = zmq_connect(state_->socket.handle(), endpoint.c_str());
  const int error = zmq_errno();
  state_->recheck_parked();
  return rc == 0 ? std::error_code() : zmq_error(error);
}

std::string async_socket::last_endpoint() const {
  assert(state_ && state_->open);
  auto lock = state_->lock_if_shared();
  return state_->socket.get(zmq::sockopt::last_endpoint);
}

asio::awaitable<received_frame> async_socket::receive() {
  assert(state_);
  return receive_on(state_);
}

asio::awaitable<void> async_socket::receive(received_frame& into) {
  assert(state_);
  return receive_into(state_, into);
}

void async_socket::after_drain(std::function<void()> then) {
  assert(state_);
  detail::async_socket_state& s = *state_;
  if (!s.open || !s.reader.busy) {
    asio::post(s.descriptor.get_executor(), std::move(then));
    return;
  }
  s.drain_waiters.push_back(std::move(then));
  // A parked reader tries again, and parks again (running the waiters) once nothing is left; a
  // reader that is running or posted reaches its next park by itself.
  if (s.reader.parked) s.descriptor.cancel();
}

void async_socket::receive_each(frame_handler on_frame, end_handler on_end,
                                int frames_per_turn) {
  assert(state_);
  assert(on_frame);
  std::make_shared<receive_loop>(state_, std::move(on_frame), std::move(on_end),
                                 frames_per_turn)
      ->start();
}

asio::awaitable<std::error_code> async_socket::send(std::string payload) {
  assert(state_);
  assert(state_->type != zmq::socket_type::router && "a ROUTER send needs a routing id");
  assert(state_->type != zmq::socket_type::pull);
  return send_on(state_, std::string(), std::move(payload));
}

asio::awaitable<std::error_code> async_socket::send(std::string routing_id, std::string payload) {
  assert(state_);
  assert(state_->type == zmq::socket_type::router);
  return send_on(state_, std::move(routing_id), std::move(payload));
}

std::error_code async_socket::try_send(std::string_view payload) {
  assert(state_);
  assert(state_->type != zmq::socket_type::router && "a ROUTER send needs a routing id");
  assert(state_->type != zmq::socket_type::pull);
  return try_send_on(*state_, {}, payload, false);
}

std::error_code async_socket::try_send(std::string_view routing_id, std::string_view payload) {
  assert(state_);
  assert(state_->type == zmq::socket_type::router);
  return try_send_on(*state_, routing_id, payload, true);
}

std::error_code async_socket::try_send_from_any_thread(std::string_view payload) {
  assert(state_);
  detail::async_socket_state& s = *state_;
  assert(s.shared && "the socket was not made with shared_sends");
  assert(s.type != zmq::socket_type::router && s.type != zmq::socket_type::pull);
  std::lock_guard lock(s.mutex);
  if (!s.open) return asio::error::operation_aborted;
  // A send() in flight has its frame still to go: this one must not overtake it.
  if (s.writer.busy) return std::make_error_code(std::errc::resource_unavailable_try_again);
  zmq::message_t frame(payload.data(), payload.size());
  std::error_code result;
  if (zmq_msg_send(frame.handle(), s.socket.handle(), ZMQ_DONTWAIT) < 0) {
    const int e = zmq_errno();
    result = would_block_errno(e) ? std::make_error_code(std::errc::resource_unavailable_try_again)
                                  : zmq_error(e);
  }
  s.recheck_parked_from_other_thread();
  return result;
}

void async_socket::close() {
  if (state_) state_->close();
}

bool async_socket::is_open() const { return state_ && state_->open; }

zmq::socket_type async_socket::type() const {
  assert(state_);
  return state_->type;
}

std::uint64_t async_socket::send_waits() const {
  assert(state_);
  return state_->send_waits;
}

zmq::socket_ref async_socket::native_handle() {
  assert(state_ && state_->open);
  return state_->socket;
}

}  // namespace snapflow::transport
