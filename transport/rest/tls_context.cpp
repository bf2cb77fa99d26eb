#include "transport/rest/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace snapflow::rest {

std::string openssl_errors(const std::string& fallback) {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out.empty() ? fallback : out;
}

result<std::shared_ptr<tls_context>> tls_context::load(const std::filesystem::path& cert_chain,
                                                        const std::filesystem::path& key) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return error{"cannot create a TLS context: " + openssl_errors("no reason")};
  std::shared_ptr<tls_context> out(new tls_context(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Non-blocking sockets: a write may be retried with a moved buffer and complete partly.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_chain.c_str()) != 1)
    return error{"cannot use the TLS certificate " + cert_chain.string() + ": " +
                 openssl_errors("not a PEM certificate")};
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1)
    return error{"cannot use the TLS private key " + key.string() + ": " +
                 openssl_errors("not a PEM private key")};
  if (SSL_CTX_check_private_key(ctx) != 1)
    return error{"the TLS private key " + key.string() + " does not belong to the certificate " +
                 cert_chain.string() + ": " + openssl_errors("mismatch")};
  return out;
}

tls_context::~tls_context() { SSL_CTX_free(ctx_); }

}  // namespace snapflow::rest
