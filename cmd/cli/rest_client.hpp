#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.hpp"

namespace snapflow::cli {

// How the CLI reaches a coordinator's REST API beyond its address.
struct rest_access {
  std::string token;    // sent as `Authorization: Bearer` when not empty
  std::string ca_cert;  // PEM file of the CA (or self-signed cert) trusted for https://
};

// A thin client of the coordinator's REST API. Every call returns the parsed JSON body or an
// error that says what went wrong in words a user can act on (no coordinator at that address,
// no such job, a missing token, the coordinator's own error message).
class rest_client {
 public:
  // `address` is host:port, http://host:port or https://host:port.
  explicit rest_client(std::string address, rest_access access = {});

  result<nlohmann::json> get(const std::string& path) const;
  result<nlohmann::json> post(const std::string& path, const std::string& body,
                              const std::string& content_type = "application/json") const;
  result<nlohmann::json> patch(const std::string& path, const std::string& body = {}) const;

  const std::string& address() const { return host_; }
  int port() const { return port_; }

 private:
  result<nlohmann::json> call(const std::string& method, const std::string& path,
                              const std::string& body, const std::string& content_type) const;

  bool https_ = false;
  std::string host_;
  int port_ = 8081;
  rest_access access_;
};

// `value` as one query parameter value: every byte but unreserved ones percent-encoded, so a
// path with spaces, '&' or '#' arrives as it was typed.
std::string query_value(std::string_view value);

// The token in `file` (surrounding whitespace dropped); an error when unreadable or empty.
result<std::string> read_rest_token_file(const std::string& file);

}  // namespace snapflow::cli
