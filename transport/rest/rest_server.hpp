#pragma once

#include <memory>
#include <optional>
#include <string>

#include <asio/any_io_executor.hpp>

#include "common/result.hpp"
#include "transport/rest/bearer_token.hpp"
#include "transport/rest/bounded_http_server.hpp"
#include "transport/rest/coordinator_rest_api.hpp"
#include "transport/rest/tls_context.hpp"

namespace snapflow::rest {

struct rest_server_options {
  // When set, every call but GET/HEAD/OPTIONS must carry `Authorization: Bearer <token>`;
  // others get 401 with `WWW-Authenticate: Bearer` before their body is read.
  std::optional<bearer_token> token;
  std::shared_ptr<tls_context> tls;  // HTTPS when set
  http_limits limits;
};

// Serves coordinator_rest_api over HTTP or HTTPS (bounded_http_server) on its own threads.
// Each request is moved onto the coordinator's executor, where the API runs, and answered
// from there; a coordinator too busy to answer within the deadline gets a 503 rather than a
// hung client. GET / serves the live web page.
class rest_server {
 public:
  rest_server(asio::any_io_executor coordinator, std::shared_ptr<coordinator_rest_api> api,
              rest_server_options options = {});
  ~rest_server();
  rest_server(const rest_server&) = delete;
  rest_server& operator=(const rest_server&) = delete;

  // Binds host:port (port 0 = any free port) and serves in the background; returns the port,
  // or an error ("port in use: ..." when another process holds it).
  result<int> start(const std::string& host, int port);
  void stop();

  std::size_t open_connections() const { return http_.open_connections(); }

 private:
  bool unauthorized(const httplib::Request& req, httplib::Response& res) const;

  asio::any_io_executor coordinator_;
  std::shared_ptr<coordinator_rest_api> api_;
  rest_server_options options_;
  bounded_http_server http_;
};

// The single-page live view of jobs and checkpoints served at GET /.
const std::string& web_page();

}  // namespace snapflow::rest
