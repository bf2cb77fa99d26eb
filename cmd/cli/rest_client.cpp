#include "cmd/cli/rest_client.hpp"

#include <cctype>
#include <fstream>
#include <sstream>

#include <httplib.h>

namespace snapflow::cli {

std::string query_value(std::string_view value) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += c;
    } else {
      out += '%';
      out += hex[byte >> 4];
      out += hex[byte & 0xF];
    }
  }
  return out;
}

result<std::string> read_rest_token_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return error{"cannot read the REST token file " + file};
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const auto first = token.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return error{"the REST token file " + file + " is empty"};
  token = token.substr(first, token.find_last_not_of(" \t\r\n") - first + 1);
  return token;
}

rest_client::rest_client(std::string address, rest_access access) : access_(std::move(access)) {
  if (address.rfind("http://", 0) == 0) {
    address = address.substr(7);
  } else if (address.rfind("https://", 0) == 0) {
    address = address.substr(8);
    https_ = true;
  }
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
  const std::string where = (https_ ? "https://" : "http://") + host_ + ":" + std::to_string(port_);
  httplib::Client client(where);
  if (https_) {
    if (!access_.ca_cert.empty()) client.set_ca_cert_path(access_.ca_cert.c_str());
    client.enable_server_certificate_verification(true);
  }
  if (!access_.token.empty()) client.set_bearer_token_auth(access_.token.c_str());
  client.set_connection_timeout(3, 0);
  client.set_read_timeout(30, 0);
  httplib::Result r = method == "GET"    ? client.Get(path.c_str())
                      : method == "POST" ? client.Post(path.c_str(), body, content_type.c_str())
                                         : client.Patch(path.c_str(), body, content_type.c_str());
  if (!r) {
    if (r.error() == httplib::Error::SSLServerVerification)
      return error{"the certificate of " + where + " is not trusted: give its CA with --ca-cert"};
    return error{"no coordinator answering at " + where + " (" + httplib::to_string(r.error()) +
                 ")"};
  }
  if (r->status == 401)
    return error{access_.token.empty()
                     ? "the coordinator requires a REST token for this: give --rest-token-file "
                       "(or SNAPFLOW_REST_TOKEN_FILE)"
                     : "the coordinator refused the REST token (is it its --rest-token-file?)"};
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
