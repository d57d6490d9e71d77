#include "program/cpu_interpreter.h"

#include <cmath>
#include <limits>

#include "base/dtype.h"
#include "kernels/activations.h"
#include "kernels/gguf_dequant.h"
#include "kernels/norms.h"

namespace md::program {

namespace {

std::size_t at(int64_t i) {
  return static_cast<std::size_t>(i);
}

const float* input_rows(const RowInput& input, const Program& program,
                        const WorkerContext& context) {
  if (input.norm != NormKind::kNone) return context.normalised;
  return program.buffer(input.buffer) + input.first_row * input.stride;
}

// out[n][begin, end) (+)= W[begin, end) · x[n], then the optional copy of those columns.
void run_tile(const Tile& tile, const float* x, int64_t x_stride, const Program& program) {
  float* out = program.buffer(tile.out) + tile.out_offset;
  const int64_t rows = program.rows();
  kernels::weight_tile(tile.weight, tile.begin, tile.end, x, x_stride, rows,
                       {out, tile.out_stride, tile.accumulate});
  if (tile.copy_to == kNoBuffer) return;
  float* copy = program.buffer(tile.copy_to) + tile.copy_offset;
  for (int64_t n = 0; n < rows; ++n) {
    std::copy(out + n * tile.out_stride + tile.begin, out + n * tile.out_stride + tile.end,
              copy + n * tile.copy_stride + tile.begin);
  }
}

void embed(const EmbedOperands& op, int64_t row, const Program& program) {
  if (row >= program.rows()) return;
  const kernels::WeightMatrix& table = op.table;
  float* out = program.buffer(op.out) + row * table.cols;
  const std::uint8_t* source = table.row(program.row(row).token);
  if (table.format == kernels::WeightFormat::kBf16) {
    const auto* e = reinterpret_cast<const uint16_t*>(source);
    for (int64_t d = 0; d < table.cols; ++d) out[d] = bf16_to_f32(e[d]);
  } else {
    (void)kernels::dequantize_row(table.gguf_type, source, out, table.cols);
  }
}

void rope_angles(const RopeOperands& op, int64_t row, const Program& program) {
  if (row >= program.rows()) return;
  const int64_t width = op.rope->rotary_dim();
  float* out = program.buffer(op.out) + row * width;
  op.rope->angles(program.row(row).position, out, out + width / 2);
}

void gate_up(const GateUpOperands& op, int64_t task, const Program& program,
             const WorkerContext& context) {
  const float* x = input_rows(op.input, program, context);
  const Tile& gate = op.gate[at(task)];
  const Tile& up = op.up[at(task)];
  run_tile(gate, x, op.input.stride, program);
  run_tile(up, x, op.input.stride, program);
  float* g = program.buffer(gate.out) + gate.out_offset;
  const float* u = program.buffer(up.out) + up.out_offset;
  for (int64_t n = 0; n < program.rows(); ++n) {
    for (int64_t i = gate.begin; i < gate.end; ++i) {
      g[n * gate.out_stride + i] =
          kernels::silu(g[n * gate.out_stride + i]) * u[n * up.out_stride + i];
    }
  }
}

// A query or key head before it attends or is cached: its norm, then RoPE at the row's angles.
void prepare_head(float* x, const uint16_t* norm, const AttentionOperands& op,
                  const float* angles) {
  if (norm != nullptr) {
    kernels::rms_norm(x, norm, op.head_dim, op.norm_eps, kernels::NormWeight::kZeroCentred, x);
  }
  if (op.rope != nullptr) op.rope->apply(x, angles, angles + op.rope->rotary_dim() / 2);
}

const float* row_angles(const AttentionOperands& op, const Program& program, int64_t n) {
  if (op.rope == nullptr) return nullptr;
  return program.buffer(op.angles) + n * op.rope->rotary_dim();
}

void kv_append(const AttentionOperands& op, int64_t g, const Program& program) {
  const int64_t hd = op.head_dim;
  float* k = program.buffer(op.k);
  const float* v = program.buffer(op.v);
  for (int64_t n = 0; n < program.rows(); ++n) {
    const StepRow& row = program.row(n);
    float* key = k + n * op.kv_stride + g * hd;
    prepare_head(key, op.k_norm, op, row_angles(op, program, n));
    row.state->kv_cache(op.cache_slot).write(g, row.position, key, v + n * op.kv_stride + g * hd);
  }
}

void attention(const AttentionOperands& op, int64_t h, const Program& program,
               const WorkerContext& context) {
  const int64_t hd = op.head_dim, g = h / (op.heads / op.kv_heads);
  const int64_t q_width = op.output_gate ? 2 * hd : hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* q = program.buffer(op.q);
  float* out = program.buffer(op.out);
  for (int64_t n = 0; n < program.rows(); ++n) {
    const StepRow& row = program.row(n);
    float* query = q + n * op.q_stride + h * q_width;
    prepare_head(query, op.q_norm, op, row_angles(op, program, n));
    float* o = out + n * op.out_stride + h * hd;
    row.state->kv_cache(op.cache_slot)
        .attend(g, row.position + 1, query, scale, context.scratch, o);
    if (op.output_gate) {
      const float* gate = query + hd;
      for (int64_t d = 0; d < hd; ++d) o[d] *= kernels::sigmoid(gate[d]);
    }
  }
}

void lm_head(const LmHeadOperands& op, int64_t task, const Program& program,
             const WorkerContext& context) {
  const Tile& tile = op.tiles[at(task)];
  run_tile(tile, input_rows(op.input, program, context), op.input.stride, program);
  const float* logits = program.buffer(tile.out) + tile.out_offset;
  for (int64_t n = 0; n < program.rows(); ++n) {
    const float* row = logits + n * tile.out_stride;
    float best = -std::numeric_limits<float>::infinity();
    auto arg = static_cast<int32_t>(tile.begin);
    for (int64_t i = tile.begin; i < tile.end; ++i) {
      if (row[i] > best) {  // strict: ties keep the lower id; NaN never wins
        best = row[i];
        arg = static_cast<int32_t>(i);
      }
    }
    op.tile_max[at(task * kMaxStepRows + n)] = best;
    op.tile_arg[at(task * kMaxStepRows + n)] = arg;
  }
}

void argmax(const ArgmaxOperands& op, const Program& program) {
  for (int64_t n = 0; n < program.rows(); ++n) {
    float best = 0;
    int32_t arg = 0;
    for (int64_t t = 0; t < op.tiles; ++t) {
      const auto i = at(t * kMaxStepRows + n);
      if (t == 0 || op.tile_max[i] > best) {  // strict: the earlier tile (lower ids) wins ties
        best = op.tile_max[i];
        arg = op.tile_arg[i];
      }
    }
    op.greedy[at(n)] = arg;
  }
}

}  // namespace

void run_prologue(const Instruction& ins, const Program& program, WorkerContext& context) {
  if (const auto* family = std::get_if<FamilyOperands>(&ins.operands)) {
    if (family->prologue) family->prologue(context);
    return;
  }
  const RowInput* input = row_input(ins);
  if (input == nullptr || input->norm == NormKind::kNone) return;
  const int64_t width = input->stride;
  const float* x = program.buffer(input->buffer) + input->first_row * width;
  for (int64_t n = 0; n < program.rows(); ++n) {
    const float* row = x + n * width;
    float* y = context.normalised + n * width;
    switch (input->norm) {
      case NormKind::kBf16ZeroCentred:
        kernels::rms_norm(row, static_cast<const uint16_t*>(input->norm_weight), width, input->eps,
                          kernels::NormWeight::kZeroCentred, y);
        break;
      case NormKind::kBf16Plain:
        kernels::rms_norm(row, static_cast<const uint16_t*>(input->norm_weight), width, input->eps,
                          kernels::NormWeight::kPlain, y);
        break;
      case NormKind::kF32Plain:
        kernels::rms_norm(row, static_cast<const float*>(input->norm_weight), width, input->eps, y);
        break;
      case NormKind::kNone:
        break;
    }
  }
}

void run_task(const Instruction& ins, int64_t task, const Program& program,
              WorkerContext& context) {
  switch (ins.opcode()) {
    case Opcode::kEmbed:
      embed(std::get<EmbedOperands>(ins.operands), task, program);
      return;
    case Opcode::kRopeAngles:
      rope_angles(std::get<RopeOperands>(ins.operands), task, program);
      return;
    case Opcode::kProjection: {
      const auto& op = std::get<ProjectionOperands>(ins.operands);
      run_tile(op.tiles[at(task)], input_rows(op.input, program, context), op.input.stride,
               program);
      return;
    }
    case Opcode::kGateUpSilu:
      gate_up(std::get<GateUpOperands>(ins.operands), task, program, context);
      return;
    case Opcode::kKvAppend:
      kv_append(std::get<KvAppendOperands>(ins.operands).attention, task, program);
      return;
    case Opcode::kAttention:
      attention(std::get<AttentionOperands>(ins.operands), task, program, context);
      return;
    case Opcode::kLmHeadArgmax:
      lm_head(std::get<LmHeadOperands>(ins.operands), task, program, context);
      return;
    case Opcode::kArgmax:
      argmax(std::get<ArgmaxOperands>(ins.operands), program);
      return;
    case Opcode::kFamilyKernel:
      std::get<FamilyOperands>(ins.operands).body(task, context);
      return;
  }
}

void prefetch_task_weights(const Instruction& ins, int64_t task, std::size_t from, std::size_t to) {
  // [from, to) counts bytes across the task's tiles in the order it reads them.
  std::size_t first = 0;
  for (const Tile* tile : task_tiles(ins, task)) {
    std::size_t bytes = tile->weight.bytes(tile->begin, tile->end);
    if (from < first + bytes && to > first) {
      kernels::prefetch_rows(tile->weight, tile->begin, tile->end, from > first ? from - first : 0,
                             to - first);
    }
    first += bytes;
  }
}

}  // namespace md::program
