#include "transport/rest/rest_server.hpp"

#include <chrono>
#include <future>

#include <asio/post.hpp>
#include <httplib.h>

namespace snapflow::rest {

namespace {
constexpr auto coordinator_deadline = std::chrono::seconds(10);
constexpr std::size_t max_body_bytes = 16 << 20;
}  // namespace

rest_server::rest_server(asio::any_io_executor coordinator,
                         std::shared_ptr<coordinator_rest_api> api)
    : coordinator_(std::move(coordinator)), api_(std::move(api)) {}

rest_server::~rest_server() { stop(); }

int rest_server::start(const std::string& host, int port) {
  server_ = std::make_unique<httplib::Server>();
  server_->set_payload_max_length(max_body_bytes);
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" && (req.path == "/" || req.path == "/index.html")) {
      res.set_content(web_page(), "text/html; charset=utf-8");
      return;
    }
    rest_request r{req.method, req.path, {}, req.body};
    for (const auto& [k, v] : req.params) r.query[k] = v;
    auto promise = std::make_shared<std::promise<rest_response>>();
    auto future = promise->get_future();
    asio::post(coordinator_, [api = api_, r = std::move(r), promise] {
      try {
        promise->set_value(api->handle(r));
      } catch (const std::exception& e) {
        promise->set_value(error_response(500, std::string("internal error: ") + e.what()));
      }
    });
    rest_response out;
    if (future.wait_for(coordinator_deadline) == std::future_status::ready)
      out = future.get();
    else
      out = error_response(503, "the coordinator did not answer in time");
    res.status = out.status;
    res.set_content(out.body, out.content_type.c_str());
  };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  server_->Patch(".*", handler);
  server_->Put(".*", handler);
  server_->Delete(".*", handler);
  int bound = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound < 0) return -1;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return bound;
}

void rest_server::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace snapflow::rest
