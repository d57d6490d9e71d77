#include "program/cpu_moe.h"

#include <algorithm>
#include <array>
#include <vector>

#include "kernels/activations.h"
#include "kernels/expert_mix.h"

namespace md::program {

namespace {

std::size_t at(int64_t i) {
  return static_cast<std::size_t>(i);
}

// One (expert, row) pair of a step, with the row's weight for that expert and its rank among the
// row's choices.
struct Routed {
  int32_t expert = 0;
  int32_t row = 0;
  float weight = 0;
  int32_t rank = 0;
};

// Row `n`'s choices by the operands' scoring, in the router's order.
void choose(const MoeRouteOperands& op, const float* row, float* scratch,
            kernels::ExpertChoice* choices) {
  if (op.scoring == MoeScoring::kSigmoidBias) {
    kernels::route_sigmoid_bias_top_k(row, op.bias, op.experts, op.experts_per_token, op.multiplier,
                                      op.sum_epsilon, scratch, choices);
  } else {
    kernels::route_softmax_top_k(row, op.experts, op.experts_per_token, scratch, choices);
  }
}

}  // namespace

void run_moe_route(const MoeRouteOperands& op, const Program& program, float* scratch) {
  MoePlan& plan = *op.plan;
  const float* logits = program.buffer(op.logits);
  // The step's (expert, row) pairs; the one task runs on one worker at a time.
  thread_local std::vector<Routed> routed;
  routed.resize(at(program.rows() * op.experts_per_token));
  std::array<kernels::ExpertChoice, kernels::kMaxExpertsPerToken> choices{};
  int64_t count = 0;
  for (int64_t n = 0; n < program.rows(); ++n) {
    const float* row = logits + n * op.stride;
    choose(op, row, scratch, choices.data());
    for (int64_t j = 0; j < op.experts_per_token; ++j) {
      const kernels::ExpertChoice& c = choices[at(j)];
      if (c.expert < op.owned_begin || c.expert >= op.owned_end) {
        plan.choices[at(n * kernels::kMaxExpertsPerToken + j)] = {-1, 0, c.weight};
        continue;
      }
      routed[at(count++)] = {c.expert, static_cast<int32_t>(n), c.weight, static_cast<int32_t>(j)};
    }
    if (op.shared_gate_column >= 0) {
      plan.shared_scale[at(n)] = kernels::sigmoid(row[op.shared_gate_column]);
    }
  }
  // Ascending experts, and each expert's rows ascending: the order kMoeDown sums in.
  std::sort(routed.begin(), routed.begin() + count, [](const Routed& a, const Routed& b) {
    return a.expert != b.expert ? a.expert < b.expert : a.row < b.row;
  });
  // Entry i of the sorted pairs is entry i of the plan: each slot's entries are contiguous.
  plan.used = 0;
  for (int64_t i = 0; i < count; ++i) {
    const Routed& r = routed[at(i)];
    if (plan.used == 0 || plan.expert[at(plan.used - 1)] != r.expert) {
      plan.expert[at(plan.used)] = r.expert;
      plan.row_count[at(plan.used)] = 0;
      plan.first[at(plan.used)] = static_cast<int32_t>(i);
      ++plan.used;
    }
    const auto slot = at(plan.used - 1);
    const int32_t j = plan.row_count[slot]++;
    plan.rows[at(i)] = r.row;
    plan.weights[at(i)] = r.weight;
    plan.choices[at(r.row * kernels::kMaxExpertsPerToken + r.rank)] = {static_cast<int32_t>(slot),
                                                                       j, r.weight};
  }
}

void run_moe_experts_task(const MoeExpertsOperands& op, int64_t task, const Program& program,
                          float* scratch) {
  const int64_t slot = task / op.tiles_per_expert();
  const MoePlan& plan = *op.plan;
  if (slot >= plan.used) return;
  const int64_t r0 = (task % op.tiles_per_expert()) * op.tile_rows;
  const int64_t r1 = std::min(op.intermediate, r0 + op.tile_rows);
  const auto e = at(plan.expert[at(slot)]);
  const int64_t rows = plan.row_count[at(slot)];
  const float* input = program.buffer(op.input);
  float* up = scratch + plan.max_rows * op.hidden;
  // The expert's rows side by side, so that one pass over its weights serves them all: read in
  // place when they already are (one row, as in every single-sequence step), else gathered.
  const float* x = input + plan.row(slot, 0) * op.hidden;
  if (plan.row(slot, rows - 1) - plan.row(slot, 0) != rows - 1) {
    for (int64_t j = 0; j < rows; ++j) {
      const float* row = input + plan.row(slot, j) * op.hidden;
      std::copy(row, row + op.hidden, scratch + j * op.hidden);
    }
    x = scratch;
  }
  float* act = program.buffer(op.act) + plan.first[at(slot)] * op.intermediate;
  kernels::weight_tile(op.experts->gate[e], r0, r1, x, op.hidden, rows,
                       {act, op.intermediate, false});
  kernels::weight_tile(op.experts->up[e], r0, r1, x, op.hidden, rows, {up, op.intermediate, false});
  for (int64_t j = 0; j < rows; ++j) {
    kernels::gated_product(op.activation, act + j * op.intermediate + r0,
                           up + j * op.intermediate + r0, r1 - r0);
  }
}

void run_moe_down_task(const MoeDownOperands& op, int64_t task, const Program& program,
                       float* scratch) {
  const int64_t h0 = task * op.tile_rows, h1 = std::min(op.hidden, h0 + op.tile_rows);
  const int64_t width = h1 - h0;
  const MoePlan& plan = *op.plan;
  if (op.each != kNoBuffer) {
    for (int64_t slot = 0; slot < plan.used; ++slot) {
      const int64_t first = plan.first[at(slot)];
      kernels::weight_tile(op.experts->down[at(plan.expert[at(slot)])], h0, h1,
                           program.buffer(op.act) + first * op.intermediate, op.intermediate,
                           plan.row_count[at(slot)],
                           {program.buffer(op.each) + first * op.hidden, op.hidden, false});
    }
    return;
  }
  float* product = scratch;                          // [rows][hidden], columns [h0, h1) used
  float* sum = scratch + plan.max_rows * op.hidden;  // [rows][width]
  std::fill(sum, sum + program.rows() * width, 0.0f);
  const float* act = program.buffer(op.act);
  for (int64_t slot = 0; slot < plan.used; ++slot) {
    const int64_t rows = plan.row_count[at(slot)];
    kernels::weight_tile(op.experts->down[at(plan.expert[at(slot)])], h0, h1,
                         act + plan.first[at(slot)] * op.intermediate, op.intermediate, rows,
                         {product, op.hidden, false});
    for (int64_t j = 0; j < rows; ++j) {
      float* s = sum + plan.row(slot, j) * width;
      const float w = plan.weight(slot, j);
      for (int64_t r = h0; r < h1; ++r) s[r - h0] += product[j * op.hidden + r] * w;
    }
  }
  if (op.shared_down.rows > 0) {
    kernels::weight_tile(op.shared_down, h0, h1, program.buffer(op.shared_act), op.shared_down.cols,
                         program.rows(), {product, op.hidden, false});
    for (int64_t n = 0; n < program.rows(); ++n) {
      for (int64_t r = h0; r < h1; ++r) {
        sum[n * width + r - h0] += plan.shared_scale[at(n)] * product[n * op.hidden + r];
      }
    }
  }
  float* out = program.buffer(op.out);
  for (int64_t n = 0; n < program.rows(); ++n) {
    float* o = out + n * op.out_stride;
    const float* s = sum + n * width - h0;
    if (op.accumulate) {
      for (int64_t r = h0; r < h1; ++r) o[r] += s[r];
    } else {
      std::copy(s + h0, s + h1, o + h0);
    }
    if (op.copy_to == kNoBuffer) continue;
    std::copy(o + h0, o + h1,
              program.buffer(op.copy_to) + n * op.copy_stride + op.copy_offset + h0);
  }
}

void run_moe_mix_row(const MoeMixOperands& op, int64_t row, const Program& program) {
  if (row >= program.rows()) return;
  float* out = program.buffer(op.out) + row * op.width;
  std::fill(out, out + op.width, 0.0f);
  float* each = program.buffer(op.each);
  for (int64_t i = 0; i < op.experts_per_token; ++i) {
    const RowChoice& choice = op.plan->choice(row, i);
    if (choice.slot < 0) continue;  // another rank's expert
    float* o = each + static_cast<int64_t>(op.plan->entry(choice.slot, choice.entry)) * op.width;
    if (!op.normalise) {
      for (int64_t c = 0; c < op.width; ++c) out[c] += o[c] * choice.weight;
      continue;
    }
    kernels::mix_expert_output(o, op.scale, op.eps, choice.weight, op.width, out);
  }
}

}  // namespace md::program
