#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace snapflow::rest {

// The shared secret that mutating REST calls must present as `Authorization: Bearer <token>`.
// Read from a file so it stays out of process listings and shell history.
class bearer_token {
 public:
  // The file's content without surrounding whitespace; refused when the file cannot be read,
  // is empty, or holds characters a header cannot carry (controls, spaces inside).
  static result<bearer_token> read_file(const std::filesystem::path& file);
  explicit bearer_token(std::string token) : token_(std::move(token)) {}

  // Whether an Authorization header value presents this token. Constant time in the
  // token's content: both sides are hashed and the digests compared with CRYPTO_memcmp, so
  // neither a prefix match nor the length leaks through timing.
  bool authorizes(std::string_view authorization_header) const;

  const std::string& value() const { return token_; }

 private:
  std::string token_;
};

}  // namespace snapflow::rest
