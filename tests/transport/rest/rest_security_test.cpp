// The REST server under hostile clients, over loopback: the bearer token on mutating calls,
// HTTPS, body limits answered before the body, slow-sending connections and the connection cap.
#include <catch2/catch.hpp>

#include <fstream>
#include <random>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <httplib.h>

#include "engine/runtime/task_executor.hpp"
#include "tests/engine/test_gateway.hpp"
#include "tests/transport/rest/raw_connection.hpp"
#include "tests/transport/rest/self_signed_cert.hpp"
#include "transport/rest/rest_server.hpp"

using namespace snapflow;
using namespace snapflow::rest;
using snapflow::testing::raw_connection;
using nlohmann::json;

namespace {

class null_deployer : public task_deployment_gateway {
 public:
  void deploy(const worker_id&, const task_deployment_descriptor&) override {}
  void cancel(const worker_id&, const job_id&, const execution_attempt_id&) override {}
};

const char* job_text = R"(
[job]
name = "secure"
parallelism = 1

[[operator]]
uid = "src"
kind = "sequence_source"
params = { count = 10 }

[[operator]]
uid = "sink"
kind = "print_sink"
input = "src"
)";

// A coordinator's API on a running io_context, served by rest_server with `options`.
struct served {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("snapflow-rest-sec-" + std::to_string(std::random_device{}()));
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  std::shared_ptr<dispatcher> jobs;
  std::shared_ptr<coordinator_rest_api> api;
  std::unique_ptr<rest_server> server;
  std::thread coordinator;
  int port = 0;

  explicit served(rest_server_options options = {}) {
    std::filesystem::create_directories(dir);
    auto workers = std::make_shared<worker_registry>();
    jobs = std::make_shared<dispatcher>(io.get_executor(), workers,
                                        std::make_shared<null_deployer>(),
                                        std::make_shared<test::recording_gateway>(),
                                        dispatcher::options{dir / "state", io.get_executor(), {}});
    api = std::make_shared<coordinator_rest_api>(jobs);
    server = std::make_unique<rest_server>(io.get_executor(), api, std::move(options));
    coordinator = std::thread([this] { io.run(); });
    auto started = server->start("127.0.0.1", 0);
    REQUIRE(started);
    port = *started;
  }
  ~served() {
    server->stop();
    guard.reset();
    io.stop();
    coordinator.join();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    return c;
  }
};

rest_server_options with_token(const std::string& token) {
  rest_server_options o;
  o.token = bearer_token(token);
  return o;
}

bool eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 200; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

TEST_CASE("REST token: a mutating call without a token is 401 with WWW-Authenticate: Bearer") {
  served s(with_token("s3cret-token"));
  auto c = s.client();
  auto r = c.Post("/jobs", job_text, "application/toml");
  REQUIRE(r);
  CHECK(r->status == 401);
  CHECK(r->get_header_value("WWW-Authenticate").rfind("Bearer", 0) == 0);
  auto patch = c.Patch("/jobs/x/checkpoints/config", "{\"interval\":5}", "application/json");
  REQUIRE(patch);
  CHECK(patch->status == 401);
  auto del = c.Delete("/jobs/x");
  REQUIRE(del);
  CHECK(del->status == 401);
  CHECK(json::parse(s.client().Get("/jobs")->body)["jobs"].empty());
}

TEST_CASE("REST token: a wrong token is 401, the right one is accepted") {
  served s(with_token("s3cret-token"));
  auto c = s.client();
  c.set_bearer_token_auth("s3cret-tokeN");
  auto wrong = c.Post("/jobs", job_text, "application/toml");
  REQUIRE(wrong);
  CHECK(wrong->status == 401);
  CHECK(wrong->get_header_value("WWW-Authenticate").rfind("Bearer", 0) == 0);
  c.set_bearer_token_auth("s3cret-token-and-more");
  CHECK(c.Post("/jobs", job_text, "application/toml")->status == 401);
  c.set_bearer_token_auth("s3cret-token");
  auto right = c.Post("/jobs", job_text, "application/toml");
  REQUIRE(right);
  CHECK(right->status == 202);
  CHECK(json::parse(right->body).contains("jobid"));
}

TEST_CASE("REST token: GETs stay open without a token") {
  served s(with_token("s3cret-token"));
  auto c = s.client();
  for (const char* path : {"/overview", "/jobs", "/metrics", "/"}) {
    auto r = c.Get(path);
    REQUIRE(r);
    CHECK(r->status == 200);
  }
}

TEST_CASE("REST token file: trimmed; missing, empty or with spaces inside refused") {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("snapflow-token-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "good") << "  abc.DEF-123\n";
  std::ofstream(dir / "empty") << " \n\n";
  std::ofstream(dir / "spaced") << "abc def\n";
  auto good = bearer_token::read_file(dir / "good");
  REQUIRE(good);
  CHECK(good->value() == "abc.DEF-123");
  CHECK(good->authorizes("Bearer abc.DEF-123"));
  CHECK(good->authorizes("bearer abc.DEF-123"));
  CHECK_FALSE(good->authorizes("Basic abc.DEF-123"));
  CHECK_FALSE(good->authorizes("Bearer abc.DEF-12"));
  CHECK_FALSE(good->authorizes(""));
  CHECK_FALSE(bearer_token::read_file(dir / "missing"));
  auto empty = bearer_token::read_file(dir / "empty");
  REQUIRE_FALSE(empty);
  CHECK_THAT(empty.err().message, Catch::Contains("empty"));
  CHECK_FALSE(bearer_token::read_file(dir / "spaced"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("REST TLS: an HTTPS round trip with a self-signed certificate") {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("snapflow-tls-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  const auto files = testing::write_self_signed_cert(dir);
  auto tls = tls_context::load(files.cert, files.key);
  REQUIRE(tls);
  rest_server_options o = with_token("tls-token");
  o.tls = *tls;
  {
    served s(std::move(o));
    httplib::Client c("https://127.0.0.1:" + std::to_string(s.port));
    c.set_ca_cert_path(files.cert.c_str());
    c.enable_server_certificate_verification(true);
    c.set_read_timeout(10, 0);
    auto overview = c.Get("/overview");
    REQUIRE(overview);
    CHECK(overview->status == 200);
    CHECK(json::parse(overview->body).contains("taskmanagers"));
    c.set_bearer_token_auth("tls-token");
    auto submitted = c.Post("/jobs", job_text, "application/toml");
    REQUIRE(submitted);
    CHECK(submitted->status == 202);
    // Plain HTTP to the HTTPS port gets no answer, and the server goes on serving.
    auto plain = s.client();
    plain.set_read_timeout(3, 0);
    auto r = plain.Get("/overview");
    CHECK((!r || r->status != 200));
    CHECK(c.Get("/jobs")->status == 200);
    // Without trusting the certificate the client refuses the server.
    httplib::Client untrusting("https://127.0.0.1:" + std::to_string(s.port));
    untrusting.enable_server_certificate_verification(true);
    untrusting.set_ca_cert_path((dir / "none.pem").c_str());
    CHECK_FALSE(untrusting.Get("/overview"));
  }
  std::ofstream(dir / "garbage.pem") << "not a certificate\n";
  auto bad = tls_context::load(dir / "garbage.pem", files.key);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.err().message, Catch::Contains("garbage.pem"));
  auto missing_key = tls_context::load(files.cert, dir / "missing.key");
  REQUIRE_FALSE(missing_key);
  CHECK_THAT(missing_key.err().message, Catch::Contains("missing.key"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("REST limits: an oversized Content-Length gets 413 without the body being sent") {
  served s;
  raw_connection c(s.port);
  c.send_text("POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n");
  bool closed = false;
  const std::string answer = c.read_all(std::chrono::seconds(10), &closed);
  CHECK(answer.rfind("HTTP/1.1 413", 0) == 0);
  CHECK(closed);  // the unsent body is never taken for a request
  CHECK(s.client().Get("/overview")->status == 200);
}

TEST_CASE("REST limits: chunked bodies and POSTs without Content-Length get 411") {
  served s;
  {
    raw_connection c(s.port);
    c.send_text("POST /jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    const std::string answer = c.read_all(std::chrono::seconds(10));
    CHECK(answer.rfind("HTTP/1.1 411", 0) == 0);
  }
  {
    raw_connection c(s.port);
    c.send_text("PATCH /jobs/x HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string answer = c.read_all(std::chrono::seconds(10));
    CHECK(answer.rfind("HTTP/1.1 411", 0) == 0);
  }
  {
    raw_connection c(s.port);
    c.send_text("POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n");
    CHECK(c.read_all(std::chrono::seconds(10)).rfind("HTTP/1.1 400", 0) == 0);
  }
}

TEST_CASE("REST limits: GET /overview is answered with 64 slowloris connections open") {
  served s;
  std::vector<std::unique_ptr<raw_connection>> hostile;
  for (int i = 0; i < 64; ++i) {
    hostile.push_back(std::make_unique<raw_connection>(s.port));
    hostile.back()->send_text("GET /overview HTTP/1.1\r\nHost: x\r\nX-Slow: a");
  }
  REQUIRE(eventually([&] { return s.server->open_connections() >= 64; }));
  for (int i = 0; i < 3; ++i) {
    auto r = s.client().Get("/overview");
    REQUIRE(r);
    CHECK(r->status == 200);
  }
}

TEST_CASE("REST limits: connections over the cap are closed at once, freed slots serve again") {
  rest_server_options o;
  o.limits.max_connections = 8;
  served s(o);
  CHECK(http_limits{}.max_connections == 128);
  std::vector<std::unique_ptr<raw_connection>> hostile;
  for (int i = 0; i < 8; ++i) {
    hostile.push_back(std::make_unique<raw_connection>(s.port));
    hostile.back()->send_text("GET /overview HTTP/1.1\r\nHost: x\r\n");
  }
  REQUIRE(eventually([&] { return s.server->open_connections() == 8; }));
  raw_connection extra(s.port);
  bool closed = false;
  const std::string answer = extra.read_all(std::chrono::seconds(10), &closed);
  CHECK(closed);
  CHECK(answer.empty());
  hostile.clear();
  REQUIRE(eventually([&] { return s.server->open_connections() == 0; }));
  CHECK(s.client().Get("/overview")->status == 200);
}

TEST_CASE("REST limits: a request that does not arrive in time, or an idle connection, is ended") {
  rest_server_options o;
  o.limits.request_timeout = std::chrono::milliseconds(300);
  o.limits.idle_timeout = std::chrono::milliseconds(300);
  served s(o);
  raw_connection slow(s.port);
  slow.send_text("GET /overview HTTP/1.1\r\n");
  bool closed = false;
  slow.read_all(std::chrono::seconds(20), &closed);
  CHECK(closed);
  raw_connection idle(s.port);
  idle.read_all(std::chrono::seconds(20), &closed);
  CHECK(closed);
  // A keep-alive connection serves a request, then ends when idle.
  raw_connection kept(s.port);
  kept.send_text("GET /overview HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string answer = kept.read_all(std::chrono::seconds(20), &closed);
  CHECK(answer.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(closed);
}

TEST_CASE("web page: the checkpoint-now button sends the token kept in sessionStorage") {
  const std::string& page = web_page();
  CHECK_THAT(page, Catch::Contains("id=\"checkpoint-now\""));
  CHECK_THAT(page, Catch::Contains("sessionStorage.getItem(tokenKey)"));
  CHECK_THAT(page, Catch::Contains("h.Authorization='Bearer '+t"));
  CHECK_THAT(page, Catch::Contains("r.status===401"));
}
