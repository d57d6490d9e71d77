// The instruction set of a step program: an opcode and plain operands (activation buffer ids,
// format-tagged weight references, tile ranges) and the producer tiles each task reads. Nothing
// here runs; the CPU interpreter (cpu_interpreter.h) gives each opcode its meaning, and a second
// executor (CUDA, later) would read the same data. See docs/ARCHITECTURE.md "Program and
// executors".
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kernels/activations.h"
#include "kernels/gated_activation.h"
#include "kernels/moe_routing.h"
#include "kernels/rope.h"
#include "kernels/top_k.h"
#include "kernels/weight_matrix.h"

namespace md::dist {
class Communicator;
}

namespace md::program {

// An activation buffer of the program (Program::buffer): f32, rows of a stated stride.
using BufferId = int32_t;
inline constexpr BufferId kNoBuffer = -1;

// Rows of one step: 1..kMaxStepRows tokens, independent sequences or verify rows of one.
inline constexpr int64_t kMaxStepRows = 8;

struct WorkerContext;

// How a norm prologue weighs the normalised rows (every RMSNorm the families use).
enum class NormKind : uint8_t {
  kNone,             // the rows are read as they are
  kBf16ZeroCentred,  // x / rms(x) · (1 + w), w bf16 (Qwen3.5 / 3.8)
  kBf16Plain,        // x / rms(x) · w, w bf16 (DFlash2, Qwen3, Llama from safetensors)
  kF32Plain,         // x / rms(x) · w, w f32 (GGUF; Muse Spark's 1 + γ formed at load)
  kUnweighted,       // x / rms(x) (Muse Spark's normed embedding)
};

// Where a row count comes from: the step's rows (Program::set_rows), or count register i >= 0 that
// the caller sets before each run (Program::set_count), e.g. a drafter's newly committed context
// rows, which vary from round to round.
using RowCount = int8_t;
inline constexpr RowCount kStepRows = -1;

// The rows a projection multiplies: rows [first_row, count) of `buffer` (row stride `stride`),
// `count` as `rows_from` says — a negative first_row counts from the end (−1: the last row only,
// as a prefill chunk's lm_head reads whatever the chunk's length) —, first normalised into the
// worker's scratch when `norm` is not kNone (once per worker and instruction, not per tile). Input
// row n (buffer row first_row + n) gives output row n. With `publish` set, the worker that runs
// task 0 also copies the normalised rows there, for a consumer that is not a tile (every worker
// normalised the same bits).
struct RowInput {
  BufferId buffer = kNoBuffer;
  int64_t stride = 0;
  int64_t first_row = 0;
  NormKind norm = NormKind::kNone;
  const void* norm_weight = nullptr;
  float eps = 0;
  RowCount rows_from = kStepRows;
  BufferId publish = kNoBuffer;
};

// A first row as a run sees it, given the input's row count this run: a negative one counts back
// from the end (and never before row 0).
constexpr int64_t resolved_first_row(int64_t first_row, int64_t count) {
  if (first_row >= 0) return first_row;
  return count + first_row > 0 ? count + first_row : 0;
}

// One task of a projection: output rows [begin, end) of `weight` for every input row n, written at
// out[n·out_stride + out_offset + r] (overwritten, or added to: a residual). With `copy_to` set,
// the finished columns are also copied to copy_to[n·copy_stride + copy_offset + r] (a drafter's
// tap of the residual stream, at no extra instruction). With `extra_out` set, the same weight
// rows also multiply the projection's extra input rows into extra_out[n·extra_stride + r] (a
// drafter's new context rows through k_proj / v_proj: the weights are streamed once for both).
// With `bias` set, bias[r] is added to each output r after the product (after the accumulation
// too: a residual projection's bias joins the stream as a second add).
struct Tile {
  kernels::WeightMatrix weight;
  int64_t begin = 0, end = 0;
  BufferId out = kNoBuffer;
  int64_t out_offset = 0, out_stride = 0;
  bool accumulate = false;
  const float* bias = nullptr;  // [weight.rows], indexed by output row
  BufferId copy_to = kNoBuffer;
  int64_t copy_offset = 0, copy_stride = 0;
  BufferId extra_out = kNoBuffer;
  int64_t extra_stride = 0;
};

// kEmbed: one task per step row: row token(n) of `table` (dequantised) into out[n].
struct EmbedOperands {
  kernels::WeightMatrix table;
  BufferId out = kNoBuffer;
};

// kRopeAngles: one task per step row: cos | sin of the row's position, [rows][rotary_dim].
struct RopeOperands {
  const kernels::Rope* rope = nullptr;
  BufferId out = kNoBuffer;
};

// kProjection: one task per tile. `extra` (optional, never normalised): a second set of input rows
// that the tiles with an extra_out also multiply.
struct ProjectionOperands {
  RowInput input;
  std::vector<Tile> tiles;
  RowInput extra;
};

// kGateUpSilu: task t multiplies gate and up tiles t (the same output rows of both matrices)
// and writes act(gate) · up over the gate tile's output (the up tile's output is its scratch);
// act is SiLU but for the rare config that names another hidden_act (or Kimi's SiTU, which
// transforms the up projection too: kernels/gated_activation.h).
struct GateUpOperands {
  RowInput input;
  std::vector<Tile> gate, up;
  kernels::GatedActivation activation = kernels::Activation::kSilu;
};

// kKvAppend: one task per KV head g: every step row's key of head g is (normalised,) rotated and
// cached with its value at the row's position. kAttention: one task per query head h, over every
// step row: the query is (normalised,) rotated, attends over positions 0..position of its KV head
// (verify rows see the earlier rows of the block: all were appended first), and is (gated). With
// `row_block` set (a prefill chunk's many rows), a task is instead one KV head g over a block of
// row_block rows, every query head of g's group: the rows' queries share each key tile's load
// (kernels::KvCache::attend of many queries), each bitwise what it gives alone; tasks are
// [row block][KV head]: the run's blocks over the first tasks, in an order whose contiguous halves
// hold equal causal work (kernels::balanced_row_block).
struct AttentionOperands {
  BufferId q = kNoBuffer, k = kNoBuffer, v = kNoBuffer, out = kNoBuffer;
  int64_t q_stride = 0, kv_stride = 0, out_stride = 0;  // per row
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  // With an output gate each query head is [q | gate] (2·head_dim wide) and o ← o · σ(gate).
  bool output_gate = false;
  // Per-head RMSNorm of q and k before RoPE (null: none), plain f32 weights (a zero-centred
  // checkpoint's 1 + w, formed at load).
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float norm_eps = 0;
  BufferId angles = kNoBuffer;  // kRopeAngles output; rope rotates q and k with them
  const kernels::Rope* rope = nullptr;
  int64_t cache_slot = 0;  // StepState::kv_cache(slot)
  int64_t row_block = 0;   // 0: a task per query head; else rows per task (see above)
  int64_t row_blocks =
      0;  // with row_block: blocks the tasks cover (the program's rows / row_block)
};

struct KvAppendOperands {
  AttentionOperands attention;
};

// kDeltaNet: one task per key head kh of a Gated DeltaNet layer (Qwen3.5 / 3.8 spec §5), over
// the step rows in order: causal conv + SiLU of the head's q, k and v channels (rolling conv
// state), L2-normalised q (scaled by 1/√dk) and k, then per value head of its group the gates
// β = σ(b), g = decay_factor·softplus(a + dt_bias), the f32 delta-rule step and the gated RMSNorm
// with z. A row of `in` is [q (key heads·dk) | k | v (value heads·dv)] — the conv channels —
// then z (value heads·dv), b and a (value heads each); a row of `out` is value heads·dv.
struct DeltaNetOperands {
  BufferId in = kNoBuffer, out = kNoBuffer;
  int64_t in_stride = 0, out_stride = 0;
  int64_t key_heads = 0, value_heads = 0, key_dim = 0, value_dim = 0, conv_kernel = 0;
  const float* conv_weight = nullptr;   // [conv channels][conv_kernel]
  const float* decay_factor = nullptr;  // [value heads], −exp(A_log)
  const float* dt_bias = nullptr;       // [value heads]
  const float* norm = nullptr;          // [value_dim], plain scale
  float norm_eps = 0;
  int64_t state_slot = 0;  // StepState::recurrent_state(slot)
  // Verify rows (all rows one sequence): the head's state before row 0 goes to snapshot 0 and
  // the state after row s to snapshot s + 1, so that any prefix can be committed. Null: no
  // snapshots (independent rows).
  float* snapshot_conv = nullptr;       // [kMaxStepRows + 1][conv channels][conv_kernel - 1]
  float* snapshot_recurrent = nullptr;  // [kMaxStepRows + 1][value heads][value_dim][key_dim]
  // Which value heads pair with key head kh: transformers' layout groups them (kh·group + m);
  // llama.cpp's GGUF tiles them (kh + m·key_heads), its converter having reordered the value
  // heads' rows, channels and columns so.
  bool tiled_value_heads = false;
  kernels::Activation conv_activation = kernels::Activation::kSilu;  // after the causal conv
  // Prefill rows (a prompt chunk of one sequence): the head's conv over all rows at once, then
  // the delta rule chunk by chunk (kernels::gated_delta_chunked with chunks of this many rows;
  // a run of one row takes the recurrence), as the reference prefill does. 0: row by row.
  int64_t chunk = 0;

  int64_t group() const { return value_heads / key_heads; }
  // The m-th value head (m < group()) of key head kh.
  int64_t value_head(int64_t kh, int64_t m) const {
    return tiled_value_heads ? kh + m * key_heads : kh * group() + m;
  }
  int64_t conv_channels() const { return 2 * key_heads * key_dim + value_heads * value_dim; }
  int64_t conv_state_floats() const { return conv_channels() * (conv_kernel - 1); }
  int64_t recurrent_floats() const { return value_heads * value_dim * key_dim; }
  int64_t z_offset() const { return conv_channels(); }
  int64_t b_offset() const { return z_offset() + value_heads * value_dim; }
  int64_t a_offset() const { return b_offset() + value_heads; }
  // Worker scratch one task needs with `rows` rows: the head's conv outputs (one row at a time,
  // or, chunked, every row's, then each value head's β and g per row).
  int64_t scratch_floats(int64_t rows) const {
    const int64_t conv_out = 2 * key_dim + group() * value_dim;
    return chunk == 0 ? conv_out : rows * (conv_out + 2 * group());
  }
};

// kNormRows: one task per row r < the rows `rows_from` counts (tasks beyond it do nothing): row r
// of `buffer` ([rows][stride], width `stride`) normalised in place.
struct NormRowsOperands {
  BufferId buffer = kNoBuffer;
  int64_t stride = 0;
  NormKind norm = NormKind::kNone;
  const void* norm_weight = nullptr;
  float eps = 0;
  RowCount rows_from = kStepRows;
};

// kBlockConv: one task per channel range [t·chunk, (t+1)·chunk) of a draft block's dynamic grouped
// causal conv (kernels/block_conv.h) over the step rows: out = conv(side, in). With `residual` set
// the range is then added into it (the sub-layer's output joins the residual stream).
struct BlockConvOperands {
  const uint16_t* base_kernel = nullptr;  // bf16 [2 sides][taps][hidden]
  BufferId coefficients = kNoBuffer;      // [rows][2][taps][groups]
  int64_t hidden = 0, taps = 0, group_size = 0;
  int side = 0;
  int64_t chunk = 0;
  BufferId in = kNoBuffer, out = kNoBuffer, residual = kNoBuffer;  // [rows][hidden] each
};

// kWindowAttention: one task per KV head g of a draft block that attends bidirectionally within a
// sliding window (DFlash2 §11.5). Rows: the step rows are the block (row t at position
// row(t).position, all rows one sequence whose StepState::kv_ring(layer) holds the context's keys
// and values); count register `context_rows_from` gives the new context rows, at the positions
// just before the block. The task (1) normalises and rotates the new context rows' keys of head
// g and writes them with their values into the ring, (2) normalises and rotates the block's keys
// of head g and its query heads, (3) attends every query head of the group, every block row t, over
// the context positions (start+t) − window < p < start and the block rows within the window of t
// on either side. RMSNorms are plain (bf16 weights); RoPE uses `rope` at each row's position.
// With `causal` (DSpark §13.4–§13.5), (3) is instead: every block row t attends over the context
// positions start − window <= p < start and the block rows 0..t.
struct WindowAttentionOperands {
  BufferId q = kNoBuffer, k = kNoBuffer, v = kNoBuffer, out = kNoBuffer;  // block rows
  int64_t q_stride = 0, kv_stride = 0;                                    // out has q_stride too
  BufferId context_k = kNoBuffer, context_v = kNoBuffer;  // [context rows][kv_stride]
  RowCount context_rows_from = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  const uint16_t* q_norm = nullptr;
  const uint16_t* k_norm = nullptr;
  float norm_eps = 0;
  const kernels::Rope* rope = nullptr;
  int64_t layer = 0;  // StepState::kv_ring(layer)
  bool causal = false;
};

// kRingAppend: one task per KV head g: rows r < the rows `rows_from` counts of `k` and `v` are the
// keys and values of positions start + r of the step's one sequence (start: step row 0's
// position); head g's key is normalised (plain RMSNorm, bf16 weights) and rotated at its position,
// then written with its value into StepState::kv_ring(layer). A block drafter's context rows of a
// prompt (models/drafters/draft_context_program.h), computed before its first round; a round's
// own new rows take the same path inside kWindowAttention.
struct RingAppendOperands {
  BufferId k = kNoBuffer, v = kNoBuffer;  // [rows][kv_stride]
  int64_t kv_stride = 0;
  RowCount rows_from = 0;
  int64_t kv_heads = 0, head_dim = 0;
  const uint16_t* k_norm = nullptr;
  float norm_eps = 0;
  const kernels::Rope* rope = nullptr;
  int64_t layer = 0;  // StepState::kv_ring(layer)
};

// kRowAttention: one task per KV head g of an attention layer whose keys and values are
// position-indexed rows (StepState::kv_rows(layer): every position, or on a sliding-window layer a
// ring of the last positions), over the step rows in order (verify rows see the earlier rows of
// their block: the task stored those first). For step row n: the key of head g and the query
// heads of its group are normalised without a weight (eps `norm_eps`), the queries then scaled by
// `q_scale`, and both rotated at the row's angles when `rope` is set (NoPE layers: not); the key
// and value of head g are stored at the row's position; each query head attends over positions
// (position − window, position] (window 0: every position up to the row's) with scale
// 1/√head_dim; its output is normalised without a weight and gated element-wise by σ(gate), the
// gate read from `gate` at the head's columns. Muse Spark's attention (spec §4.2).
struct RowAttentionOperands {
  BufferId q = kNoBuffer, k = kNoBuffer, v = kNoBuffer, gate = kNoBuffer, out = kNoBuffer;
  int64_t q_stride = 0, kv_stride = 0;  // gate and out rows are q_stride wide too
  int64_t heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  float norm_eps = 0, q_scale = 1;
  BufferId angles = kNoBuffer;  // kRopeAngles output
  const kernels::Rope* rope = nullptr;
  int64_t layer = 0;  // StepState::kv_rows(layer)

  int64_t group() const { return heads / kv_heads; }
};

// kGatedResidual: one task per step row n: the branch row (`width` wide) is multiplied by `scale`
// (when set) and normalised without a weight (eps), then joins the stream through per-channel
// gates, s ← α ⊙ s + β ⊙ branch (kernels/gated_residual.h); the stream row is then copied to
// copy_to (a drafter's tap) when set.
struct GatedResidualOperands {
  BufferId branch = kNoBuffer, stream = kNoBuffer;
  int64_t width = 0;
  const float* scale = nullptr;
  float eps = 0;
  const float* alpha = nullptr;
  const float* beta = nullptr;
  BufferId copy_to = kNoBuffer;
  int64_t copy_offset = 0, copy_stride = 0;
};

// How kMoeRoute scores and weighs experts (kernels/moe_routing.h).
enum class MoeScoring : uint8_t {
  kSoftmax,      // softmax top-k, renormalised (Qwen3.5-MoE), with a shared expert's gate
  kSigmoidBias,  // sigmoid scores, top-k of score + bias, weights the scores renormalised (Muse)
};

// Where the i-th expert a row chose (in the router's order) sits in the plan: slot, the row's
// index among that slot's rows, and its routing weight.
// A choice of an expert another rank holds (expert parallelism) has slot −1.
struct RowChoice {
  int32_t slot = 0, entry = 0;
  float weight = 0;
};

// The routed experts of one step of one MoE layer, as kMoeRoute leaves them for kMoeExperts and
// kMoeDown: slot u holds the u-th distinct expert the step's rows chose (ascending ids), the
// rows that chose it (ascending) and their routing weights; shared_scale[n] is σ(shared gate) of
// row n; choices[n] lists row n's experts in the router's order (kMoeMix sums in that order).
// The (expert, row) entries are packed in that order: slot u's j-th entry is entry first[u] + j
// of the step, so per-entry buffers (the experts' activations and products) hold rows ×
// experts_per_token entries however the rows chose. Sized once for the program's most rows (a
// decode step's 8 or a prefill chunk's hundreds); rewritten every step.
struct MoePlan {
  MoePlan(int64_t slots, int64_t most_rows, int64_t experts_per_token)
      : max_rows(most_rows),
        expert(static_cast<std::size_t>(slots)),
        row_count(static_cast<std::size_t>(slots)),
        first(static_cast<std::size_t>(slots)),
        rows(static_cast<std::size_t>(most_rows * experts_per_token)),
        weights(static_cast<std::size_t>(most_rows * experts_per_token)),
        shared_scale(static_cast<std::size_t>(most_rows)),
        choices(static_cast<std::size_t>(most_rows * kernels::kMaxExpertsPerToken)) {}

  int64_t slots() const { return static_cast<int64_t>(expert.size()); }
  // The step's (expert, row) entries at most: per-entry buffers hold this many.
  int64_t max_entries() const { return static_cast<int64_t>(rows.size()); }
  // Slot u's j-th row and weight.
  int32_t row(int64_t u, int64_t j) const { return rows[entry(u, j)]; }
  float weight(int64_t u, int64_t j) const { return weights[entry(u, j)]; }
  std::size_t entry(int64_t u, int64_t j) const {
    return static_cast<std::size_t>(first[static_cast<std::size_t>(u)] + j);
  }
  // Row n's i-th choice in the router's order.
  const RowChoice& choice(int64_t n, int64_t i) const {
    return choices[static_cast<std::size_t>(n * kernels::kMaxExpertsPerToken + i)];
  }

  int64_t max_rows = 0;
  int64_t used = 0;
  std::vector<int32_t> expert;
  std::vector<int32_t> row_count;
  std::vector<int32_t> first;       // [slots]: slot u's first entry
  std::vector<int32_t> rows;        // [entries]
  std::vector<float> weights;       // [entries]
  std::vector<float> shared_scale;  // [max_rows]
  std::vector<RowChoice> choices;   // [max_rows][kMaxExpertsPerToken]
};

// kMoeRoute: one task: each step row's router logits (row n at logits[n·stride], `experts` wide,
// the shared expert's gate logit in column `shared_gate_column` when it is >= 0) routed as
// `scoring` says (kernels/moe_routing.h; kSigmoidBias with `bias`, `multiplier` and
// `sum_epsilon`) into `plan`.
struct MoeRouteOperands {
  BufferId logits = kNoBuffer;
  int64_t stride = 0, experts = 0, experts_per_token = 0, shared_gate_column = 0;
  MoePlan* plan = nullptr;
  MoeScoring scoring = MoeScoring::kSoftmax;
  const float* bias = nullptr;  // [experts]
  float multiplier = 1;
  float sum_epsilon = 0;  // added to the chosen scores' sum that divides each weight
  // Expert parallelism: the experts this rank holds, [owned_begin, owned_end). Every rank routes
  // every row alike; pairs whose expert another rank holds stay out of the plan, so the plan's
  // experts, downs and mix cover this rank's share and a sum across the ranks completes them.
  int64_t owned_begin = 0, owned_end = std::numeric_limits<int64_t>::max();

  // Worker scratch the task needs: one row's routing probabilities (sigmoid: scores, selection
  // values and marks).
  int64_t scratch_floats() const {
    return scoring == MoeScoring::kSigmoidBias ? 3 * experts : experts;
  }
};

// kMoeExperts: task u·tiles_per_expert() + t: output rows [t·tile_rows, …) of the gate and up
// matrices of the plan's slot-u expert (nothing when the step used fewer experts) over that
// expert's rows of `input` ([rows][hidden], normalised), silu(gate)·up into act[e] for its entry e
// (MoePlan::entry; [plan's max entries][intermediate]). One pass over the expert's weights serves
// every row that chose it.
struct MoeExpertsOperands {
  BufferId input = kNoBuffer;
  int64_t hidden = 0;
  const kernels::ExpertMatrices* experts = nullptr;
  int64_t intermediate = 0, tile_rows = 0;
  BufferId act = kNoBuffer;
  const MoePlan* plan = nullptr;
  kernels::GatedActivation activation = kernels::Activation::kSilu;

  int64_t tiles_per_expert() const { return (intermediate + tile_rows - 1) / tile_rows; }
  // Worker scratch a task needs: the expert's rows gathered and the up half of its tile (an
  // expert may serve every row of the step).
  int64_t scratch_floats() const { return plan->max_rows * (hidden + intermediate); }
};

// kMoeDown: one task per output-row tile [t·tile_rows, …) of the hidden size: for every step row,
// Σ over the plan's slots in order (ascending experts) of weight · down_e · act, then
// + shared_scale · shared_down · shared_act, added into out[n·out_stride + r] (the residual
// stream; written instead when `accumulate` is false: a rank's partial sum under expert
// parallelism), then copied to copy_to (a drafter's tap) when set. With `each` set instead, every
// expert's product for each of its rows is written as it is, at each[e·hidden + r] for its entry
// e (MoePlan::entry), for kMoeMix to combine (no shared expert, nothing added to `out`).
struct MoeDownOperands {
  const kernels::ExpertMatrices* experts = nullptr;
  BufferId act = kNoBuffer;
  int64_t intermediate = 0;
  kernels::WeightMatrix shared_down;  // [hidden, shared intermediate]
  BufferId shared_act = kNoBuffer;    // [rows][shared intermediate]
  BufferId out = kNoBuffer;
  int64_t hidden = 0, out_stride = 0, tile_rows = 0;
  BufferId copy_to = kNoBuffer;
  int64_t copy_offset = 0, copy_stride = 0;
  const MoePlan* plan = nullptr;
  BufferId each = kNoBuffer;  // [plan's max entries][hidden]
  bool accumulate = true;

  int64_t tiles() const { return (hidden + tile_rows - 1) / tile_rows; }
  // Worker scratch: one product [rows][hidden] and the tile's sums [rows][tile_rows].
  int64_t scratch_floats() const { return plan->max_rows * (hidden + tile_rows); }
};

// kMoeMix: one task per step row n: Σ over the row's choices in the router's order of
// weight · norm(each[slot][entry]), where norm multiplies by `scale` (when set) and normalises
// without a weight (eps), written to out[n·width] (Muse Spark's per-expert post-norm and mix); with
// `normalise` false, of weight · each[slot][entry] as it is (Kimi K3's latent mix).
// Each (slot, entry) belongs to one row, so the norm is taken in place. A choice of an expert
// another rank holds (slot −1, expert parallelism) adds nothing: the row's mix is the rank's part.
struct MoeMixOperands {
  BufferId each = kNoBuffer, out = kNoBuffer;
  int64_t width = 0, experts_per_token = 0;
  const float* scale = nullptr;
  float eps = 0;
  const MoePlan* plan = nullptr;
  bool normalise = true;  // false: the products are mixed as they are (Kimi K3)
};

// kResidualMix: one task per step row n (Kimi K3's attention residuals, kernels/residual_mix.h):
// first the running prefix takes the last sub-layer's output (`update`: prefix ← prefix + sub, or
// prefix ← sub where a new block began) and is copied to copy_to (a drafter's tap) when set; then
// out ← Mix(blocks 0 … block_count − 1, prefix; weight); then, with push_to >= 0, the prefix is
// stored as block push_to. Block b of row n is blocks[(b·block_rows + n)·width]; rows are `width`.
enum class PrefixUpdate : uint8_t { kNone, kAdd, kReplace };
// The most candidates a mix takes (stored blocks and the prefix; K3 has 8 blocks).
inline constexpr int64_t kMaxResidualCandidates = 64;
struct ResidualMixOperands {
  BufferId prefix = kNoBuffer, sub = kNoBuffer, blocks = kNoBuffer, out = kNoBuffer;
  int64_t width = 0, block_rows = 0, block_count = 0, push_to = -1;
  PrefixUpdate update = PrefixUpdate::kNone;
  const float* weight = nullptr;  // [width]: the folded norm ⊙ projection
  float eps = 0;
  BufferId copy_to = kNoBuffer;
  int64_t copy_offset = 0, copy_stride = 0;

  // Worker scratch a task needs: the candidates' scores.
  int64_t scratch_floats() const { return block_count + 1; }
};

// kKda: one task per head h of a Kimi Delta Attention layer (kimi-k3-dspark.md §6.2), over the
// step rows in order: the short convs (SiLU) of the head's q, k and v channels with their rolling
// history, q (scaled by 1/√d) and k L2-normalised, the lower-bound log-decay of each key channel,
// β = σ(b), the per-channel delta-rule step on the f32 state and the gated output norm (σ(gate)).
// A row of `in` is [q | k | v | f | gate] (C = heads·head_dim each) then b (heads); a row of `out`
// is C. State: StepState::recurrent_state(slot), conv = the history [3][K − 1][C] (q, k, v,
// oldest first), recurrent = [heads][d][d]. Verify rows (`snapshots`): after row s < rows − 1 the
// head's history and state also go to StepState::recurrent_snapshot(slot, s + 1).
struct KdaOperands {
  BufferId in = kNoBuffer, out = kNoBuffer;
  int64_t in_stride = 0, out_stride = 0;
  int64_t heads = 0, head_dim = 0, conv_kernel = 0;
  const float* conv_weight[3] = {nullptr, nullptr, nullptr};  // q, k, v: [C][conv_kernel]
  const float* exp_a_log = nullptr;                           // [heads]
  const float* dt_bias = nullptr;                             // [C]
  float lower_bound = 0;
  const float* norm = nullptr;  // [head_dim]
  float norm_eps = 0;
  int64_t state_slot = 0;
  bool snapshots = false;
  // Prefill rows (a prompt chunk of one sequence): the delta rule over all the run's rows chunk by
  // chunk (kernels::kda_chunked with chunks of this many rows, even for one row), as the reference
  // prefill does. 0: row by row.
  int64_t chunk = 0;

  int64_t channels() const { return heads * head_dim; }
  int64_t f_offset() const { return 3 * channels(); }
  int64_t gate_offset() const { return 4 * channels(); }
  int64_t b_offset() const { return 5 * channels(); }
  // Worker scratch one task needs with `rows` rows: the head's conv outputs and log-decays (and,
  // chunked, every row's, with its β).
  int64_t scratch_floats(int64_t rows = 1) const {
    return chunk == 0 ? 4 * head_dim : rows * (4 * head_dim + 1);
  }
};

// The latent cache rows of one MLA layer of one sequence ([positions][width], f32 or bf16: one of
// the pointers is set), sized by the caller for every position the step writes.
struct LatentRows {
  float* f32 = nullptr;
  uint16_t* bf16 = nullptr;
  int64_t width = 0;
};

// kLatentAppend: one task per step row: the row's compressed kv (`ckv`, [rank | shared] per row)
// becomes the cache row [RMSNorm(latent; norm) | shared key] at the row's position
// (StepState::latent_rows(slot)), rounded to bf16 in a bf16 cache. kLatentAttention: one task per
// query head h, over every step row: the absorbed query [W_UK_hᵀ · q_nope | q_shared] attends over
// the cache rows 0 … position (kernels/latent_attention.h), the context goes through W_UV_h (the
// head's value rows of kv_b_proj) and is gated by σ(gate). MLA without RoPE (§7.2, §7.3).
struct LatentAttentionOperands {
  BufferId q = kNoBuffer, ckv = kNoBuffer, gate = kNoBuffer, out = kNoBuffer;
  int64_t heads = 0, nope = 0, shared = 0, rank = 0, v_head_dim = 0;
  const float* latent_norm = nullptr;  // [rank]
  float norm_eps = 0;
  const float* key_absorb = nullptr;  // [heads][rank][nope]: W_UK_hᵀ
  kernels::WeightMatrix kv_b{};       // [heads·(nope + v), rank]
  int64_t cache_slot = 0;

  int64_t q_stride() const { return heads * (nope + shared); }
  int64_t ckv_stride() const { return rank + shared; }
  int64_t out_stride() const { return heads * v_head_dim; }  // gate rows too
  // Worker scratch one attention task needs: its absorbed query, context and kv_b's outputs.
  int64_t scratch_floats() const { return 2 * rank + shared + kv_b.rows; }
};
struct LatentAppendOperands {
  LatentAttentionOperands attention;
};

// A candidate of a top-k: an id and its logit.
using Candidate = kernels::Candidate;

// kTopK: one task per row n < count (step rows − first_row): the k largest of logits row n
// ([rows][stride], `vocab` wide) into out[n·k ..], descending, ties to the lower id, NaN never
// above a number (kernels/top_k.h).
struct TopKOperands {
  BufferId logits = kNoBuffer;
  int64_t stride = 0, vocab = 0, k = 0, first_row = 0;
  Candidate* out = nullptr;  // [rows][k]
};

// A final logit softcap (kernels/logit_softcap.h): cap · tanh(logit · multiplier / cap) below
// `valid_vocab`, −∞ from it on; cap 0: none.
struct LogitSoftcap {
  float cap = 0, multiplier = 1;
  int64_t valid_vocab = 0;
};

// kLmHeadArgmax: one task per vocabulary tile: logits[n][begin, end) and that tile's max and
// argmax per row (strict >: ties keep the lower id; NaN never wins). With a softcap the tile's
// logits are capped first, and the argmax is taken over what the caller gets.
struct LmHeadOperands {
  RowInput input;
  std::vector<Tile> tiles;
  float* tile_max = nullptr;    // [tiles][row_capacity]
  int32_t* tile_arg = nullptr;  // [tiles][row_capacity]
  LogitSoftcap softcap;
  int64_t row_capacity = kMaxStepRows;  // the most input rows a run has
};

// A rank's part of a vocabulary-parallel lm_head (tensor parallelism): its logits are the ids of
// dist::even_part(vocab, ranks, rank) — `local` holds them, [rows][that part's size] —, and the
// argmax and, when `gathered` is set, the logits are put back together across `comm`'s ranks.
// `scratch` holds ranks · row_capacity · dist::largest_part(vocab, ranks) floats when gathering.
struct VocabShard {
  dist::Communicator* comm = nullptr;  // null: the lm_head holds the whole vocabulary
  int64_t vocab = 0;
  BufferId local = kNoBuffer;
  BufferId gathered = kNoBuffer;  // [rows][vocab], or kNoBuffer: greedy tokens only
  float* scratch = nullptr;
  kernels::Candidate* best = nullptr;  // [(ranks + 1) · row_capacity]: each rank's best per row
};

// kArgmax: one task: the per-tile maxima reduced to the greedy token of every row (the earlier
// tile wins ties). With a vocabulary shard, each row's best (logit, id) is then reduced across the
// ranks (an all-gather; the lower rank, holding the lower ids, wins ties), and with
// shard.gathered set every rank's logits are gathered into it.
struct ArgmaxOperands {
  const float* tile_max = nullptr;
  const int32_t* tile_arg = nullptr;
  int64_t tiles = 0;
  int32_t* greedy = nullptr;  // [row_capacity]
  int64_t row_capacity = kMaxStepRows;
  int64_t first_row = 0;  // of the step rows, as the lm_head input's (negative: from the end)
  VocabShard shard;
};

// kAllReduce: one task: the step rows' partial products ([rows][width] of `partial`: this rank's
// share of a row-parallel projection, o or down) summed across `comm`'s ranks in rank order
// (dist::Communicator::all_reduce_sum, so every rank holds the same bits), then added into `out`
// (the residual stream), or written there when `accumulate` is false (a branch that a gated join
// reads, Muse Spark's), whose rows are then copied to copy_to (a drafter's tap) when set. While
// it waits for the other ranks, the rank's other workers go on with the tasks that do not wait
// for it (the next layer's weights stream meanwhile).
struct AllReduceOperands {
  BufferId partial = kNoBuffer, out = kNoBuffer;
  int64_t width = 0;
  dist::Communicator* comm = nullptr;
  BufferId copy_to = kNoBuffer;
  int64_t copy_offset = 0, copy_stride = 0;
  bool accumulate = true;
};

// kFamilyKernel: a family-specific body that the shared layer library does not express yet
// (it cannot be interpreted by another executor). `prologue`, when set, runs once per worker and
// instruction before the worker's first task, as a norm prologue does.
struct FamilyOperands {
  std::function<void(int64_t task, WorkerContext& context)> body;
  std::function<void(WorkerContext& context)> prologue;
};

// The variant's alternatives are in Opcode order.
using Operands =
    std::variant<EmbedOperands, RopeOperands, ProjectionOperands, GateUpOperands, KvAppendOperands,
                 AttentionOperands, DeltaNetOperands, LmHeadOperands, ArgmaxOperands,
                 NormRowsOperands, BlockConvOperands, WindowAttentionOperands, TopKOperands,
                 MoeRouteOperands, MoeExpertsOperands, MoeDownOperands, RowAttentionOperands,
                 GatedResidualOperands, MoeMixOperands, ResidualMixOperands, KdaOperands,
                 LatentAppendOperands, LatentAttentionOperands, RingAppendOperands,
                 AllReduceOperands, FamilyOperands>;

enum class Opcode : uint8_t {
  kEmbed,
  kRopeAngles,
  kProjection,
  kGateUpSilu,
  kKvAppend,
  kAttention,
  kDeltaNet,
  kLmHeadArgmax,
  kArgmax,
  kNormRows,
  kBlockConv,
  kWindowAttention,
  kTopK,
  kMoeRoute,
  kMoeExperts,
  kMoeDown,
  kRowAttention,
  kGatedResidual,
  kMoeMix,
  kResidualMix,
  kKda,
  kLatentAppend,
  kLatentAttention,
  kRingAppend,
  kAllReduce,
  kFamilyKernel,
};
std::string_view opcode_name(Opcode op);

// Task t waits until tasks [begin, end) of instruction `producer` are done in this step.
struct Dependency {
  int32_t producer = 0;
  int64_t begin = 0, end = 0;
};

struct Instruction {
  std::string name;
  int64_t tasks = 1;
  Operands operands;
  // Waits of every task, plus (when not empty, one list per task) the waits of each task.
  std::vector<Dependency> waits;
  std::vector<std::vector<Dependency>> task_waits;

  Opcode opcode() const { return static_cast<Opcode>(operands.index()); }
};

// The weight tiles task `task` of `ins` streams, in the order it reads them: one for a projection
// or lm_head task, gate then up for a gate_up task, none for the other opcodes.
struct TaskTiles {
  std::array<const Tile*, 2> tiles{};
  int count = 0;
  const Tile* const* begin() const { return tiles.data(); }
  const Tile* const* end() const { return tiles.data() + count; }
};
TaskTiles task_tiles(const Instruction& ins, int64_t task);

// Weight bytes task `task` of `ins` streams (what a waiting worker prefetches), and all tasks'.
std::size_t task_weight_bytes(const Instruction& ins, int64_t task);
std::size_t weight_bytes(const Instruction& ins);

// The RowInput of a projection-like instruction, or null.
const RowInput* row_input(const Instruction& ins);
// How many tasks the operands describe (tiles, heads, ...), or -1 where the opcode leaves it
// free (-2: operand lists that disagree with each other).
int64_t operand_tasks(const Instruction& ins);
// Every buffer id the operands name (for validation).
std::vector<BufferId> buffers_named(const Instruction& ins);
// Every row count the operands read (for validation).
std::vector<RowCount> counts_named(const Instruction& ins);

}  // namespace md::program
