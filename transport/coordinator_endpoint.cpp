#include "transport/coordinator_endpoint.hpp"

#include <algorithm>
#include <cassert>
#include <exception>
#include <sstream>
#include <thread>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "engine/clock.hpp"
#include "engine/hop_trace.hpp"
#include "graph/job_graph.hpp"
#include "transport/envelope.hpp"
#include "transport/exception_text.hpp"
#include "transport/peer_names.hpp"
#include "transport/wire_conversions.hpp"

namespace snapflow::transport {

namespace {

using namespace std::chrono_literals;

// How long the writer lets one send wait for a peer's full ZeroMQ queue before it holds that
// peer back and serves the others; then how long the peer is held back (doubling per failure).
constexpr auto send_attempt_timeout = 5ms;
constexpr std::int64_t first_hold_us = 10'000;
constexpr std::int64_t max_hold_us = 1'000'000;
// A reader or writer that finds work every time it looks never suspends; it yields after this
// many frames so timers, REST requests and the job side still get their turn.
constexpr int frames_per_turn = 64;
// Log lines about bad input in all, per interval, whatever the number of peers.
constexpr std::size_t max_bad_input_lines_per_interval = 20;
// What a batch frame is counted as against the worker's max_batch_bytes: an attempt entry is a
// map of three small integers (under 48 bytes), the keys and numbers the entries share fit in
// the fixed part, and the shared strings count in full. The cap bounds what a worker handles in
// one go.
constexpr std::size_t batch_bytes_per_attempt = 64;
constexpr std::size_t batch_fixed_bytes = 256;
constexpr std::size_t max_batch_attempts = 4096;
// The room the endpoint's kept frame (scratch_frame_) holds on to between frames.
constexpr std::size_t max_kept_scratch_bytes = 64 * 1024;

std::size_t shared_bytes(const wire::trigger_checkpoint_batch& b) {
  return b.job.size() + b.savepoint_dir.size() + b.target_location.size();
}
std::size_t shared_bytes(const wire::notify_checkpoint_complete_batch& b) { return b.job.size(); }
std::size_t shared_bytes(const wire::notify_checkpoint_aborted_batch& b) { return b.job.size(); }

std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string suppressed_note(std::uint64_t n) {
  if (n == 0) return {};
  return "; " + std::to_string(n) + " similar events from this peer were not logged";
}

template <typename T>
std::string describe(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

void log_coroutine_end(const char* name, std::exception_ptr error) {
  if (error) spdlog::critical("coordinator endpoint: the {} stopped: {}", name, exception_text(error));
}

// The checkpoint gateway of one job: adds the job id the engine's calls do not carry.
class job_checkpoint_gateway final : public checkpoint_task_gateway {
 public:
  job_checkpoint_gateway(std::weak_ptr<coordinator_endpoint> endpoint, job_id job)
      : endpoint_(std::move(endpoint)), job_(std::move(job)) {}

  void trigger_checkpoint(const execution_attempt_id& attempt, checkpoint_id id,
                          std::int64_t timestamp_us, const checkpoint_options& options) override {
    if (auto e = endpoint_.lock()) e->send_trigger(job_, attempt, id, timestamp_us, options);
  }
  void notify_checkpoint_complete(const execution_attempt_id& attempt, checkpoint_id id,
                                  std::int64_t) override {
    if (auto e = endpoint_.lock()) e->send_notify_complete(job_, attempt, id);
  }
  void notify_checkpoint_aborted(const execution_attempt_id& attempt, checkpoint_id id,
                                 checkpoint_id latest_completed_id) override {
    if (auto e = endpoint_.lock()) e->send_notify_aborted(job_, attempt, id, latest_completed_id);
  }
  void hold() override {
    if (auto e = endpoint_.lock()) e->hold();
  }
  void flush() override {
    if (auto e = endpoint_.lock()) e->flush_held();
  }

 private:
  std::weak_ptr<coordinator_endpoint> endpoint_;
  job_id job_;
};

// The single message a batch of one stands for.
wire::message single(const wire::trigger_checkpoint_batch& b) { return b.entry(b.attempts[0]); }
wire::message single(const wire::notify_checkpoint_complete_batch& b) {
  return wire::notify_checkpoint_complete{b.job, b.attempts[0], b.checkpoint};
}
wire::message single(const wire::notify_checkpoint_aborted_batch& b) {
  return wire::notify_checkpoint_aborted{b.job, b.attempts[0], b.checkpoint,
                                         b.latest_completed_checkpoint_id};
}

}  // namespace

coordinator_endpoint::coordinator_endpoint(asio::any_io_executor executor,
                                           zmq::context_t& context,
                                           coordinator_endpoint_options options)
    : executor_(std::move(executor)),
      context_(context),
      options_(std::move(options)),
      writer_wake_(executor_),
      send_deadline_(executor_),
      tick_timer_(executor_),
      bad_input_log_(std::chrono::duration_cast<std::chrono::microseconds>(
                         options_.bad_input_log_interval)
                         .count(),
                     max_bad_input_lines_per_interval),
      // At most one not_registered per peer per heartbeat interval: enough for a worker to
      // learn it must register, too few to amplify a flood.
      stranger_replies_(
          std::chrono::duration_cast<std::chrono::microseconds>(options_.heartbeat_interval)
              .count(),
          options_.max_queued_replies_to_strangers) {
  assert(options_.heartbeat_interval.count() > 0);
  assert(options_.heartbeat_timeout > options_.heartbeat_interval);
  assert(options_.max_queued_frames_per_worker > 0);
}

coordinator_endpoint::~coordinator_endpoint() { stop(); }

void coordinator_endpoint::set_handler(std::shared_ptr<worker_event_handler> handler) {
  assert(!running_);
  handler_ = std::move(handler);
}

void coordinator_endpoint::set_counters_observer(counters_observer observer) {
  observer_ = std::move(observer);
}

std::error_code coordinator_endpoint::start() {
  assert(handler_ && "set_handler before start");
  assert(!socket_ && "start once");
  socket_options so;
  so.max_frame_bytes = options_.max_frame_bytes;
  so.send_hwm = options_.socket_send_hwm;
  so.read_user_id = options_.curve.has_value();  // the ZAP handler names each client's key
  so.read_source_fd = true;  // which connection a frame came on: see on_connection_closed
  // A dead connection (a host gone, a cable pulled) is closed within the connection timeout:
  // its worker is lost then, and its routing id is free for the worker's next connection.
  if (options_.connection_timeout.count() > 0) {
    so.zmtp_heartbeat_interval_ms =
        static_cast<int>(std::max<std::int64_t>(1, options_.connection_timeout.count() / 4));
    so.zmtp_heartbeat_timeout_ms = static_cast<int>(options_.connection_timeout.count());
  }
  so.router_handover = false;  // a live worker's id cannot be taken over by another connection
  auto socket = std::make_unique<async_socket>(executor_, context_, zmq::socket_type::router, so);
  if (options_.curve) {
    if (auto e = apply_curve_server(socket->native_handle(), *options_.curve)) return e;
  }
  // ZAP denials are logged by the ZAP handler; what fails before ZAP (a client that used
  // another server key, or none) only the monitor sees.
  auto monitored = handshakes_.start(
      context_, socket->native_handle(),
      [weak = weak_from_this(), executor = executor_](const handshake_event& event) {
        asio::post(executor, [weak, event] {
          if (auto self = weak.lock()) self->on_handshake_failed(event);
        });
      },
      [weak = weak_from_this(), executor = executor_](int fd) {
        asio::post(executor, [weak, fd] {
          if (auto self = weak.lock()) self->on_connection_closed(fd);
        });
      });
  if (monitored) return monitored;
  if (auto e = socket->bind(options_.bind_address)) {
    handshakes_.stop();
    return e;
  }
  socket_ = std::move(socket);
  endpoint_ = socket_->last_endpoint();
  running_ = true;
  asio::post(executor_, [self = shared_from_this()] { self->start_reading(); });
  asio::co_spawn(
      executor_, [self = shared_from_this()] { return self->writer(); },
      [](std::exception_ptr e) { log_coroutine_end("writer", e); });
  asio::co_spawn(
      executor_, [self = shared_from_this()] { return self->ticker(); },
      [](std::exception_ptr e) { log_coroutine_end("ticker", e); });
  publish_counters();
  return {};
}

void coordinator_endpoint::stop() {
  if (!running_) return;
  running_ = false;
  handshakes_.stop();
  socket_->close();  // ends the pending receive and send with operation_aborted
  writer_wake_.cancel();
  send_deadline_.cancel();
  tick_timer_.cancel();
}

std::int64_t coordinator_endpoint::now_us() const { return coordinator_clock::now_us(); }

std::shared_ptr<checkpoint_task_gateway> coordinator_endpoint::checkpoint_gateway(
    const job_id& job) {
  return std::make_shared<job_checkpoint_gateway>(weak_from_this(), job);
}

// ---------------------------------------------------------------------------------------------
// The reader, the writer and the ticker.

// Runs on the executor (posted by start): the socket belongs to that thread.
void coordinator_endpoint::start_reading() {
  if (!running_) return;  // stopped before it got going
  // Every frame through one callback, no coroutine per frame (async_socket::receive_each).
  socket_->receive_each(
      [this, self = shared_from_this()](received_frame& in) {
        if (!running_) return;
        try {
          if (in.error == socket_errc::multipart_message) {
            ++counters_.frames_received;
            on_bad_frame(in.routing_id, wire::decode_error{wire::decode_errc::not_msgpack,
                                                           "a multipart message", 0});
          } else {
            note_connection(in.routing_id, in.source_fd);
            on_frame(in.routing_id, in.payload, in.user_id);
          }
          publish_counters();
        } catch (...) {
          // Nothing here throws by design (the job side and the counters' observer included).
          // One frame that did must not leave every worker unheard: it is logged and dropped,
          // and reading goes on.
          spdlog::critical("coordinator endpoint: handling a frame from {} failed: {}",
                           printable_peer(in.routing_id), current_exception_text());
        }
        if (in.payload.capacity() > max_kept_scratch_bytes) in.payload = std::string();
      },
      [this, self = shared_from_this()](std::error_code why) {
        if (why != asio::error::operation_aborted && running_)
          spdlog::error("coordinator endpoint: receiving failed, no more messages will be read: {}",
                        why.message());
      },
      frames_per_turn);
}

asio::awaitable<void> coordinator_endpoint::writer() {
  using namespace asio::experimental::awaitable_operators;
  int frames_this_turn = 0;
  while (running_) {
    std::optional<outgoing_queues::frame> next = outgoing_.pop(now_us());
    if (!next) {
      // Nothing may go now: wait for a new frame (wake_writer) or the end of a hold-back.
      const auto release = outgoing_.next_release_us();
      if (release)
        writer_wake_.expires_after(std::chrono::microseconds(std::max<std::int64_t>(
            *release - now_us(), 0)));
      else
        writer_wake_.expires_at(asio::steady_timer::time_point::max());
      writer_waiting_ = true;
      std::error_code ignored;
      co_await writer_wake_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
      writer_waiting_ = false;
      frames_this_turn = 0;
      continue;
    }
    // Most sends go through at once; only a peer that pushes back costs a coroutine.
    if (const std::error_code quick = socket_->try_send(next->peer, next->payload);
        quick != std::errc::resource_unavailable_try_again) {
      on_sent(next->peer, quick);
      if (quick == asio::error::operation_aborted) co_return;
      if (++frames_this_turn == frames_per_turn) {
        frames_this_turn = 0;
        co_await asio::post(executor_, asio::use_awaitable);
      }
      continue;
    }
    // The send is raced with a deadline: a peer whose ZeroMQ queue is full would otherwise keep
    // the writer, and every other peer, waiting. The payload is copied because the losing
    // branch takes its arguments with it.
    send_deadline_.expires_after(send_attempt_timeout);
    std::error_code deadline_error;
    auto outcome = co_await (
        socket_->send(next->peer, next->payload) ||
        send_deadline_.async_wait(asio::redirect_error(asio::use_awaitable, deadline_error)));
    if (!running_) co_return;
    if (outcome.index() == 1) {
      const std::string peer = next->peer;
      outgoing_.hold_back(std::move(*next), now_us(), first_hold_us, max_hold_us);
      if (sessions_.contains(peer) &&
          outgoing_.queued(peer) >= options_.max_queued_frames_per_worker)
        schedule_loss(peer, "it stopped reading: its outgoing queue is full");
      continue;
    }
    const std::error_code error = std::get<0>(outcome);
    on_sent(next->peer, error);
    if (error == asio::error::operation_aborted) co_return;
    if (++frames_this_turn == frames_per_turn) {
      frames_this_turn = 0;
      co_await asio::post(executor_, asio::use_awaitable);
    }
  }
}

void coordinator_endpoint::on_sent(const std::string& peer, const std::error_code& error) {
  if (!error) {
    outgoing_.sent(peer);
    ++counters_.frames_sent;
    return;
  }
  if (error == asio::error::operation_aborted) return;
  // Mostly host_unreachable: the peer is not connected right now. The frame is lost, as
  // anything in flight on a broken connection is (docs/protocol.md, Delivery).
  ++counters_.send_failures;
  if (auto d = bad_input_log_.allow(peer, now_us()); d.allowed)
    spdlog::warn("cannot send to {}: {}{}", printable_peer(peer), error.message(),
                 suppressed_note(d.suppressed));
}

asio::awaitable<void> coordinator_endpoint::ticker() {
  // Often enough that a worker is declared lost within a quarter of the timeout of its limit.
  const auto period = std::max<std::chrono::milliseconds>(
      1ms, std::min(options_.heartbeat_interval, options_.heartbeat_timeout / 4));
  while (running_) {
    tick_timer_.expires_after(period);
    std::error_code ignored;
    co_await tick_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    if (!running_) co_return;
    expire_workers();
  }
}

// ---------------------------------------------------------------------------------------------
// Receiving.

void coordinator_endpoint::on_frame(const std::string& peer, std::string_view payload,
                                    const std::string& curve_key) {
  ++counters_.frames_received;
  hop_trace::record("c.frame", static_cast<std::int64_t>(payload.size()));
  // An acknowledgement, the message of every checkpoint from every subtask, is read into a
  // kept struct when it is canonical (what a snapflow worker sends): no message variant.
  if (payload.size() <= options_.max_frame_bytes && wire::decode_canonical(payload, ack_)) {
    if (const auto registered =
            admit(peer, curve_key, wire::acknowledge_checkpoint::wire_type, false))
      on_ack(peer, *registered, std::move(ack_));
    return;
  }
  wire::decode_result decoded = wire::decode(payload, options_.max_frame_bytes);
  if (!decoded) {
    on_bad_frame(peer, decoded.error());
    return;
  }
  on_message(peer, std::move(decoded).value(), curve_key);
}

void coordinator_endpoint::on_bad_frame(const std::string& peer, const wire::decode_error& e) {
  ++counters_.bad_frames;
  if (auto d = bad_input_log_.allow(peer, now_us()); d.allowed)
    spdlog::warn("bad frame from {}: {}{}", printable_peer(peer), describe(e),
                 suppressed_note(d.suppressed));
  // A peer that speaks another version cannot be registered: tell it why, in our version,
  // unless it is a registered worker that sent one odd frame.
  if (e.code == wire::decode_errc::unsupported_version && !is_registered(peer) &&
      stranger_replies_.allow(peer, now_us()).allowed) {
    send_to_stranger(peer, wire::register_ack{false,
                                              "protocol version " + std::to_string(e.version) +
                                                  " is not supported: this coordinator speaks "
                                                  "version " +
                                                  std::to_string(wire::current_protocol_version),
                                              0, 0});
  }
}

void coordinator_endpoint::on_message(const std::string& peer, wire::message&& m,
                                      const std::string& curve_key) {
  const auto admitted =
      admit(peer, curve_key, wire::type_name(m), std::holds_alternative<wire::register_worker>(m));
  if (!admitted) return;
  const bool registered = *admitted;
  std::visit(
      [&](auto& body) {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, wire::register_worker>) {
          on_register(peer, body, curve_key);
        } else if constexpr (std::is_same_v<T, wire::heartbeat>) {
          on_heartbeat(peer, registered, body);
        } else if constexpr (std::is_same_v<T, wire::task_state_update>) {
          on_task_state(peer, registered, body);
        } else if constexpr (std::is_same_v<T, wire::acknowledge_checkpoint>) {
          on_ack(peer, registered, std::move(body));
        } else if constexpr (std::is_same_v<T, wire::acknowledge_checkpoint_batch>) {
          // Each entry on its own, as if it had come alone: one for another worker's attempt
          // or an unknown job is refused or dropped and counted, the rest still count.
          for (auto& ack : body.acks) on_ack(peer, registered, std::move(ack));
        } else if constexpr (std::is_same_v<T, wire::decline_checkpoint>) {
          on_decline(peer, registered, body);
        } else if constexpr (std::is_same_v<T, wire::source_exhausted>) {
          if (owns(peer, registered, body.job, body.attempt, "a source_exhausted"))
            handler_->source_exhausted(body.job, body.attempt, body.last_barrier);
        } else {
          refuse(peer, "a " + std::string(T::wire_type) + ", which only the coordinator sends");
        }
      },
      m);
}

std::optional<bool> coordinator_endpoint::admit(const std::string& peer,
                                                const std::string& curve_key,
                                                std::string_view type, bool registering) {
  if (options_.curve && !registering) {
    // ROUTER_HANDOVER lets any connection take over a routing id; with CURVE a message only
    // speaks for a registered worker when it comes with the key that worker registered with.
    if (auto it = sessions_.find(peer); it != sessions_.end() && it->second.curve_key != curve_key) {
      refuse(peer, "a " + std::string(type) +
                       " sent with a CURVE key other than the one this worker registered with");
      return std::nullopt;
    }
  }
  if (registering) return false;
  // is_registered(), with the registry's lookup and the heartbeat in one: any message counts as
  // a sign of life.
  return sessions_.contains(peer) && handler_->workers().heartbeat(peer, now_us());
}

bool coordinator_endpoint::is_registered(const std::string& peer) const {
  return sessions_.contains(peer) && handler_->workers().find(peer) != nullptr;
}

void coordinator_endpoint::refuse(const std::string& peer, std::string_view why) {
  ++counters_.refused_messages;
  if (auto d = bad_input_log_.allow(peer, now_us()); d.allowed)
    spdlog::warn("refused a message from {}: {}{}", printable_peer(peer), why,
                 suppressed_note(d.suppressed));
}

void coordinator_endpoint::refuse_registration(const std::string& peer, std::string reason) {
  refuse(peer, "registration refused: " + reason);
  if (!stranger_replies_.allow(peer, now_us()).allowed) return;
  send_to_stranger(peer, wire::register_ack{
                             false, std::move(reason),
                             static_cast<std::uint32_t>(options_.heartbeat_interval.count()),
                             static_cast<std::uint32_t>(options_.heartbeat_timeout.count())});
}

void coordinator_endpoint::tell_not_registered(const std::string& peer) {
  if (!stranger_replies_.allow(peer, now_us()).allowed) return;
  send_to_stranger(peer, wire::not_registered{"this coordinator does not know worker " +
                                              printable_peer(peer) + ": register first"});
}

std::optional<std::string> coordinator_endpoint::curve_binding_refusal(
    const worker_id& worker, const std::string& curve_key) const {
  if (!options_.curve) return std::nullopt;
  const auto allowed = options_.curve->allowed_clients.find(curve_key);
  // ZAP lets only listed keys connect; an unlisted one here means the handler is misconfigured.
  if (allowed == options_.curve->allowed_clients.end())
    return "its CURVE key is not on the allowlist";
  if (!allowed->second.empty() && allowed->second != worker)
    return "its CURVE key is bound to worker id '" + printable_peer(allowed->second) + "'";
  if (auto it = sessions_.find(worker); it != sessions_.end() && it->second.curve_key != curve_key)
    return "worker '" + printable_peer(worker) + "' is registered with another CURVE key";
  return std::nullopt;
}

void coordinator_endpoint::on_handshake_failed(const handshake_event& event) {
  if (auto d = bad_input_log_.allow("handshake", now_us()); d.allowed)
    spdlog::warn("refused a connection's handshake on {}: {} (detail {}){}", event.endpoint,
                 to_string(event.failure), event.detail, suppressed_note(d.suppressed));
}

std::optional<std::string> coordinator_endpoint::live_worker_refusal(
    const std::string& peer, const wire::register_worker& m) const {
  const auto it = sessions_.find(peer);
  if (it == sessions_.end() || it->second.session == m.session) return std::nullopt;
  const worker_info* live = handler_->workers().find(peer);
  if (live == nullptr) return std::nullopt;
  // A live worker heartbeats every interval; twice that allows for a late one. A restarted
  // worker (its process killed, its connection closed) is let in once its predecessor has been
  // silent that long: it resends register_worker every interval until then.
  const std::int64_t silent_us = now_us() - live->last_heartbeat_us;
  const std::int64_t live_us =
      2 * std::chrono::duration_cast<std::chrono::microseconds>(options_.heartbeat_interval).count();
  if (silent_us >= live_us) return std::nullopt;
  return "worker '" + printable_peer(peer) + "' is alive (pid " + std::to_string(it->second.pid) +
         ", heard from " + std::to_string(silent_us / 1000) + " ms ago) and this register_worker "
         "(pid " + std::to_string(m.pid) + ") starts another session: not failing it over";
}

void coordinator_endpoint::on_register(const std::string& peer, const wire::register_worker& m,
                                       const std::string& curve_key) {
  if (m.worker_id != peer) {
    // With ROUTER_HANDOVER off, a connection that presented an id a live connection holds is
    // given another id by ZeroMQ (its first frame's bytes): its frames arrive here. No answer:
    // a worker that lands here by a race of its own reconnection starts over by itself.
    refuse(peer, "a register_worker for worker '" + printable_peer(m.worker_id) +
                     "' on a connection whose routing id differs (the id is taken by a live "
                     "connection, or the client is misconfigured)");
    return;
  }
  if (m.protocol_version != wire::current_protocol_version) {
    refuse_registration(peer, "protocol version " + std::to_string(m.protocol_version) +
                                  " is not supported: this coordinator speaks version " +
                                  std::to_string(wire::current_protocol_version));
    return;
  }
  if (auto why = curve_binding_refusal(peer, curve_key)) {
    refuse_registration(peer, std::move(*why));
    return;
  }
  const wire::register_ack accepted{
      true, "", static_cast<std::uint32_t>(options_.heartbeat_interval.count()),
      static_cast<std::uint32_t>(options_.heartbeat_timeout.count()),
      // Half the frame limit: room for the estimate a worker makes of a batch to be off.
      options_.max_frame_bytes / 2};
  worker_registry& registry = handler_->workers();
  if (auto it = sessions_.find(peer); it != sessions_.end() && m.session != 0 &&
                                      it->second.session == m.session &&
                                      registry.find(peer) != nullptr) {
    // A resend while the first answer was on its way: answer again, change nothing.
    registry.heartbeat(peer, now_us());
    send_to_worker(peer, accepted);
    return;
  }
  if (auto why = live_worker_refusal(peer, m)) {
    // Dropped without an answer: an answer to this routing id could reach the live worker.
    refuse(peer, "registration refused: " + *why);
    return;
  }
  std::vector<std::string> roots;
  roots.reserve(m.data_roots.size());
  for (const auto& root : m.data_roots) roots.push_back(root.path);
  std::map<std::string, std::string> programs;
  for (const auto& p : m.programs) {
    if (auto why = program_name_problem(p.name)) {
      refuse_registration(peer, *why);
      return;
    }
    if (auto why = program_fingerprint_problem(p.fingerprint)) {
      refuse_registration(peer, "program '" + p.name + "': " + *why);
      return;
    }
    programs[p.fingerprint] = p.name;
  }
  // The key it proved at the handshake also guards its data endpoint (docs/protocol.md 7.4).
  auto registered = registry.register_worker(peer, m.slots, m.data_endpoint, now_us(), curve_key,
                                             std::move(roots), std::move(programs));
  if (!registered) {
    // The registry checks before it replaces: an earlier registration of this id stands.
    refuse_registration(peer, registered.err().message);
    return;
  }
  // Frames still queued for an earlier incarnation are about tasks that no longer exist.
  outgoing_.drop(peer);
  held_.erase(peer);
  sessions_[peer] = worker_session{m.session, m.pid, curve_key, m.max_batch_bytes};
  ++counters_.workers_registered;
  spdlog::info("worker {} registered: {} slots, data endpoint {}, pid {}{}{}",
               printable_peer(peer), m.slots, m.data_endpoint, m.pid,
               m.programs.empty() ? std::string()
                                  : ", program " + m.programs.front().name + " (fingerprint " +
                                        m.programs.front().fingerprint + ")",
               registered->replaced ? " (a new incarnation: its earlier tasks are gone)" : "");
  send_to_worker(peer, accepted);
  handler_->worker_registered(peer, registered->replaced);
}

void coordinator_endpoint::on_heartbeat(const std::string& peer, bool registered,
                                        const wire::heartbeat& m) {
  if (!registered) {
    refuse(peer, "a heartbeat from a worker that is not registered");
    tell_not_registered(peer);
    return;
  }
  // Counters of attempts that are not current or not the sender's are stale (a task ended
  // after a failover) or wrong: dropped quietly, they are only statistics.
  if (m.tasks) {
    for (const auto& t : *m.tasks) {
      const std::optional<worker_id> owner = handler_->owner_of(t.job, t.attempt);
      if (owner && *owner == peer) handler_->task_io_reported(from_wire(t));
    }
  }
  send_to_worker(peer, wire::heartbeat{"coordinator", wall_clock_ms()});
}

bool coordinator_endpoint::owns(const std::string& peer, bool registered, const job_id& job,
                                const execution_attempt_id& attempt, std::string_view what) {
  if (!registered) {
    refuse(peer, std::string(what) + " from a worker that is not registered");
    tell_not_registered(peer);
    return false;
  }
  const std::optional<worker_id> owner = handler_->owner_of(job, attempt);
  if (!owner) {
    // An earlier deployment's message still on its way after a failover, or an unknown job.
    ++counters_.stale_messages;
    spdlog::debug("dropped {} from {} for {} of job {}: not a current attempt", what,
                  printable_peer(peer), describe(attempt), printable_peer(job));
    return false;
  }
  if (*owner != peer) {
    refuse(peer, std::string(what) + " for " + describe(attempt) + " of job " +
                     printable_peer(job) + ", which runs on worker " + printable_peer(*owner));
    return false;
  }
  return true;
}

void coordinator_endpoint::on_task_state(const std::string& peer, bool registered,
                                         const wire::task_state_update& m) {
  if (!owns(peer, registered, m.job, m.attempt, "a task state update")) return;
  handler_->task_state_changed(m.job, m.attempt, from_wire(m.state), m.failure_message);
}

void coordinator_endpoint::on_ack(const std::string& peer, bool registered,
                                  wire::acknowledge_checkpoint&& m) {
  if (!owns(peer, registered, m.job, m.attempt, "an acknowledgement")) return;
  handler_->acknowledge_checkpoint(from_wire(std::move(m)));
}

void coordinator_endpoint::on_decline(const std::string& peer, bool registered,
                                      const wire::decline_checkpoint& m) {
  if (!owns(peer, registered, m.job, m.attempt, "a decline")) return;
  handler_->decline_checkpoint(from_wire(m));
}

// ---------------------------------------------------------------------------------------------
// Sending.

void coordinator_endpoint::deploy(const worker_id& worker,
                                  const task_deployment_descriptor& descriptor) {
  send_to_worker(worker, to_wire(descriptor));
}

void coordinator_endpoint::cancel(const worker_id& worker, const job_id& job,
                                  const execution_attempt_id& attempt) {
  send_to_worker(worker, wire::cancel_task{job, attempt});
}

void coordinator_endpoint::finish(const worker_id& worker, const job_id& job,
                                  const execution_attempt_id& attempt) {
  send_to_worker(worker, wire::finish_task{job, attempt});
}

// Triggers and notifications are held per worker while the job side makes the calls of one run
// (between its gateway's hold() and flush()) and go out at the flush, one batch frame per
// worker and kind where the previous call differs only in its attempt. Holding never outlasts
// the current turn: the flush ends the same run of calls (a posted flush backs it up), so a
// single subtask waits for nothing; calls outside a run are sent at once, as they come.

void coordinator_endpoint::send_trigger(const job_id& job, const execution_attempt_id& attempt,
                                        checkpoint_id id, std::int64_t timestamp_us,
                                        const checkpoint_options& options) {
  if (!running_) return;
  const std::optional<worker_id> owner = handler_->owner_of(job, attempt);
  if (!owner) return;
  wire::trigger_checkpoint& m = trigger_;  // kept: filling it allocates nothing
  to_wire(job, attempt, id, timestamp_us, options, m);
  std::vector<held_message>* held = held_for(*owner);
  if (held == nullptr) return send_to_worker(*owner, m);
  if (!held->empty()) {
    auto* last = std::get_if<wire::trigger_checkpoint_batch>(&held->back());
    if (last && last->takes(m) && has_room(*owner, *last)) {
      last->attempts.push_back(attempt);
      return;
    }
  }
  held->push_back(wire::trigger_checkpoint_batch{m.job, m.checkpoint, m.timestamp_ms,
                                                 m.is_savepoint, m.savepoint_dir, m.mode,
                                                 m.unaligned, m.target_location, {attempt},
                                                 m.aligned_timeout_ms});
}

void coordinator_endpoint::send_notify_complete(const job_id& job,
                                                const execution_attempt_id& attempt,
                                                checkpoint_id id) {
  if (!running_) return;
  const std::optional<worker_id> owner = handler_->owner_of(job, attempt);
  if (!owner) return;
  std::vector<held_message>* held = held_for(*owner);
  if (held == nullptr)
    return send_to_worker(*owner, wire::notify_checkpoint_complete{job, attempt, id});
  if (!held->empty()) {
    auto* last = std::get_if<wire::notify_checkpoint_complete_batch>(&held->back());
    if (last && last->job == job && last->checkpoint == id && has_room(*owner, *last)) {
      last->attempts.push_back(attempt);
      return;
    }
  }
  held->push_back(wire::notify_checkpoint_complete_batch{job, id, {attempt}});
}

void coordinator_endpoint::send_notify_aborted(const job_id& job,
                                               const execution_attempt_id& attempt,
                                               checkpoint_id id,
                                               checkpoint_id latest_completed_id) {
  if (!running_) return;
  std::optional<checkpoint_id> latest;
  if (latest_completed_id > 0) latest = latest_completed_id;
  const std::optional<worker_id> owner = handler_->owner_of(job, attempt);
  if (!owner) return;
  std::vector<held_message>* held = held_for(*owner);
  if (held == nullptr)
    return send_to_worker(*owner, wire::notify_checkpoint_aborted{job, attempt, id, latest});
  if (!held->empty()) {
    auto* last = std::get_if<wire::notify_checkpoint_aborted_batch>(&held->back());
    if (last && last->job == job && last->checkpoint == id &&
        last->latest_completed_checkpoint_id == latest && has_room(*owner, *last)) {
      last->attempts.push_back(attempt);
      return;
    }
  }
  held->push_back(wire::notify_checkpoint_aborted_batch{job, id, latest, {attempt}});
}

std::vector<coordinator_endpoint::held_message>* coordinator_endpoint::held_for(
    const worker_id& worker) {
  if (hold_depth_ == 0) return nullptr;
  auto session = sessions_.find(worker);
  if (session == sessions_.end() || session->second.max_batch_bytes == 0) return nullptr;
  if (!held_flush_posted_) {
    // Gateways flush at the end of the job side's calls; this catches a caller that does not.
    held_flush_posted_ = true;
    asio::post(executor_, [self = shared_from_this()] {
      self->held_flush_posted_ = false;
      self->release_all_held();
    });
  }
  return &held_[worker];
}

template <typename Batch>
bool coordinator_endpoint::has_room(const worker_id& worker, const Batch& batch) const {
  if (batch.attempts.size() >= max_batch_attempts) return false;
  auto session = sessions_.find(worker);
  if (session == sessions_.end()) return false;
  const std::uint64_t bytes = batch_fixed_bytes + shared_bytes(batch) +
                              (batch.attempts.size() + 1) * batch_bytes_per_attempt;
  return bytes <= session->second.max_batch_bytes;
}

void coordinator_endpoint::hold() { ++hold_depth_; }

void coordinator_endpoint::flush_held() {
  assert(hold_depth_ > 0);
  if (hold_depth_ > 0) --hold_depth_;
  if (hold_depth_ != 0 || held_.empty()) return;
  release_all_held();
  if (options_.yield_after_send) std::this_thread::yield();
}

void coordinator_endpoint::release_all_held() {
  // A copy: releasing erases the entry the key lives in.
  while (!held_.empty()) release_held(worker_id(held_.begin()->first));
}

void coordinator_endpoint::release_held(const worker_id& worker) {
  auto it = held_.find(worker);
  if (it == held_.end()) return;
  std::vector<held_message> messages = std::move(it->second);
  held_.erase(it);  // `worker` must not be this entry's key (flush_held copies it)
  for (const held_message& held : messages) {
    std::visit(
        [&](const auto& batch) {
          assert(!batch.attempts.empty());
          if (batch.attempts.size() == 1)
            enqueue_to_worker(worker, single(batch));  // the same bytes as before batching
          else
            enqueue_to_worker(worker, batch);
        },
        held);
  }
}

template <typename M>
void coordinator_endpoint::send_to_worker(const worker_id& worker, const M& m) {
  if (!running_) return;
  if (!held_.empty()) release_held(worker);
  enqueue_to_worker(worker, m);
}

template <typename M>
void coordinator_endpoint::enqueue_to_worker(const worker_id& worker, const M& m) {
  if (!running_) return;
  if (!sessions_.contains(worker)) {
    if constexpr (std::is_same_v<M, wire::message>)
      spdlog::debug("not sending {} to {}: not registered", wire::type_name(m),
                    printable_peer(worker));
    else
      spdlog::debug("not sending {} to {}: not registered", M::wire_type, printable_peer(worker));
    return;
  }
  // Encoded into the endpoint's kept frame: most frames go at once, and ZeroMQ copies them.
  wire::encode(m, scratch_frame_);
  hop_trace::record("c.send", static_cast<std::int64_t>(scratch_frame_.size()));
  if (!send_now(worker, scratch_frame_)) {
    if (!outgoing_.push(worker, std::string(scratch_frame_),
                        options_.max_queued_frames_per_worker)) {
      schedule_loss(worker, "it stopped reading: its outgoing queue is full");
    } else {
      wake_writer();
    }
  }
  // A large frame (a deployment) does not keep its room for good.
  if (scratch_frame_.capacity() > max_kept_scratch_bytes) scratch_frame_ = std::string();
}

void coordinator_endpoint::send_to_stranger(const std::string& peer, const wire::message& m) {
  if (!running_) return;
  std::string frame = wire::encode(m);
  if (send_now(peer, frame)) return;
  if (outgoing_.total() >= options_.max_queued_replies_to_strangers ||
      !outgoing_.push(peer, std::move(frame), options_.max_queued_replies_per_stranger)) {
    ++counters_.dropped_replies;
    return;
  }
  wake_writer();
}

bool coordinator_endpoint::send_now(const std::string& peer, const std::string& frame) {
  // Only when the writer is idle with nothing queued: then no send is in flight, and going
  // first cannot overtake an earlier frame to the same peer.
  if (!writer_waiting_ || !outgoing_.empty()) return false;
  const std::error_code error = socket_->try_send(peer, frame);
  if (error == std::errc::resource_unavailable_try_again) return false;
  on_sent(peer, error);
  return true;
}

void coordinator_endpoint::wake_writer() {
  if (writer_waiting_) writer_wake_.cancel();
}

// ---------------------------------------------------------------------------------------------
// Liveness.

void coordinator_endpoint::expire_workers() {
  const std::int64_t timeout_us =
      std::chrono::duration_cast<std::chrono::microseconds>(options_.heartbeat_timeout).count();
  for (const worker_id& worker : handler_->workers().expire(now_us(), timeout_us))
    forget(worker, "nothing heard from it for " +
                       std::to_string(options_.heartbeat_timeout.count()) + " ms");
}

// The monitor reports a close while what the connection delivered before it may still wait in
// the socket: its last acknowledgements, a FINISHED. They are read first (after_drain), so a
// worker that said its last words and exited is heard out before it is given up.
void coordinator_endpoint::on_connection_closed(int fd) {
  if (!running_) return;
  socket_->after_drain([weak = weak_from_this(), fd] {
    auto self = weak.lock();
    if (!self || !self->running_) return;
    if (auto peer = self->connections_.closed(fd))
      self->schedule_loss(*peer, "its control connection closed");
  });
}

void coordinator_endpoint::note_connection(const std::string& peer, int fd) {
  for (std::string& lost : connections_.frame_from(peer, fd))
    socket_->after_drain([weak = weak_from_this(), lost = std::move(lost)]() mutable {
      if (auto self = weak.lock(); self && self->running_)
        self->schedule_loss(lost, "its control connection closed (its descriptor serves another)");
    });
}

void coordinator_endpoint::schedule_loss(const worker_id& worker, std::string why) {
  auto it = sessions_.find(worker);
  if (it == sessions_.end()) return;
  const std::uint64_t session = it->second.session;
  asio::post(executor_, [self = shared_from_this(), worker, session, why = std::move(why)] {
    auto current = self->sessions_.find(worker);
    // Lost already, or registered anew meanwhile: that incarnation is not the one that stalled.
    if (current == self->sessions_.end() || current->second.session != session) return;
    self->declare_lost(worker, why);
  });
}

void coordinator_endpoint::declare_lost(const worker_id& worker, const std::string& why) {
  if (!running_ || !sessions_.contains(worker)) return;
  handler_->workers().remove(worker);
  forget(worker, why);
}

void coordinator_endpoint::forget(const worker_id& worker, const std::string& why) {
  sessions_.erase(worker);
  connections_.forget(worker);
  outgoing_.drop(worker);
  held_.erase(worker);
  ++counters_.workers_lost;
  spdlog::warn("worker {} is lost: {}", printable_peer(worker), why);
  handler_->worker_lost(worker);
  publish_counters();
}

void coordinator_endpoint::publish_counters() {
  counters_.workers = sessions_.size();
  if (observer_) observer_(counters_);
}

}  // namespace snapflow::transport
