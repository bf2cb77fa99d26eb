#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <zmq.hpp>

namespace snapflow::data {

// The ZAP handler (ZeroMQ RFC 27) of a worker's data plane with CURVE: it lets a CURVE client
// in only while its public key is vouched for, that is while some channel deployed on this
// worker names it as the producer's key (the coordinator put it in the deployment descriptor:
// the key that worker registered with). Every other request is denied: another mechanism, a key
// nobody vouched for, a key whose channels all ended.
//
// Deployments reach the workers of one job at about the same time, not in a fixed order, so a
// producer may connect before the consumer's worker has its deployment. libzmq does not retry
// a connection that ZAP denied, so a request for an unknown key is not denied at once: it waits
// up to `unvouched_wait` for a deployment to vouch for the key, and is denied only then. A
// ROUTER (not the usual REP) serves inproc://zeromq.zap.01 so that a waiting request does not
// hold up the others: each connection's handshake has its own pipe, answered in any order.
//
// vouch() and withdraw() may be called from any thread; the handler's own thread answers.
// Start it before binding the socket it protects; stop it after closing that socket and before
// the context terminates.
class data_zap_handler {
 public:
  data_zap_handler(zmq::context_t& context, std::chrono::milliseconds unvouched_wait);
  ~data_zap_handler();
  data_zap_handler(const data_zap_handler&) = delete;
  data_zap_handler& operator=(const data_zap_handler&) = delete;

  // Binds inproc://zeromq.zap.01 (one handler per context) and starts the thread.
  std::error_code start();
  void stop();

  // Counted: a key stays vouched for until it was withdrawn as often as it was vouched for.
  void vouch(const std::string& public_key);
  void withdraw(const std::string& public_key);
  bool vouched(const std::string& public_key) const;

  std::uint64_t accepted() const { return accepted_.load(std::memory_order_relaxed); }
  std::uint64_t denied() const { return denied_.load(std::memory_order_relaxed); }
  // Handshakes waiting for a deployment to vouch for their key now (tests).
  std::size_t waiting() const { return waiting_count_.load(std::memory_order_relaxed); }

 private:
  // A handshake waiting for its answer (its ZAP frames as the ROUTER delivered them).
  struct waiting_request {
    std::string routing_id;  // the pipe of the connection's session
    std::string request_id;
    std::string address;     // the client's IP address, for the log
    std::string public_key;  // Z85; empty for another mechanism
    std::chrono::steady_clock::time_point deadline;
  };

  void run(zmq::socket_t& requests);
  void take_request(zmq::socket_t& requests, std::chrono::steady_clock::time_point now);
  // Answers the waiting requests whose key is vouched for now, or whose wait is over.
  void answer_waiting(zmq::socket_t& requests, std::chrono::steady_clock::time_point now);
  void reply(zmq::socket_t& requests, const waiting_request& r, bool allowed, const char* why);
  void wake();

  zmq::context_t& context_;
  const std::chrono::milliseconds unvouched_wait_;
  const int wake_fd_;  // eventfd: a key was vouched for, or stop
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::map<std::string, std::uint32_t> vouched_;  // Z85 key -> channels that name it
  std::vector<waiting_request> waiting_;          // the handler's thread only
  std::atomic<std::uint64_t> accepted_{0};
  std::atomic<std::uint64_t> denied_{0};
  std::atomic<std::size_t> waiting_count_{0};  // waiting_.size()
};

}  // namespace snapflow::data
