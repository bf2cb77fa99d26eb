#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <zmq.hpp>

#include "engine/runtime/task_executor.hpp"
#include "transport/async_socket.hpp"
#include "transport/curve_keys.hpp"
#include "transport/frame_limits.hpp"
#include "transport/connection_monitor.hpp"
#include "transport/messages.hpp"
#include "transport/peer_rate_limiter.hpp"

namespace snapflow::transport {

struct worker_endpoint_options {
  std::string coordinator_address = "tcp://127.0.0.1:6123";
  std::string worker_id;  // also the DEALER's routing id
  std::uint32_t slots = 1;
  // Until the coordinator's register_ack names its own: how often to retry registering, and
  // how long to wait for any answer before starting over on a fresh connection.
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::size_t max_frame_bytes = default_max_frame_bytes;
  // Frames waiting to go to the coordinator (task reports, heartbeats); beyond it task reports
  // are dropped and counted (a lost ack ends as a checkpoint timeout, protocol 5.4).
  std::size_t max_queued_frames = 65536;
  // What register_worker claims. Only tests set another value, to see it refused.
  std::uint32_t protocol_version = wire::current_protocol_version;
  std::optional<curve_client_config> curve;
  std::chrono::milliseconds bad_input_log_interval{10000};
  // Sent in register_worker: the folders this worker's tasks may name files under (its
  // --data-root), so the coordinator can refuse a job that names others at submission.
  std::vector<std::string> data_roots;
  // Sent in register_worker: the user programs whose callables this worker holds, so the
  // coordinator deploys a program's jobs to it (and no other program's).
  std::vector<wire::worker_program> programs;
  // A handshake ZeroMQ does not retry by itself (a protocol error, a ZAP denial) is retried on
  // a fresh connection after a pause that starts here and doubles up to the maximum.
  std::chrono::milliseconds handshake_retry_min{100};
  std::chrono::milliseconds handshake_retry_max{2000};
};

struct worker_endpoint_counters {
  std::uint64_t frames_received = 0;
  std::uint64_t bad_frames = 0;
  std::uint64_t ignored_messages = 0;  // valid but not for now (before registering, wrong way)
  std::uint64_t frames_sent = 0;  // every frame, those sent by task threads included
  // Acknowledgements a task thread put on the socket itself (part of frames_sent).
  std::uint64_t direct_acks = 0;
  std::uint64_t dropped_task_reports = 0;  // while not registered, or the queue was full
  std::uint64_t registrations = 0;
  std::uint64_t reconnects = 0;
  std::uint64_t handshake_failures = 0;
};

// The worker's end of the control plane (docs/protocol.md): one DEALER socket whose routing id
// is the worker id, connected to the coordinator. It registers (again after a reconnect, or
// when the coordinator answers not_registered), heartbeats, hands deploy / cancel / trigger /
// notify messages to its task_executor, and carries what the tasks report back through
// listener(). When the coordinator is silent past the heartbeat timeout it cancels every task
// and starts over on a fresh connection, for as long as it runs.
//
// Everything runs on one executor (the worker's control thread) except the listener, which
// tasks call from their own threads: it queues under a mutex and posts to the executor. The one
// shortcut: an acknowledgement made on a task thread while nothing is queued or being sent
// ahead of it goes onto the socket from that thread (async_socket::try_send_from_any_thread),
// which saves the hand-off to the control thread on the checkpoint's critical path. The control
// thread opens and closes that path (update_direct_path), so reports keep their order.
class worker_endpoint : public std::enable_shared_from_this<worker_endpoint> {
 public:
  // Runs on the executor when the coordinator refuses this worker for good (a refused
  // register_ack: unsupported protocol version, bad slot count, ...). The endpoint has stopped.
  using fatal_handler = std::function<void(const std::string& why)>;

  worker_endpoint(asio::any_io_executor executor, zmq::context_t& context,
                  worker_endpoint_options options);
  ~worker_endpoint();

  // For the task executor: thread-safe, never blocks, and holds the endpoint only weakly, so
  // an executor may keep it as long as it likes.
  std::shared_ptr<task_executor_listener> listener();
  // Must be set before start().
  void set_executor(std::shared_ptr<task_executor> executor);

  // Connects and starts registering. Errors are immediate ones only (a malformed address,
  // CURVE missing); an unreachable coordinator is retried for ever.
  std::error_code start(fatal_handler on_fatal);
  // Closes the connection; the coroutines end. Does not touch the tasks. Idempotent.
  void stop();

  bool registered() const { return registered_; }
  worker_endpoint_counters counters() const;
  std::uint64_t dropped_task_reports() const;

 private:
  struct connection;
  struct task_report;
  class task_inbox;
  class listener_proxy;

  void start_reading(const std::shared_ptr<connection>& c);
  void start_over_after_fault(const std::shared_ptr<connection>& c);
  asio::awaitable<void> writer(std::shared_ptr<connection> c);
  asio::awaitable<void> ticker();

  std::error_code open_connection();
  void reconnect();
  void on_frame(std::string_view payload);
  void on_message(wire::message&& m);
  void on_trigger(const wire::trigger_checkpoint& m);
  void on_register_ack(const wire::register_ack& ack);
  void on_not_registered(const wire::not_registered& m);
  // Posted by the connection's handshake monitor (from its thread).
  void on_handshake_failed(const std::shared_ptr<connection>& c, const handshake_event& event);
  void drop_tasks(const std::string& why);
  void send_register();
  // Encode into scratch_frame_ and send it (queued as a copy when it cannot go at once).
  void send(const wire::message& m);
  void send(const wire::acknowledge_checkpoint& ack);
  void send_scratch_frame();
  void send_frame(std::string frame);
  // Onto the socket now when the writer is idle with nothing queued (true also when the frame
  // is dropped: no connection, or the socket failed); false when it must be queued.
  bool send_at_once(std::string_view frame);
  void queue_frame(std::string frame);
  void flush_task_reports();
  void deliver_task_report(task_report report);
  // An acknowledgement made on this thread that may go out at once (task_inbox::
  // owner_may_send_now), converted into kept_ack_ and sent.
  void send_ack_now(const checkpoint_ack& ack);
  // Sends `acks` (made in this order, ready together) as one batch frame, or as a single
  // acknowledge_checkpoint when there is one; empties it.
  void send_acks(std::vector<wire::acknowledge_checkpoint>& acks);
  // A heartbeat carrying the task executor's record counters.
  void send_heartbeat();
  // The socket task threads may send acknowledgements on now, or null: registered, connected,
  // and the writer idle with nothing queued (so a direct send overtakes nothing).
  async_socket* direct_path() const;
  void update_direct_path();
  void new_session();
  std::int64_t now_us() const;

  asio::any_io_executor executor_;
  zmq::context_t& context_;
  worker_endpoint_options options_;
  std::shared_ptr<task_executor> tasks_;
  std::shared_ptr<task_inbox> inbox_;
  // flush_task_reports' working room, kept between flushes: the reports' always, the acks'
  // while they go out one by one (a batch frame takes the vector with it).
  std::vector<task_report> taken_reports_;
  std::vector<wire::acknowledge_checkpoint> ack_batch_;
  std::string scratch_frame_;  // the frame being sent, its room kept between messages
  wire::trigger_checkpoint trigger_;  // the trigger being read, its room kept (see on_frame)
  wire::acknowledge_checkpoint kept_ack_;  // the acknowledgement send_ack_now sends
  fatal_handler on_fatal_;
  std::shared_ptr<connection> connection_;
  asio::steady_timer tick_timer_;
  asio::steady_timer handshake_retry_timer_;
  asio::steady_timer reconnect_timer_;
  std::chrono::milliseconds handshake_backoff_{0};
  bool running_ = false;
  bool registered_ = false;
  // The largest acknowledge_checkpoint_batch the coordinator reads (its register_ack said so);
  // 0: it is sent single acknowledgements.
  std::uint64_t coordinator_max_batch_bytes_ = 0;
  std::uint64_t session_ = 0;
  std::chrono::milliseconds interval_;
  std::chrono::milliseconds timeout_;
  std::int64_t last_heard_us_ = 0;
  peer_rate_limiter log_limiter_;
  worker_endpoint_counters counters_;
};

}  // namespace snapflow::transport
