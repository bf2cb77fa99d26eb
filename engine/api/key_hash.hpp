#pragma once

#include <cstdint>
#include <string_view>

#include "engine/api/codec.hpp"

namespace snapflow::api {

// The record.key of a typed key: a fixed 64-bit hash of the key's msgpack bytes, the same in
// every process, build and platform (so a restored job finds its state in the same key group,
// and a worker of another build agrees with the one that wrote the checkpoint). std::hash
// promises none of that.
//
// The function: 64-bit FNV-1a over the bytes (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3), then the 64-bit finalizer of MurmurHash3 (fmix64) so that keys differing in
// their last byte spread over all bits. Changing it moves every key to another key group:
// existing checkpoints would no longer restore.
std::uint64_t key_hash(std::string_view encoded_key);

template <typename K>
std::uint64_t hash_of_key(const K& key) {
  return key_hash(encode(key));
}

}  // namespace snapflow::api
