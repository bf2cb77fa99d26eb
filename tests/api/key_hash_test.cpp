// The key hash is part of the checkpoint format (it decides key groups): its values are fixed.
#include <catch2/catch.hpp>

#include "engine/api/key_hash.hpp"

using namespace snapflow::api;

TEST_CASE("key hash: FNV-1a 64 then fmix64, fixed values") {
  CHECK(key_hash("") == 0xefd01f60ba992926ULL);
  CHECK(key_hash(std::string_view("\x00", 1)) == 0xb9034ad37056f5fbULL);
  CHECK(key_hash("\x2a") == 0x1d273896e8641a1dULL);
  CHECK(key_hash("\xa6user-1") == 0xda8d60e110bf0821ULL);
}

TEST_CASE("key hash: of a typed key is the hash of its msgpack bytes") {
  CHECK(hash_of_key(42) == 0x1d273896e8641a1dULL);
  CHECK(hash_of_key(std::string("user-1")) == 0xda8d60e110bf0821ULL);
  CHECK(hash_of_key(std::string("a")) == 0xd3f9521e1c1c2262ULL);
  // Same value, different msgpack type, different key.
  CHECK(hash_of_key(std::string("42")) != hash_of_key(42));
}
