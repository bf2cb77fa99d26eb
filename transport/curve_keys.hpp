#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <system_error>

#include <zmq.hpp>

#include "common/result.hpp"

// ZeroMQ CURVE keys as snapflow stores them: Z85 text (40 characters), one key per file, the
// same layout `snapflow keygen --out PREFIX` writes: PREFIX.public and PREFIX.secret (mode
// 0600). An allowlist is a text file with one public key per line, optionally followed by the
// worker id the key is bound to (`KEY` or `KEY WORKER-ID`); blank lines and lines starting with
// '#' are skipped. A bound key can only register that worker id.
namespace snapflow::transport {

inline constexpr std::size_t z85_key_chars = 40;

struct curve_key_pair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85

  bool operator==(const curve_key_pair&) const = default;
};

// The public keys the coordinator lets in, each with the worker id it is bound to (empty: the
// key may register any worker id).
using curve_allowlist = std::map<std::string, std::string>;

// The coordinator side: its key pair and the public keys of the workers it lets in.
struct curve_server_config {
  curve_key_pair keys;
  curve_allowlist allowed_clients;
};

// The worker side: its key pair and the coordinator's public key, which it verifies.
struct curve_client_config {
  curve_key_pair keys;
  std::string server_public_key;
};

// Whether this libzmq was built with CURVE (zmq_has("curve")); Debian's is.
bool curve_available();
// A fresh key pair (zmq_curve_keypair). Fails when CURVE is not available.
result<curve_key_pair> generate_curve_key_pair();
// The public key that belongs to a secret key (zmq_curve_public).
result<std::string> curve_public_key(const std::string& secret_key);
bool is_z85_key(std::string_view text);

// Writes PREFIX.public and PREFIX.secret (readable by the owner only).
result<void> write_key_pair(const std::string& prefix, const curve_key_pair& keys);
// One key from a file: the first line that is not blank or a comment, trimmed.
result<std::string> read_key_file(const std::filesystem::path& path);
// A secret key file, with the public key derived from it.
result<curve_key_pair> read_secret_key_file(const std::filesystem::path& path);
result<curve_allowlist> read_allowlist(const std::filesystem::path& path);

// Socket options for either side, set before bind/connect. CURVE must be available.
std::error_code apply_curve_server(zmq::socket_ref socket, const curve_server_config& config);
std::error_code apply_curve_client(zmq::socket_ref socket, const curve_client_config& config);

// The ZAP domain snapflow's CURVE sockets ask about.
inline constexpr std::string_view zap_domain = "snapflow";

}  // namespace snapflow::transport
