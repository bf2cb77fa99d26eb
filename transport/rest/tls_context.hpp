#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "common/result.hpp"

struct ssl_ctx_st;

namespace snapflow::rest {

// The server side of TLS for the REST API: a certificate chain and its private key (PEM),
// checked to belong together when loaded, TLS 1.2 or newer, no renegotiation.
class tls_context {
 public:
  // An error that names the file and OpenSSL's reason when either cannot be used.
  static result<std::shared_ptr<tls_context>> load(const std::filesystem::path& cert_chain,
                                                   const std::filesystem::path& private_key);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  ssl_ctx_st* native() const { return ctx_; }

 private:
  explicit tls_context(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
};

// OpenSSL's queued errors as one line (and the queue cleared); `fallback` when there are none.
std::string openssl_errors(const std::string& fallback);

}  // namespace snapflow::rest
