#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "graph/result.hpp"

namespace snapflow::cli {

// A thin client of the coordinator's REST API. Every call returns the parsed JSON body or an
// error that says what went wrong in words a user can act on (no coordinator at that address,
// no such job, the coordinator's own error message).
class rest_client {
 public:
  // `address` is host:port or http://host:port.
  explicit rest_client(std::string address);

  result<nlohmann::json> get(const std::string& path) const;
  result<nlohmann::json> post(const std::string& path, const std::string& body,
                              const std::string& content_type = "application/json") const;
  result<nlohmann::json> patch(const std::string& path, const std::string& body = {}) const;

  const std::string& address() const { return host_; }
  int port() const { return port_; }

 private:
  result<nlohmann::json> call(const std::string& method, const std::string& path,
                              const std::string& body, const std::string& content_type) const;

  std::string host_;
  int port_ = 8081;
};

}  // namespace snapflow::cli
