#include "transport/rest/rest_server.hpp"

#include <chrono>
#include <future>
#include <utility>

#include <asio/post.hpp>
#include <httplib.h>

namespace snapflow::rest {

namespace {
constexpr auto coordinator_deadline = std::chrono::seconds(10);

bool reads_only(const std::string& method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS";
}
}  // namespace

rest_server::rest_server(asio::any_io_executor coordinator,
                         std::shared_ptr<coordinator_rest_api> api, rest_server_options options)
    : coordinator_(std::move(coordinator)), api_(std::move(api)), options_(std::move(options)),
      http_(options_.limits, options_.tls) {}

rest_server::~rest_server() { stop(); }

bool rest_server::unauthorized(const httplib::Request& req, httplib::Response& res) const {
  if (!options_.token || reads_only(req.method)) return false;
  if (options_.token->authorizes(req.get_header_value("Authorization"))) return false;
  const bool presented = req.has_header("Authorization");
  res.status = 401;
  res.set_header("WWW-Authenticate",
                 presented ? "Bearer error=\"invalid_token\"" : "Bearer realm=\"snapflow\"");
  const auto body = error_response(
      401, presented ? "the bearer token is not the coordinator's REST token"
                     : "this call changes the coordinator: send Authorization: Bearer <token> "
                       "(the coordinator's --rest-token-file)");
  res.set_content(body.body, body.content_type.c_str());
  return true;
}

result<int> rest_server::start(const std::string& host, int port) {
  http_.set_guard([this](const httplib::Request& req, httplib::Response& res) {
    return unauthorized(req, res);
  });
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
      // Set once: by the answer, or by the 500 when serving threw before answering.
      auto answered = std::make_shared<bool>(false);
      try {
        api->serve(r, [promise, answered](rest_response out) {
          if (std::exchange(*answered, true)) return;
          promise->set_value(std::move(out));
        });
      } catch (const std::exception& e) {
        if (!std::exchange(*answered, true))
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
  auto& routes = http_.routes();
  routes.Get(".*", handler);
  routes.Post(".*", handler);
  routes.Patch(".*", handler);
  routes.Put(".*", handler);
  routes.Delete(".*", handler);
  return http_.start(host, port);
}

void rest_server::stop() { http_.stop(); }

}  // namespace snapflow::rest
