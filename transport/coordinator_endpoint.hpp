#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <variant>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <zmq.hpp>

#include "engine/checkpoint/checkpoint_task_gateway.hpp"
#include "engine/deployment/task_deployment.hpp"
#include "transport/async_socket.hpp"
#include "transport/curve_keys.hpp"
#include "transport/decode_error.hpp"
#include "transport/frame_limits.hpp"
#include "transport/connection_monitor.hpp"
#include "transport/peer_connections.hpp"
#include "transport/messages.hpp"
#include "transport/outgoing_queues.hpp"
#include "transport/peer_rate_limiter.hpp"
#include "transport/worker_event_handler.hpp"

namespace snapflow::transport {

struct coordinator_endpoint_options {
  std::string bind_address = "tcp://127.0.0.1:6123";
  // Told to every worker in register_ack: how often it heartbeats, and the silence after
  // which either side gives the other up.
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  // A worker whose control connection closes is lost at once (a crashed process has its
  // sockets closed by the kernel). A connection whose peer stops answering ZMTP pings for this
  // long is closed (a host gone silent, a cable pulled), and so lost too; the heartbeat
  // timeout above stays the last resort. Pings go out every quarter of it. 0: no pings.
  std::chrono::milliseconds connection_timeout{400};
  std::size_t max_frame_bytes = default_max_frame_bytes;
  // Frames queued for one registered worker beyond what ZeroMQ buffers; a worker that lets
  // this many pile up is declared lost.
  std::size_t max_queued_frames_per_worker = 4096;
  // Frames ZeroMQ itself buffers per peer (ZMQ_SNDHWM) before a send to it has to wait.
  int socket_send_hwm = 1000;
  // Answers to peers that are not registered (refusals, not_registered): few per peer, few in
  // all, dropped beyond that.
  std::size_t max_queued_replies_per_stranger = 4;
  std::size_t max_queued_replies_to_strangers = 1024;
  // Bad input is logged at most once per peer per interval.
  std::chrono::milliseconds bad_input_log_interval{10000};
  // With a value, the socket requires CURVE; the ZAP handler (zap_handler) must be running in
  // the same ZeroMQ context before start().
  std::optional<curve_server_config> curve;
  // Give up the CPU once after a flush handed frames to ZeroMQ (a trigger's fan-out), so that
  // ZeroMQ's I/O thread puts them on the wire before this thread's next work. For when that
  // thread can only run on this one's CPU (snapflow-coordinator given one CPU, its I/O thread
  // under SCHED_BATCH): woken there, it would otherwise wait for this thread to block,
  // after the folder creation and whatever else the turn holds; on another CPU it runs at once
  // and the yield would only delay this thread.
  bool yield_after_send = false;
};

// What the endpoint counts. Every frame that arrives is in frames_received, then in at most
// one of bad_frames (undecodable), refused_messages (decoded but not acted on: an unknown
// sender, an attempt another worker owns, a message for the other direction, a refused
// registration) and stale_messages (about an attempt that is no longer current); except a
// batch frame, whose entries are counted there one by one (docs/protocol.md, 5.7).
struct coordinator_endpoint_counters {
  std::uint64_t frames_received = 0;
  std::uint64_t bad_frames = 0;
  std::uint64_t refused_messages = 0;
  std::uint64_t stale_messages = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t send_failures = 0;   // a worker not connected when its frame's turn came
  std::uint64_t dropped_replies = 0;  // answers to strangers beyond their bound
  std::uint64_t workers_registered = 0;
  std::uint64_t workers_lost = 0;
  std::size_t workers = 0;  // registered now
};

// The coordinator's end of the control plane (docs/protocol.md): one ROUTER socket, served by a
// reader (async_socket::receive_each), a writer and a ticker coroutine on the coordinator's
// executor, the same one the dispatcher, job masters and checkpoint coordinators run on. It
// registers workers, tracks their heartbeats, routes what they send to the job side
// (worker_event_handler), and carries the job side's deployments, cancellations, triggers and
// notifications to them (task_deployment_gateway here; checkpoint_task_gateway per job, see
// checkpoint_gateway()).
//
// Nothing here waits on a peer: sends go to a bounded queue per worker that one writer drains
// in turn (outgoing_queues), so a worker that stops reading delays only itself, and is declared
// lost when its queue overflows. Every public member must be called on the executor.
class coordinator_endpoint : public task_deployment_gateway,
                             public std::enable_shared_from_this<coordinator_endpoint> {
 public:
  using counters_observer = std::function<void(const coordinator_endpoint_counters&)>;

  coordinator_endpoint(asio::any_io_executor executor, zmq::context_t& context,
                       coordinator_endpoint_options options);
  ~coordinator_endpoint() override;

  // Must be set before start(). The handler outlives the endpoint's activity (until stop()).
  void set_handler(std::shared_ptr<worker_event_handler> handler);
  // Called whenever the counters change (e.g. coordinator_rest_api::set_transport_counters).
  void set_counters_observer(counters_observer observer);

  // Binds and starts serving. An error (address in use, bad endpoint, CURVE missing) leaves
  // nothing running.
  std::error_code start();
  // Closes the socket; the coroutines end. Idempotent.
  void stop();

  // The bound endpoint, e.g. tcp://127.0.0.1:40123 for tcp://127.0.0.1:*.
  const std::string& endpoint() const { return endpoint_; }
  const coordinator_endpoint_counters& counters() const { return counters_; }

  // The checkpoint gateway of one job (checkpoint_task_gateway calls carry no job id). Holds
  // the endpoint weakly: calls after the endpoint is gone do nothing.
  std::shared_ptr<checkpoint_task_gateway> checkpoint_gateway(const job_id& job);

  // task_deployment_gateway
  void deploy(const worker_id& worker, const task_deployment_descriptor& descriptor) override;
  void cancel(const worker_id& worker, const job_id& job,
              const execution_attempt_id& attempt) override;
  void finish(const worker_id& worker, const job_id& job,
              const execution_attempt_id& attempt) override;

  // The per-job gateways send through these.
  void send_trigger(const job_id& job, const execution_attempt_id& attempt, checkpoint_id id,
                    std::int64_t timestamp_us, const checkpoint_options& options);
  void send_notify_complete(const job_id& job, const execution_attempt_id& attempt,
                            checkpoint_id id);
  void send_notify_aborted(const job_id& job, const execution_attempt_id& attempt,
                           checkpoint_id id, checkpoint_id latest_completed_id);
  // checkpoint_task_gateway::hold and flush, of any job: from hold() on, triggers and
  // notifications are held per worker; the flush() that matches the first hold() sends them.
  void hold();
  void flush_held();

 private:
  struct worker_session {
    std::uint64_t session = 0;
    std::int64_t pid = 0;
    // With CURVE: the public key the registration came with. Every later message from this
    // worker id must come over a connection with the same key.
    std::string curve_key;
    // The largest batch frame it reads (register_worker.max_batch_bytes); 0: no batches.
    std::uint64_t max_batch_bytes = 0;
  };
  // What is held for one worker until the job side's turn ends, oldest first.
  using held_message =
      std::variant<wire::trigger_checkpoint_batch, wire::notify_checkpoint_complete_batch,
                   wire::notify_checkpoint_aborted_batch>;

  void start_reading();
  asio::awaitable<void> writer();
  asio::awaitable<void> ticker();

  // `curve_key`: the sender's CURVE public key as the ZAP handler named it (CURVE only).
  void on_frame(const std::string& peer, std::string_view payload, const std::string& curve_key);
  void on_bad_frame(const std::string& peer, const wire::decode_error& e);
  void on_message(const std::string& peer, wire::message&& m, const std::string& curve_key);
  void on_register(const std::string& peer, const wire::register_worker& m,
                   const std::string& curve_key);
  // Why a register_worker with a new session must not replace the registration of `peer`:
  // that worker is alive (heard from within two heartbeat intervals), so the frame is not
  // from it and must not fail its tasks over. Nothing when it may register.
  std::optional<std::string> live_worker_refusal(const std::string& peer,
                                                 const wire::register_worker& m) const;
  void on_handshake_failed(const handshake_event& event);
  // A connection closed (the connection monitor), or a frame showed one to be closed.
  void on_connection_closed(int fd);
  void note_connection(const std::string& peer, int fd);
  // With CURVE, why `curve_key` may not register `worker` (the allowlist binds the key to
  // another worker id, or the worker is registered with another key); nothing otherwise.
  std::optional<std::string> curve_binding_refusal(const worker_id& worker,
                                                   const std::string& curve_key) const;
  // `registered`: what admit() found for the frame's sender, as of the frame's arrival.
  void on_heartbeat(const std::string& peer, bool registered, const wire::heartbeat& m);
  void on_task_state(const std::string& peer, bool registered, const wire::task_state_update& m);
  void on_ack(const std::string& peer, bool registered, wire::acknowledge_checkpoint&& m);
  void on_decline(const std::string& peer, bool registered, const wire::decline_checkpoint& m);

  // What every message from `peer` passes first: with CURVE, the key the worker registered
  // with; then any message from a registered worker counts as a heartbeat. Nothing: refused
  // (counted and logged); else whether `peer` is registered (false for a registration), looked
  // up once per frame rather than once per check.
  std::optional<bool> admit(const std::string& peer, const std::string& curve_key,
                            std::string_view type, bool registering);
  bool is_registered(const std::string& peer) const;
  // Whether `peer` may speak for `attempt`: counts the refusal or staleness when not.
  bool owns(const std::string& peer, bool registered, const job_id& job,
            const execution_attempt_id& attempt, std::string_view what);
  void refuse(const std::string& peer, std::string_view why);
  void refuse_registration(const std::string& peer, std::string reason);
  void tell_not_registered(const std::string& peer);

  // Everything held for `worker` goes first, so nothing overtakes a held trigger or notification.
  // M: wire::message, or one of its alternatives (encoded without building the variant).
  template <typename M>
  void send_to_worker(const worker_id& worker, const M& m);
  template <typename M>
  void enqueue_to_worker(const worker_id& worker, const M& m);
  // The messages held for `worker`, or nullptr when nothing is held now (outside hold() and
  // flush()) or the worker does not read batches: the message then goes at once. Makes sure a
  // flush comes even if the gateway never asks for one.
  std::vector<held_message>* held_for(const worker_id& worker);
  // Whether `batch`, sent to `worker`, may take one more attempt.
  template <typename Batch>
  bool has_room(const worker_id& worker, const Batch& batch) const;
  void release_held(const worker_id& worker);
  void release_all_held();
  // Sends `frame` at once when nothing else waits to go; false when it must be queued.
  bool send_now(const std::string& peer, const std::string& frame);
  void on_sent(const std::string& peer, const std::error_code& error);
  void send_to_stranger(const std::string& peer, const wire::message& m);
  void wake_writer();
  void expire_workers();
  // Deferred to its own handler: the call that overflowed the queue may be in the middle of the
  // job side's own work (a job master deploying), which must not see a worker vanish under it.
  void schedule_loss(const worker_id& worker, std::string why);
  void declare_lost(const worker_id& worker, const std::string& why);
  // The worker is out of the registry: drop what is queued for it, tell the job side.
  void forget(const worker_id& worker, const std::string& why);
  void publish_counters();
  std::int64_t now_us() const;

  asio::any_io_executor executor_;
  zmq::context_t& context_;
  coordinator_endpoint_options options_;
  std::shared_ptr<worker_event_handler> handler_;
  counters_observer observer_;
  std::unique_ptr<async_socket> socket_;
  // Logs refused handshakes (a CURVE key the server cannot read) and reports closed
  // connections, which `connections_` maps to their workers.
  connection_monitor handshakes_;
  peer_connections connections_;
  std::string endpoint_;
  bool running_ = false;

  std::unordered_map<worker_id, worker_session> sessions_;
  std::unordered_map<worker_id, std::vector<held_message>> held_;
  std::string scratch_frame_;  // the frame being sent to a worker, its room kept between frames
  wire::acknowledge_checkpoint ack_;  // the acknowledgement being read (see on_frame)
  wire::trigger_checkpoint trigger_;  // the trigger being sent (see send_trigger)
  bool held_flush_posted_ = false;
  int hold_depth_ = 0;  // hold() calls not yet matched by flush_held()
  outgoing_queues outgoing_;
  asio::steady_timer writer_wake_;
  asio::steady_timer send_deadline_;
  bool writer_waiting_ = false;
  asio::steady_timer tick_timer_;

  peer_rate_limiter bad_input_log_;
  peer_rate_limiter stranger_replies_;
  coordinator_endpoint_counters counters_;
};

}  // namespace snapflow::transport
