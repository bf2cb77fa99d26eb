#include "transport/rest/bearer_token.hpp"

#include <array>
#include <cctype>
#include <fstream>
#include <sstream>

#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace snapflow::rest {

namespace {

constexpr std::size_t max_token_file_bytes = 4096;

std::array<unsigned char, SHA256_DIGEST_LENGTH> digest(std::string_view text) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> out{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), out.data());
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

result<bearer_token> bearer_token::read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return error{"cannot read the REST token file " + file.string()};
  std::string text(max_token_file_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return error{"cannot read the REST token file " + file.string()};
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > max_token_file_bytes)
    return error{"the REST token file " + file.string() + " is larger than 4 KiB"};
  std::size_t begin = 0, end = text.size();
  while (begin < end && is_space(text[begin])) ++begin;
  while (end > begin && is_space(text[end - 1])) --end;
  text = text.substr(begin, end - begin);
  if (text.empty()) return error{"the REST token file " + file.string() + " is empty"};
  for (unsigned char c : text)
    if (c <= 0x20 || c == 0x7f)
      return error{"the REST token in " + file.string() +
                   " has spaces or control characters; use one line of printable characters"};
  return bearer_token(std::move(text));
}

bool bearer_token::authorizes(std::string_view header) const {
  constexpr std::string_view scheme = "Bearer ";
  // The scheme name is case-insensitive (RFC 9110); it is not secret.
  if (header.size() < scheme.size()) return false;
  for (std::size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(header[i])) !=
        std::tolower(static_cast<unsigned char>(scheme[i])))
      return false;
  std::string_view presented = header.substr(scheme.size());
  while (!presented.empty() && presented.front() == ' ') presented.remove_prefix(1);
  while (!presented.empty() && presented.back() == ' ') presented.remove_suffix(1);
  const auto want = digest(token_);
  const auto got = digest(presented);
  return CRYPTO_memcmp(want.data(), got.data(), want.size()) == 0;
}

}  // namespace snapflow::rest
