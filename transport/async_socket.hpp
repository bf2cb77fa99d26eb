#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <zmq.hpp>

#include "transport/frame_limits.hpp"

namespace snapflow::transport {

namespace detail {
struct async_socket_state;
}

struct socket_options {
  // The frame size limit the caller enforces. ZeroMQ delivers inbound frames up to
  // frame_ceiling_bytes(max_frame_bytes) so the caller can count and refuse them; beyond that
  // ZeroMQ drops the connection that sent one (ZMQ_MAXMSGSIZE) and the frame never arrives.
  std::size_t max_frame_bytes = default_max_frame_bytes;
  int send_hwm = 1000;     // messages queued per peer before sends wait
  int receive_hwm = 1000;  // messages queued per peer before the peer's sends wait
  // DEALER: the routing id the ROUTER sees (snapflow: the worker id). Empty lets ZeroMQ pick.
  std::string routing_id;
  // Fill received_frame::user_id from each message's "User-Id" metadata (what the ZAP
  // handler said about the connection, e.g. the client's CURVE public key).
  bool read_user_id = false;
  // Fill received_frame::source_fd with the descriptor of the connection each message came on
  // (its "__fd" metadata, ZeroMQ's deprecated ZMQ_SRCFD), so a closed connection reported by
  // a connection_monitor can be matched to its peer.
  bool read_source_fd = false;
  // Allows try_send_from_any_thread(): every ZeroMQ call on the socket is then made under a
  // mutex, which the owner thread's own operations take too (uncontended, a few nanoseconds).
  bool shared_sends = false;
  // ZMTP heartbeats (ZMQ_HEARTBEAT_IVL / _TIMEOUT), 0: none. A connection whose peer stops
  // answering them is closed, which on a ROUTER frees the peer's routing id for its next
  // connection (see router_handover).
  int zmtp_heartbeat_interval_ms = 0;
  int zmtp_heartbeat_timeout_ms = 0;
  // Connecting sockets: the longest pause between ZeroMQ's own reconnection attempts
  // (ZMQ_RECONNECT_IVL_MAX; they start at 100 ms and double). 0: ZeroMQ's default, no growth.
  int reconnect_interval_max_ms = 0;
  // ROUTER: whether a new connection presenting a routing id that a live connection holds
  // takes it over (ZMQ_ROUTER_HANDOVER). Off, it cannot: whoever knows a worker's id cannot
  // cut the worker off by connecting under it; a restarted worker gets its id once the old
  // connection is closed (by the kernel when its process died, else by the ZMTP heartbeat).
  bool router_handover = false;
};

// Faults of the adapter itself; ZeroMQ's own errors come as std::generic_category (POSIX
// errno values) or zmq_category() (ZeroMQ-only values such as ETERM).
enum class socket_errc {
  multipart_message = 1,  // the peer sent more than one payload frame; the message was dropped
};

const std::error_category& socket_category();
const std::error_category& zmq_category();
std::error_code make_error_code(socket_errc code);

struct received_frame {
  std::error_code error;
  std::string routing_id;  // ROUTER only: who sent it, the id to answer to
  std::string payload;
  // With socket_options::read_user_id: the connection's ZAP user id (empty when none).
  std::string user_id;
  // With socket_options::read_source_fd: the connection's file descriptor (-1 when unknown).
  int source_fd = -1;
};

// Lets a C++20 coroutine co_await one message on a ZeroMQ socket without blocking its thread
// and without missing a wake-up (ZMQ_FD is edge-triggered: see async_socket.cpp for the rules).
//
// Supports ROUTER, DEALER, PAIR, PUSH and PULL; each snapflow message is one payload frame
// (ROUTER adds the peer's routing id in front). A socket belongs to one thread: create it and
// call everything on it from the thread that runs `executor` (the one exception:
// try_send_from_any_thread on a socket made with shared_sends). At most one receive and one send
// may be in flight at a time (a second is a programmer error and asserts); a reader loop and a
// writer loop may run concurrently.
//
// Operations report failures as values: closing the socket or cancelling the awaiting
// coroutine (e.g. asio::experimental::awaitable_operators ||) ends a pending operation with
// asio::error::operation_aborted; a ROUTER send to a peer that is not connected fails with
// std::errc::host_unreachable. A send to a peer whose queue is full (the high-water mark)
// waits until the peer drains it; on a ROUTER that holds up later sends to every peer, so a
// caller that must not wait on a slow peer races the send with a timer and gives up.
//
// Destroying the socket closes it. Pending operations may still resume afterwards (they keep
// the internals alive) and then see operation_aborted. The zmq::context_t must outlive it.
class async_socket {
 public:
  async_socket(const asio::any_io_executor& executor, zmq::context_t& context,
               zmq::socket_type type, const socket_options& options = {});
  ~async_socket();
  async_socket(async_socket&&) noexcept = default;
  async_socket& operator=(async_socket&&) noexcept;
  async_socket(const async_socket&) = delete;
  async_socket& operator=(const async_socket&) = delete;

  std::error_code bind(const std::string& endpoint);
  std::error_code connect(const std::string& endpoint);
  // What bind resolved, e.g. the port chosen for "tcp://127.0.0.1:*".
  std::string last_endpoint() const;

  // The next message. For ROUTER, `routing_id` says who sent it.
  asio::awaitable<received_frame> receive();
  // The same into `into` (every field replaced), reusing its strings' room: a reader that
  // keeps one frame for its whole life allocates nothing per message. `into` must outlive
  // the wait.
  asio::awaitable<void> receive(received_frame& into);
  // Reads every message as it comes, without a coroutine per message: `on_frame` runs on the
  // owner thread for each one, in order, with a frame valid for the length of the call (its
  // strings keep their room from one message to the next). A multipart message arrives as a
  // frame whose `error` is socket_errc::multipart_message, and reading goes on. Reading ends
  // when the socket is closed (also from inside `on_frame`) or a receive fails: `on_end` then
  // runs once, with operation_aborted after close(). After `frames_per_turn` messages in a row
  // it lets the executor run its other work before it goes on. For as long as it reads it is
  // the socket's one receive in flight. Call it on the owner thread. An exception from
  // `on_frame` ends reading without `on_end` and leaves the executor's run() as any handler's
  // does; a caller that must read on catches inside `on_frame`.
  //
  // What a reader loop of co_await receive() costs in coroutine frames and resumptions per
  // message, this does not (docs/benchmarks.md, "Control plane": 2-3 us of CPU per
  // message on a busy 2-vCPU machine, as much as the endpoints' own work).
  using frame_handler = std::function<void(received_frame&)>;
  using end_handler = std::function<void(std::error_code)>;
  void receive_each(frame_handler on_frame, end_handler on_end, int frames_per_turn = 64);
  // Runs `then` (posted to the owner's executor) once the reader has read every message that
  // was readable when this was called: at its next park after an attempt that found nothing
  // left, or when the socket closes. Without a receive in flight it runs at once. For acting on
  // news from outside the socket (a connection monitor's "closed") only after the messages that
  // connection delivered before it closed. Call it on the owner thread.
  void after_drain(std::function<void()> then);

  // DEALER, PAIR, PUSH: one payload frame.
  asio::awaitable<std::error_code> send(std::string payload);
  // ROUTER: one payload frame to the peer with `routing_id`.
  asio::awaitable<std::error_code> send(std::string routing_id, std::string payload);

  // Sends now if ZeroMQ takes the frame without waiting, else sends nothing and returns
  // std::errc::resource_unavailable_try_again (a full queue, or a DEALER not connected yet);
  // other failures as send() reports them. For writers that keep their own queue and only
  // need a coroutine when the socket pushes back. Only while no send() is in flight.
  std::error_code try_send(std::string_view payload);
  std::error_code try_send(std::string_view routing_id, std::string_view payload);
  // try_send for DEALER, PAIR and PUSH sockets made with socket_options::shared_sends, from any
  // thread, while the owner thread runs its own operations. Refuses (try again) while a send()
  // is in flight, so it never overtakes one. A zmq call may eat the descriptor edge a parked
  // operation waits for (rule 3), so afterwards it posts a wake-up to the owner's executor
  // when a parked operation can proceed.
  std::error_code try_send_from_any_thread(std::string_view payload);

  // Ends pending operations with operation_aborted and closes the ZeroMQ socket (linger 0:
  // unsent messages are dropped). Idempotent.
  void close();
  bool is_open() const;

  zmq::socket_type type() const;
  // How many times a send had to wait for a full peer queue to drain (backpressure seen).
  std::uint64_t send_waits() const;
  // For setting options the adapter does not cover (before bind/connect). Never send or
  // receive through it: that would bypass the wake-up bookkeeping.
  zmq::socket_ref native_handle();

 private:
  // Shared with the coroutines of pending operations, so they can resume safely after the
  // socket object is gone.
  std::shared_ptr<detail::async_socket_state> state_;
};

}  // namespace snapflow::transport

template <>
struct std::is_error_code_enum<snapflow::transport::socket_errc> : std::true_type {};
