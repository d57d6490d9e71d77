// The instruction set of a step program: an opcode and plain operands (activation buffer ids,
// format-tagged weight references, tile ranges) and the producer tiles each task reads. Nothing
// here runs; the CPU interpreter (cpu_interpreter.h) gives each opcode its meaning, and a second
// executor (CUDA, later) would read the same data. See docs/ARCHITECTURE.md "Program and
// executors".
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kernels/rope.h"
#include "kernels/weight_matrix.h"

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
  kF32Plain,         // x / rms(x) · w, w f32 (GGUF)
};

// The rows a projection multiplies: rows [first_row, first_row + step rows) of `buffer` (row
// stride `stride`), first normalised into the worker's scratch when `norm` is not kNone (once per
// worker and instruction, not per tile).
struct RowInput {
  BufferId buffer = kNoBuffer;
  int64_t stride = 0;
  int64_t first_row = 0;
  NormKind norm = NormKind::kNone;
  const void* norm_weight = nullptr;
  float eps = 0;
};

// One task of a projection: output rows [begin, end) of `weight` for every step row n, written at
// out[n·out_stride + out_offset + r] (overwritten, or added to: a residual). With `copy_to` set,
// the finished columns are also copied to copy_to[n·copy_stride + copy_offset + r] (a drafter's
// tap of the residual stream, at no extra instruction).
struct Tile {
  kernels::WeightMatrix weight;
  int64_t begin = 0, end = 0;
  BufferId out = kNoBuffer;
  int64_t out_offset = 0, out_stride = 0;
  bool accumulate = false;
  BufferId copy_to = kNoBuffer;
  int64_t copy_offset = 0, copy_stride = 0;
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

// kProjection: one task per tile.
struct ProjectionOperands {
  RowInput input;
  std::vector<Tile> tiles;
};

// kGateUpSilu: task t multiplies gate and up tiles t (the same output rows of both matrices)
// and writes silu(gate) · up over the gate tile's output (the up tile's output is its scratch).
struct GateUpOperands {
  RowInput input;
  std::vector<Tile> gate, up;
};

// kKvAppend: one task per KV head g: every step row's key of head g is (normalised,) rotated and
// cached with its value at the row's position. kAttention: one task per query head h, over every
// step row: the query is (normalised,) rotated, attends over positions 0..position of its KV head
// (verify rows see the earlier rows of the block: all were appended first), and is (gated).
struct AttentionOperands {
  BufferId q = kNoBuffer, k = kNoBuffer, v = kNoBuffer, out = kNoBuffer;
  int64_t q_stride = 0, kv_stride = 0, out_stride = 0;  // per row
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  // With an output gate each query head is [q | gate] (2·head_dim wide) and o ← o · σ(gate).
  bool output_gate = false;
  // Per-head RMSNorm of q and k before RoPE (null: none), zero-centred bf16 weights.
  const uint16_t* q_norm = nullptr;
  const uint16_t* k_norm = nullptr;
  float norm_eps = 0;
  BufferId angles = kNoBuffer;  // kRopeAngles output; rope rotates q and k with them
  const kernels::Rope* rope = nullptr;
  int64_t cache_slot = 0;  // StepState::kv_cache(slot)
};

struct KvAppendOperands {
  AttentionOperands attention;
};

// kLmHeadArgmax: one task per vocabulary tile: logits[n][begin, end) and that tile's max and
// argmax per row (strict >: ties keep the lower id; NaN never wins).
struct LmHeadOperands {
  RowInput input;
  std::vector<Tile> tiles;
  float* tile_max = nullptr;    // [tiles][kMaxStepRows]
  int32_t* tile_arg = nullptr;  // [tiles][kMaxStepRows]
};

// kArgmax: one task: the per-tile maxima reduced to the greedy token of every row (the earlier
// tile wins ties).
struct ArgmaxOperands {
  const float* tile_max = nullptr;
  const int32_t* tile_arg = nullptr;
  int64_t tiles = 0;
  int32_t* greedy = nullptr;  // [kMaxStepRows]
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
                 AttentionOperands, LmHeadOperands, ArgmaxOperands, FamilyOperands>;

enum class Opcode : uint8_t {
  kEmbed,
  kRopeAngles,
  kProjection,
  kGateUpSilu,
  kKvAppend,
  kAttention,
  kLmHeadArgmax,
  kArgmax,
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

}  // namespace md::program
