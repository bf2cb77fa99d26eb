#include "cmd/cli/rest_client.hpp"

#include <httplib.h>

namespace snapflow::cli {

rest_client::rest_client(std::string address) {
  if (address.rfind("http://", 0) == 0) address = address.substr(7);
  while (!address.empty() && address.back() == '/') address.pop_back();
  auto colon = address.rfind(':');
  if (colon != std::string::npos) {
    host_ = address.substr(0, colon);
    try {
      port_ = std::stoi(address.substr(colon + 1));
    } catch (...) {
      port_ = -1;
    }
  } else {
    host_ = address;
  }
}

result<nlohmann::json> rest_client::get(const std::string& path) const {
  return call("GET", path, {}, {});
}
result<nlohmann::json> rest_client::post(const std::string& path, const std::string& body,
                                         const std::string& content_type) const {
  return call("POST", path, body, content_type);
}
result<nlohmann::json> rest_client::patch(const std::string& path, const std::string& body) const {
  return call("PATCH", path, body, "application/json");
}

result<nlohmann::json> rest_client::call(const std::string& method, const std::string& path,
                                         const std::string& body,
                                         const std::string& content_type) const {
  if (port_ <= 0 || port_ > 65535 || host_.empty())
    return error{"invalid coordinator address '" + host_ + ":" + std::to_string(port_) +
                 "' (expected host:port)"};
  httplib::Client client(host_, port_);
  client.set_connection_timeout(3, 0);
  client.set_read_timeout(30, 0);
  httplib::Result r = method == "GET"    ? client.Get(path.c_str())
                      : method == "POST" ? client.Post(path.c_str(), body, content_type.c_str())
                                         : client.Patch(path.c_str(), body, content_type.c_str());
  if (!r)
    return error{"no coordinator answering at " + host_ + ":" + std::to_string(port_) + " (" +
                 httplib::to_string(r.error()) + ")"};
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (r->status >= 400) {
    if (!j.is_discarded() && j.contains("errors") && j["errors"].is_array() && !j["errors"].empty())
      return error{j["errors"][0].get<std::string>()};
    return error{"the coordinator answered HTTP " + std::to_string(r->status)};
  }
  if (j.is_discarded()) return nlohmann::json(r->body);  // e.g. /metrics: plain text
  return j;
}

}  // namespace snapflow::cli
