#pragma once

#include <filesystem>

namespace snapflow::testing {

struct cert_files {
  std::filesystem::path cert;
  std::filesystem::path key;
};

// Writes a fresh self-signed certificate for 127.0.0.1 and localhost (EC P-256, one day) and
// its key into `folder` as PEM, made with OpenSSL's C API. Throws std::runtime_error on failure.
cert_files write_self_signed_cert(const std::filesystem::path& folder);

}  // namespace snapflow::testing
