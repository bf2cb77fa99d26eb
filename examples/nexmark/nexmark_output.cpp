#include "examples/nexmark/nexmark_output.hpp"

#include <fstream>

namespace snapflow::nexmark {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xf]);
  }
  return out;
}

result<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return error{"hex of odd length " + std::to_string(hex.size())};
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_digit(hex[i]);
    const int lo = hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return error{"not a hex digit at " + std::to_string(i)};
    out.push_back(static_cast<char>((hi << 4) | lo));
  }
  return out;
}

result<std::vector<std::string>> read_output_payloads(const std::filesystem::path& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!std::filesystem::exists(folder, ec)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || !entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    if (!in) return error{"cannot read " + entry.path().string()};
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
      std::size_t at = 0;
      for (int comma = 0; comma < 3 && at != std::string::npos; ++comma) {
        at = line.find(',', at);
        if (at != std::string::npos) ++at;
      }
      if (at == std::string::npos)
        return error{entry.path().string() + ":" + std::to_string(number) +
                     ": not key,seq,value,payload"};
      out.push_back(line.substr(at));
    }
  }
  if (ec) return error{"cannot list " + folder.string() + ": " + ec.message()};
  return out;
}

}  // namespace snapflow::nexmark
