#include "program/cpu_interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/dtype.h"
#include "kernels/activations.h"
#include "kernels/block_conv.h"
#include "kernels/gated_residual.h"
#include "kernels/gguf_dequant.h"
#include "kernels/kv_attention.h"
#include "kernels/logit_softcap.h"
#include "kernels/norms.h"
#include "kernels/top_k.h"
#include "program/cpu_collectives.h"
#include "program/cpu_delta_net.h"
#include "program/cpu_kda.h"
#include "program/cpu_latent_attention.h"
#include "program/cpu_moe.h"
#include "program/cpu_residual_mix.h"
#include "program/cpu_ring_append.h"
#include "program/cpu_row_attention.h"
#include "program/cpu_window_attention.h"

namespace md::program {

namespace {

std::size_t at(int64_t i) {
  return static_cast<std::size_t>(i);
}

// y = RMSNorm(x) with the weight kind `kind` names (y may be x).
void normalise_row(NormKind kind, const void* weight, float eps, const float* x, int64_t width,
                   float* y) {
  switch (kind) {
    case NormKind::kBf16ZeroCentred:
      kernels::rms_norm(x, static_cast<const uint16_t*>(weight), width, eps,
                        kernels::NormWeight::kZeroCentred, y);
      return;
    case NormKind::kBf16Plain:
      kernels::rms_norm(x, static_cast<const uint16_t*>(weight), width, eps,
                        kernels::NormWeight::kPlain, y);
      return;
    case NormKind::kF32Plain:
      kernels::rms_norm(x, static_cast<const float*>(weight), width, eps, y);
      return;
    case NormKind::kUnweighted:
      kernels::rms_norm_unweighted(x, width, eps, y);
      return;
    case NormKind::kNone:
      if (y != x) std::copy(x, x + width, y);
      return;
  }
}

const float* input_rows(const RowInput& input, const Program& program,
                        const WorkerContext& context) {
  if (input.norm != NormKind::kNone) return context.normalised;
  return program.buffer(input.buffer) + program.first_row(input) * input.stride;
}

// out[n][begin, end) (+)= W[begin, end) · x[n] for the input's rows, then the optional copy of
// those columns.
void run_tile(const Tile& tile, const RowInput& input, const float* x, const Program& program) {
  float* out = program.buffer(tile.out) + tile.out_offset;
  const int64_t rows = program.input_rows(input);
  if (rows <= 0) return;
  kernels::weight_tile(tile.weight, tile.begin, tile.end, x, input.stride, rows,
                       {out, tile.out_stride, tile.accumulate});
  if (tile.bias != nullptr) {
    for (int64_t n = 0; n < rows; ++n) {
      for (int64_t r = tile.begin; r < tile.end; ++r) out[n * tile.out_stride + r] += tile.bias[r];
    }
  }
  if (tile.copy_to == kNoBuffer) return;
  float* copy = program.buffer(tile.copy_to) + tile.copy_offset;
  for (int64_t n = 0; n < rows; ++n) {
    std::copy(out + n * tile.out_stride + tile.begin, out + n * tile.out_stride + tile.end,
              copy + n * tile.copy_stride + tile.begin);
  }
}

void embed(const EmbedOperands& op, int64_t row, const Program& program) {
  if (row >= program.rows()) return;
  // The loader checked that the table's format dequantises.
  (void)kernels::row_to_f32(op.table, program.row(row).token,
                            program.buffer(op.out) + row * op.table.cols);
}

void rope_angles(const RopeOperands& op, int64_t row, const Program& program) {
  if (row >= program.rows()) return;
  const int64_t width = op.rope->rotary_dim();
  float* out = program.buffer(op.out) + row * width;
  op.rope->angles(program.row(row).position, out, out + width / 2);
}

// The normalised rows go to `publish` once (task 0's worker; every worker computed the same bits).
void publish_normalised(const RowInput& input, int64_t task, const Program& program,
                        const WorkerContext& context) {
  if (input.publish == kNoBuffer || task != 0) return;
  const int64_t floats = program.input_rows(input) * input.stride;
  std::copy(context.normalised, context.normalised + floats, program.buffer(input.publish));
}

// A tile, and the same weight rows over the projection's extra rows when the tile asks for them.
void projection(const ProjectionOperands& op, int64_t task, const Program& program,
                const WorkerContext& context) {
  publish_normalised(op.input, task, program, context);
  const Tile& tile = op.tiles[at(task)];
  run_tile(tile, op.input, input_rows(op.input, program, context), program);
  if (tile.extra_out == kNoBuffer || op.extra.buffer == kNoBuffer) return;
  const int64_t rows = program.input_rows(op.extra);
  if (rows <= 0) return;
  kernels::weight_tile(
      tile.weight, tile.begin, tile.end,
      program.buffer(op.extra.buffer) + program.first_row(op.extra) * op.extra.stride,
      op.extra.stride, rows, {program.buffer(tile.extra_out), tile.extra_stride, false});
}

void gate_up(const GateUpOperands& op, int64_t task, const Program& program,
             const WorkerContext& context) {
  const float* x = input_rows(op.input, program, context);
  const Tile& gate = op.gate[at(task)];
  const Tile& up = op.up[at(task)];
  run_tile(gate, op.input, x, program);
  run_tile(up, op.input, x, program);
  float* g = program.buffer(gate.out) + gate.out_offset;
  const float* u = program.buffer(up.out) + up.out_offset;
  for (int64_t n = 0; n < program.input_rows(op.input); ++n) {
    kernels::gated_product(op.activation, g + n * gate.out_stride + gate.begin,
                           u + n * up.out_stride + gate.begin, gate.end - gate.begin);
  }
}

// A query or key head before it attends or is cached: its norm, then RoPE at the row's angles.
void prepare_head(float* x, const float* norm, const AttentionOperands& op, const float* angles) {
  if (norm != nullptr) kernels::rms_norm(x, norm, op.head_dim, op.norm_eps, x);
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

void gate_output(const AttentionOperands& op, const float* query, float* o) {
  if (!op.output_gate) return;
  const float* gate = query + op.head_dim;
  for (int64_t d = 0; d < op.head_dim; ++d) o[d] *= kernels::sigmoid(gate[d]);
}

void attention(const AttentionOperands& op, int64_t h, const Program& program) {
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
    row.state->kv_cache(op.cache_slot).attend(g, row.position + 1, query, scale, o);
    gate_output(op, query, o);
  }
}

// A block of rows of KV head g (row_block mode): every query head of g's group over the block's
// rows, the queries of consecutive rows of one sequence attending together so that each key tile
// is loaded once for all of them.
void attention_rows(const AttentionOperands& op, int64_t task, const Program& program) {
  // The run's blocks are dealt over the first tasks (a short chunk leaves the rest idle), in the
  // order that balances causal work between contiguous halves.
  const int64_t blocks = (program.rows() + op.row_block - 1) / op.row_block;
  if (task / op.kv_heads >= blocks) return;
  const int64_t g = task % op.kv_heads, group = op.heads / op.kv_heads;
  const int64_t first = kernels::balanced_row_block(task / op.kv_heads, blocks) * op.row_block;
  const int64_t last = std::min(program.rows(), first + op.row_block);
  const int64_t hd = op.head_dim, q_width = op.output_gate ? 2 * hd : hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* q = program.buffer(op.q);
  float* out = program.buffer(op.out);
  auto query = [&](int64_t n, int64_t h) { return q + n * op.q_stride + h * q_width; };
  auto output = [&](int64_t n, int64_t h) { return out + n * op.out_stride + h * hd; };
  for (int64_t n = first; n < last; ++n) {
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      prepare_head(query(n, h), op.q_norm, op, row_angles(op, program, n));
    }
  }
  thread_local std::vector<kernels::AttentionQuery> queries;
  for (int64_t n = first; n < last;) {
    StepState* state = program.row(n).state;
    queries.clear();
    for (; n < last && program.row(n).state == state; ++n) {
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        queries.push_back({query(n, h), program.row(n).position + 1, output(n, h)});
      }
    }
    state->kv_cache(op.cache_slot).attend(g, queries, scale);
  }
  for (int64_t n = first; n < last; ++n) {
    for (int64_t h = g * group; h < (g + 1) * group; ++h)
      gate_output(op, query(n, h), output(n, h));
  }
}

void lm_head(const LmHeadOperands& op, int64_t task, const Program& program,
             const WorkerContext& context) {
  const Tile& tile = op.tiles[at(task)];
  run_tile(tile, op.input, input_rows(op.input, program, context), program);
  float* logits = program.buffer(tile.out) + tile.out_offset;
  for (int64_t n = 0; n < program.input_rows(op.input); ++n) {
    float* row = logits + n * tile.out_stride;
    if (op.softcap.cap > 0) {
      kernels::softcap_logits(row, tile.begin, tile.end, op.softcap.valid_vocab,
                              op.softcap.multiplier, op.softcap.cap);
    }
    float best = -std::numeric_limits<float>::infinity();
    auto arg = static_cast<int32_t>(tile.begin);
    for (int64_t i = tile.begin; i < tile.end; ++i) {
      if (row[i] > best) {  // strict: ties keep the lower id; NaN never wins
        best = row[i];
        arg = static_cast<int32_t>(i);
      }
    }
    op.tile_max[at(task * op.row_capacity + n)] = best;
    op.tile_arg[at(task * op.row_capacity + n)] = arg;
  }
}

void argmax(const ArgmaxOperands& op, const Program& program) {
  const int64_t rows = program.rows() - resolved_first_row(op.first_row, program.rows());
  for (int64_t n = 0; n < rows; ++n) {
    float best = 0;
    int32_t arg = 0;
    for (int64_t t = 0; t < op.tiles; ++t) {
      const auto i = at(t * op.row_capacity + n);
      if (t == 0 || op.tile_max[i] > best) {  // strict: the earlier tile (lower ids) wins ties
        best = op.tile_max[i];
        arg = op.tile_arg[i];
      }
    }
    op.greedy[at(n)] = arg;
    if (op.shard.comm != nullptr) own_best(op)[n] = {arg, best};
  }
  if (op.shard.comm != nullptr) reduce_vocab_shard(op, program, rows);
}

void norm_rows(const NormRowsOperands& op, int64_t row, const Program& program) {
  if (row >= program.count(op.rows_from)) return;
  float* x = program.buffer(op.buffer) + row * op.stride;
  normalise_row(op.norm, op.norm_weight, op.eps, x, op.stride, x);
}

void gated_residual(const GatedResidualOperands& op, int64_t row, const Program& program) {
  if (row >= program.rows()) return;
  float* branch = program.buffer(op.branch) + row * op.width;
  float* stream = program.buffer(op.stream) + row * op.width;
  kernels::scaled_rms_norm(branch, op.scale, op.width, op.eps);
  kernels::gated_residual(op.alpha, op.beta, branch, op.width, stream);
  if (op.copy_to == kNoBuffer) return;
  std::copy(stream, stream + op.width,
            program.buffer(op.copy_to) + row * op.copy_stride + op.copy_offset);
}

void block_conv(const BlockConvOperands& op, int64_t task, const Program& program) {
  const kernels::BlockConvShape shape{op.hidden, op.taps, op.group_size};
  const int64_t c0 = task * op.chunk, c1 = std::min(op.hidden, c0 + op.chunk);
  const int64_t rows = program.rows();
  float* out = program.buffer(op.out);
  kernels::apply_block_conv_channels(op.base_kernel, program.buffer(op.coefficients), op.side,
                                     shape, program.buffer(op.in), rows, c0, c1, out);
  if (op.residual == kNoBuffer) return;
  float* residual = program.buffer(op.residual);
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t c = c0; c < c1; ++c) residual[t * op.hidden + c] += out[t * op.hidden + c];
  }
}

void top_k(const TopKOperands& op, int64_t row, const Program& program) {
  if (row >= program.rows() - op.first_row) return;
  kernels::top_k(program.buffer(op.logits) + row * op.stride, op.vocab, op.k, op.out + row * op.k);
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
  const float* x = program.buffer(input->buffer) + program.first_row(*input) * width;
  for (int64_t n = 0; n < program.input_rows(*input); ++n) {
    normalise_row(input->norm, input->norm_weight, input->eps, x + n * width, width,
                  context.normalised + n * width);
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
    case Opcode::kProjection:
      projection(std::get<ProjectionOperands>(ins.operands), task, program, context);
      return;
    case Opcode::kGateUpSilu:
      gate_up(std::get<GateUpOperands>(ins.operands), task, program, context);
      return;
    case Opcode::kKvAppend:
      kv_append(std::get<KvAppendOperands>(ins.operands).attention, task, program);
      return;
    case Opcode::kAttention: {
      const auto& op = std::get<AttentionOperands>(ins.operands);
      if (op.row_block > 0) {
        attention_rows(op, task, program);
      } else {
        attention(op, task, program);
      }
      return;
    }
    case Opcode::kDeltaNet:
      run_delta_net_key_head(std::get<DeltaNetOperands>(ins.operands), task, program,
                             context.scratch);
      return;
    case Opcode::kLmHeadArgmax:
      lm_head(std::get<LmHeadOperands>(ins.operands), task, program, context);
      return;
    case Opcode::kArgmax:
      argmax(std::get<ArgmaxOperands>(ins.operands), program);
      return;
    case Opcode::kNormRows:
      norm_rows(std::get<NormRowsOperands>(ins.operands), task, program);
      return;
    case Opcode::kBlockConv:
      block_conv(std::get<BlockConvOperands>(ins.operands), task, program);
      return;
    case Opcode::kWindowAttention:
      run_window_attention_kv_head(std::get<WindowAttentionOperands>(ins.operands), task, program,
                                   context.scratch);
      return;
    case Opcode::kTopK:
      top_k(std::get<TopKOperands>(ins.operands), task, program);
      return;
    case Opcode::kMoeRoute:
      run_moe_route(std::get<MoeRouteOperands>(ins.operands), program, context.scratch);
      return;
    case Opcode::kMoeExperts:
      run_moe_experts_task(std::get<MoeExpertsOperands>(ins.operands), task, program,
                           context.scratch);
      return;
    case Opcode::kMoeDown:
      run_moe_down_task(std::get<MoeDownOperands>(ins.operands), task, program, context.scratch);
      return;
    case Opcode::kRowAttention:
      run_row_attention_kv_head(std::get<RowAttentionOperands>(ins.operands), task, program);
      return;
    case Opcode::kGatedResidual:
      gated_residual(std::get<GatedResidualOperands>(ins.operands), task, program);
      return;
    case Opcode::kMoeMix:
      run_moe_mix_row(std::get<MoeMixOperands>(ins.operands), task, program);
      return;
    case Opcode::kResidualMix:
      run_residual_mix_row(std::get<ResidualMixOperands>(ins.operands), task, program,
                           context.scratch);
      return;
    case Opcode::kKda:
      run_kda_head(std::get<KdaOperands>(ins.operands), task, program, context.scratch);
      return;
    case Opcode::kLatentAppend:
      run_latent_append_row(std::get<LatentAppendOperands>(ins.operands).attention, task, program);
      return;
    case Opcode::kLatentAttention:
      run_latent_attention_head(std::get<LatentAttentionOperands>(ins.operands), task, program,
                                context.scratch);
      return;
    case Opcode::kRingAppend:
      run_ring_append_kv_head(std::get<RingAppendOperands>(ins.operands), task, program,
                              context.scratch);
      return;
    case Opcode::kAllReduce:
      run_all_reduce(std::get<AllReduceOperands>(ins.operands), program);
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
