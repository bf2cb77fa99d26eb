#pragma once

#include <memory>
#include <string>
#include <thread>

#include <asio/any_io_executor.hpp>

#include "transport/rest/coordinator_rest_api.hpp"

namespace httplib {
class Server;
}

namespace snapflow::rest {

// Serves coordinator_rest_api over HTTP (cpp-httplib) on its own threads. Each request is
// moved onto the coordinator's executor, where the API runs, and answered from there; a
// coordinator too busy to answer within the deadline gets a 503 rather than a hung client.
// GET / serves the live web page.
class rest_server {
 public:
  rest_server(asio::any_io_executor coordinator, std::shared_ptr<coordinator_rest_api> api);
  ~rest_server();
  rest_server(const rest_server&) = delete;
  rest_server& operator=(const rest_server&) = delete;

  // Binds host:port (port 0 = any free port) and serves in the background; returns the port,
  // or -1 when the address cannot be bound.
  int start(const std::string& host, int port);
  void stop();

 private:
  asio::any_io_executor coordinator_;
  std::shared_ptr<coordinator_rest_api> api_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

// The single-page live view of jobs and checkpoints served at GET /.
const std::string& web_page();

}  // namespace snapflow::rest
