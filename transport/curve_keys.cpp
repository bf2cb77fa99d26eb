#include "transport/curve_keys.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace snapflow::transport {

namespace {

constexpr std::uintmax_t max_key_file_bytes = 1 << 20;

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

result<std::string> read_small_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return error{"cannot read " + path.string() + ": " + ec.message()};
  if (size > max_key_file_bytes) return error{path.string() + " is too large for a key file"};
  std::ifstream in(path, std::ios::binary);
  if (!in) return error{"cannot read " + path.string()};
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (!in) return error{"cannot read " + path.string()};
  return text;
}

std::error_code set_option(zmq::socket_ref socket, int option, const void* value,
                           std::size_t size) {
  if (zmq_setsockopt(socket.handle(), option, value, size) != 0)
    return {zmq_errno(), std::generic_category()};
  return {};
}

std::error_code set_key(zmq::socket_ref socket, int option, const std::string& z85) {
  // A Z85 key is set as its 40 characters plus the terminating zero.
  return set_option(socket, option, z85.c_str(), z85.size() + 1);
}

}  // namespace

bool curve_available() { return zmq_has("curve") != 0; }

bool is_z85_key(std::string_view text) {
  if (text.size() != z85_key_chars) return false;
  std::array<std::uint8_t, 32> bytes{};
  const std::string copy(text);
  return zmq_z85_decode(bytes.data(), copy.c_str()) != nullptr;
}

result<curve_key_pair> generate_curve_key_pair() {
  if (!curve_available()) return error{"this libzmq was built without CURVE support"};
  std::array<char, z85_key_chars + 1> public_key{};
  std::array<char, z85_key_chars + 1> secret_key{};
  if (zmq_curve_keypair(public_key.data(), secret_key.data()) != 0)
    return error{std::string("zmq_curve_keypair failed: ") + zmq_strerror(zmq_errno())};
  return curve_key_pair{public_key.data(), secret_key.data()};
}

result<std::string> curve_public_key(const std::string& secret_key) {
  if (!curve_available()) return error{"this libzmq was built without CURVE support"};
  if (!is_z85_key(secret_key)) return error{"not a Z85 CURVE key (40 characters)"};
  std::array<char, z85_key_chars + 1> public_key{};
  if (zmq_curve_public(public_key.data(), secret_key.c_str()) != 0)
    return error{std::string("zmq_curve_public failed: ") + zmq_strerror(zmq_errno())};
  return std::string(public_key.data());
}

result<void> write_key_pair(const std::string& prefix, const curve_key_pair& keys) {
  {
    std::ofstream pub(prefix + ".public", std::ios::trunc);
    pub << keys.public_key << "\n";
    if (!pub) return error{"cannot write " + prefix + ".public"};
  }
  const std::string path = prefix + ".secret";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return error{"cannot write " + path + ": " + std::strerror(errno)};
  const std::string line = keys.secret_key + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const bool closed = ::close(fd) == 0;
  if (!ok || !closed) return error{"cannot write " + path};
  return success();
}

result<std::string> read_key_file(const std::filesystem::path& path) {
  auto text = read_small_file(path);
  if (!text) return text.err();
  std::size_t start = 0;
  while (start < text->size()) {
    auto end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    const std::string line = trim(std::string_view(*text).substr(start, end - start));
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    if (!is_z85_key(line))
      return error{path.string() + ": not a Z85 CURVE key (40 characters expected)"};
    return line;
  }
  return error{path.string() + ": no key in the file"};
}

result<curve_key_pair> read_secret_key_file(const std::filesystem::path& path) {
  auto secret = read_key_file(path);
  if (!secret) return secret.err();
  auto pub = curve_public_key(*secret);
  if (!pub) return error{path.string() + ": " + pub.err().message};
  return curve_key_pair{*pub, *secret};
}

result<curve_allowlist> read_allowlist(const std::filesystem::path& path) {
  auto text = read_small_file(path);
  if (!text) return text.err();
  curve_allowlist keys;
  std::size_t start = 0;
  int line_number = 0;
  while (start < text->size()) {
    auto end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    const std::string line = trim(std::string_view(*text).substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    const auto where = [&] { return path.string() + ":" + std::to_string(line_number) + ": "; };
    const std::size_t space = line.find_first_of(" \t");
    const std::string key = line.substr(0, space);
    const std::string worker =
        space == std::string::npos ? std::string() : trim(std::string_view(line).substr(space));
    if (!is_z85_key(key))
      return error{where() + "not a Z85 CURVE public key (40 characters expected)"};
    if (worker.find_first_of(" \t") != std::string::npos || worker.size() > 255)
      return error{where() + "expected a key and at most one worker id (1 to 255 characters)"};
    if (auto [it, inserted] = keys.emplace(key, worker); !inserted && it->second != worker)
      return error{where() + "the key is listed twice with different worker ids ('" +
                   it->second + "' and '" + worker + "')"};
  }
  return keys;
}

std::error_code apply_curve_server(zmq::socket_ref socket, const curve_server_config& config) {
  if (!curve_available()) return std::make_error_code(std::errc::function_not_supported);
  const int on = 1;
  if (auto e = set_option(socket, ZMQ_CURVE_SERVER, &on, sizeof on)) return e;
  if (auto e = set_key(socket, ZMQ_CURVE_SECRETKEY, config.keys.secret_key)) return e;
  // Every connection is checked by the ZAP handler (zap_handler), which knows the allowlist.
  return set_option(socket, ZMQ_ZAP_DOMAIN, zap_domain.data(), zap_domain.size());
}

std::error_code apply_curve_client(zmq::socket_ref socket, const curve_client_config& config) {
  if (!curve_available()) return std::make_error_code(std::errc::function_not_supported);
  if (auto e = set_key(socket, ZMQ_CURVE_SERVERKEY, config.server_public_key)) return e;
  if (auto e = set_key(socket, ZMQ_CURVE_PUBLICKEY, config.keys.public_key)) return e;
  return set_key(socket, ZMQ_CURVE_SECRETKEY, config.keys.secret_key);
}

}  // namespace snapflow::transport
