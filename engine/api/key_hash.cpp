#include "engine/api/key_hash.hpp"

namespace snapflow::api {

namespace {

constexpr std::uint64_t fnv_offset_basis = 0xcbf29ce484222325ULL;
constexpr std::uint64_t fnv_prime = 0x100000001b3ULL;

std::uint64_t fmix64(std::uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

}  // namespace

std::uint64_t key_hash(std::string_view encoded_key) {
  std::uint64_t h = fnv_offset_basis;
  for (unsigned char c : encoded_key) {
    h ^= c;
    h *= fnv_prime;
  }
  return fmix64(h);
}

}  // namespace snapflow::api
