// What the rows of a fused step are (every family's step programs).
#pragma once

#include <cstdint>

namespace md {

// Independent rows: B different sequences, one token each at its own position. Verify rows: B
// consecutive tokens of one sequence, each row seeing the rows before it, the sequence's state
// kept so that any prefix can be committed (speculative decoding: Qwen3.8 snapshots its
// delta-net state after every row; attention-only families just move the position back).
// Prefill rows: a prompt chunk, many consecutive tokens of one sequence, each row seeing the rows
// before it, the sequence simply advanced past them (no snapshots); only the rows whose logits
// are asked for go through the lm_head.
enum class RowMode { kIndependent, kVerify, kPrefill };

// The most rows a prefill program takes (ModelRunOptions::prefill_rows is at most this).
inline constexpr int64_t kMaxPrefillRows = 1024;

}  // namespace md
