// What the rows of a fused step are (every family's step programs).
#pragma once

namespace md {

// Independent rows: B different sequences, one token each at its own position. Verify rows: B
// consecutive tokens of one sequence, each row seeing the rows before it, the sequence's state
// kept so that any prefix can be committed (speculative decoding: Qwen3.8 snapshots its
// delta-net state after every row; attention-only families just move the position back).
enum class RowMode { kIndependent, kVerify };

}  // namespace md
