#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace snapflow {

// Who owns the snapshot (a savepoint, or a retained checkpoint of another job) a job is
// submitted from (Flink's RecoveryClaimMode):
// - no_claim: the snapshot stays the user's. The job reads it, never modifies or deletes any of
//   its files, and takes its first checkpoint in full, so that the snapshot may be deleted once
//   that checkpoint completed.
// - claim: the job takes the snapshot over as its own oldest checkpoint: restored from until
//   newer ones exist, then subsumed and deleted like any of its checkpoints. The snapshot's
//   folder is moved into the job's (snapshot_adoption.hpp); nobody else may use it afterwards.
enum class recovery_claim_mode : std::uint8_t { no_claim, claim };

// The REST spelling: "CLAIM" or "NO_CLAIM".
inline std::string_view to_string(recovery_claim_mode mode) {
  return mode == recovery_claim_mode::claim ? "CLAIM" : "NO_CLAIM";
}

// "CLAIM" or "NO_CLAIM" in any case; "no-claim" too (the CLI's spelling). Nothing otherwise.
inline std::optional<recovery_claim_mode> parse_recovery_claim_mode(std::string_view text) {
  std::string upper(text);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) {
    return c == '-' ? '_' : static_cast<char>(std::toupper(c));
  });
  if (upper == "CLAIM") return recovery_claim_mode::claim;
  if (upper == "NO_CLAIM") return recovery_claim_mode::no_claim;
  return std::nullopt;
}

}  // namespace snapflow
