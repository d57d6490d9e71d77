// The megakernel program of a Qwen3.8 decode step: determinism across thread counts and
// executors, agreement with the reference forward, independent rows at mixed positions, and
// verify rows with commit(k) for every k (ARCHITECTURE.md "Program and executors").
#include <gtest/gtest.h>

#include <cstring>

#include "../support/matmul_inputs_support.h"
#include "base/error.h"
#include "qwen38_test_util.h"

namespace md::test {
namespace {

const std::string kFixture = "tiny-qwen38-hd256";
// Qwen3.5-MoE: the same step with the routing and expert instructions in place of the MLP.
const std::string kMoeFixture = "tiny-qwen35-moe";

std::unique_ptr<Qwen38Model> model_with(
    ExecutorKind executor, int threads, const std::string& fixture = kFixture,
    kernels::MatmulInputs inputs = kernels::MatmulInputs::kF32) {
  return load_fixture(fixture, KvCacheType::kF32, Qwen38Options{}, threads, executor, inputs);
}

std::vector<int32_t> prompt_of(int64_t length, int seed) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i)
    ids.push_back(static_cast<int32_t>((i * 97 + seed * 31 + 3) % 500));
  return ids;
}

// Prefill with the reference forward, then `steps` decode steps of one sequence; returns the
// logits of every step.
std::vector<std::vector<float>> decode_run(Qwen38Model& model, const std::vector<int32_t>& prompt,
                                           int steps) {
  auto state = model.new_sequence(256);
  std::vector<float> logits;
  model.forward(*state, prompt, LogitRows::kLast, logits);
  std::vector<std::vector<float>> all;
  for (int s = 0; s < steps; ++s) {
    int32_t token = argmax(logits.data(), model.vocab_size());
    SequenceState* one = state.get();
    model.decode(std::span(&one, 1), std::span(&token, 1), logits);
    all.push_back(logits);
  }
  return all;
}

TEST(Qwen38Step, BitIdenticalForAnyThreadCountAndEitherExecutor) {
  for (const std::string& fixture : {kFixture, kMoeFixture}) {
    std::vector<int32_t> prompt = prompt_of(37, 1);
    auto baseline = decode_run(*model_with(ExecutorKind::kMega, 1, fixture), prompt, 12);
    for (auto [executor, threads] : {std::pair{ExecutorKind::kMega, 2},
                                     {ExecutorKind::kMega, 4},
                                     {ExecutorKind::kOps, 1},
                                     {ExecutorKind::kOps, 3}}) {
      auto run = decode_run(*model_with(executor, threads, fixture), prompt, 12);
      for (std::size_t s = 0; s < run.size(); ++s) {
        ASSERT_TRUE(same_bits(run[s], baseline[s]))
            << fixture << ": " << (executor == ExecutorKind::kMega ? "mega" : "ops") << " with "
            << threads << " threads differs at step " << s;
      }
    }
  }
}

// The MoE step computes what the reference forward computes, bit for bit (the same kernels, the
// experts summed in the same order), while each chosen expert runs once for all the rows that
// chose it.
TEST(Qwen38Step, MoeStepEqualsTheReferenceForwardBitwise) {
  std::vector<int32_t> prompt = prompt_of(20, 2);
  auto mega = decode_run(*model_with(ExecutorKind::kMega, 2, kMoeFixture), prompt, 16);
  auto reference = decode_run(*model_with(ExecutorKind::kReference, 2, kMoeFixture), prompt, 16);
  for (std::size_t s = 0; s < mega.size(); ++s) {
    ASSERT_TRUE(same_bits(mega[s], reference[s])) << "step " << s;
  }
}

TEST(Qwen38Step, MoeRowsShareOnePassPerChosenExpert) {
  auto model = model_with(ExecutorKind::kMega, 2, kMoeFixture);
  const Qwen38Config& c = model->config();
  program::Program* step = model->decode_program(8);
  ASSERT_NE(step, nullptr);
  const std::string listing = step->describe();
  for (const char* op : {"moe_route", "moe_experts", "moe_down"}) {
    EXPECT_NE(listing.find(op), std::string::npos) << op;
  }
  // 8 rows choose 8·k (expert, row) pairs among 16 experts: the experts instruction has a slot
  // per distinct expert (at most 16), not one per pair.
  for (const program::Instruction& ins : step->instructions()) {
    if (ins.opcode() != program::Opcode::kMoeExperts) continue;
    const auto& op = std::get<program::MoeExpertsOperands>(ins.operands);
    EXPECT_EQ(op.plan->slots(), std::min(c.moe.experts, 8 * c.moe.experts_per_token));
    EXPECT_LT(op.plan->slots(), 8 * c.moe.experts_per_token);
  }
  // After a step of 8 sequences, every plan lists distinct experts in ascending order, each with
  // its rows ascending, and every row appears exactly k times.
  std::vector<std::unique_ptr<SequenceState>> states;
  std::vector<SequenceState*> rows;
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  for (int r = 0; r < 8; ++r) {
    states.push_back(model->new_sequence(64));
    model->forward(*states.back(), prompt_of(3 + r, r), LogitRows::kLast, logits);
    rows.push_back(states.back().get());
    tokens.push_back(static_cast<int32_t>(17 * r + 5));
  }
  model->decode(rows, tokens, logits);
  int plans = 0;
  int64_t experts_run = 0;
  for (const program::Instruction& ins : step->instructions()) {
    if (ins.opcode() != program::Opcode::kMoeRoute) continue;
    const program::MoePlan& plan = *std::get<program::MoeRouteOperands>(ins.operands).plan;
    ++plans;
    experts_run += plan.used;
    std::vector<int64_t> per_row(8, 0);
    for (int64_t u = 0; u < plan.used; ++u) {
      if (u > 0) {
        EXPECT_LT(plan.expert[static_cast<std::size_t>(u - 1)],
                  plan.expert[static_cast<std::size_t>(u)]);
      }
      for (int32_t j = 0; j < plan.row_count[static_cast<std::size_t>(u)]; ++j) {
        ++per_row[static_cast<std::size_t>(plan.row(u, j))];
      }
    }
    EXPECT_LT(plan.used, 8 * c.moe.experts_per_token) << "no two rows shared an expert";
    for (int64_t n : per_row) EXPECT_EQ(n, c.moe.experts_per_token);
  }
  EXPECT_EQ(plans, c.num_layers);
  // The step reports what it read: each distinct expert once (bf16 gate, up and down: 3·I·H·2
  // bytes) in place of the 1-row figure's k experts per layer.
  const auto per_expert = static_cast<std::size_t>(3 * c.moe.intermediate * c.hidden_size * 2);
  const std::size_t one_row = model->decode_weight_bytes();
  EXPECT_EQ(model->last_step_weight_bytes(),
            one_row - static_cast<std::size_t>(plans * c.moe.experts_per_token) * per_expert +
                static_cast<std::size_t>(experts_run) * per_expert);
  EXPECT_GT(model->last_step_weight_bytes(), one_row);
  model->decode(std::span(rows).first(1), std::span(tokens).first(1), logits);
  EXPECT_EQ(model->last_step_weight_bytes(), one_row);
  // The reference executor runs a whole forward per row.
  auto reference = model_with(ExecutorKind::kReference, 2, kMoeFixture);
  std::vector<std::unique_ptr<SequenceState>> own;
  std::vector<SequenceState*> three;
  for (int r = 0; r < 3; ++r) {
    own.push_back(reference->new_sequence(64));
    reference->forward(*own.back(), prompt_of(3 + r, r), LogitRows::kLast, logits);
    three.push_back(own.back().get());
  }
  reference->decode(three, std::span(tokens).first(3), logits);
  EXPECT_EQ(reference->last_step_weight_bytes(), 3 * one_row);
}

// Every instruction of the step is plain data a second executor could read: no family kernels;
// each delta-net layer is one delta_net instruction with a task per key head that waits only for
// the projection tiles of its own channels (never for the whole projection).
TEST(Qwen38Step, ProgramIsPlainDataWithPerKeyHeadDeltaNetWaits) {
  auto model = model_with(ExecutorKind::kMega, 2);
  for (int64_t rows : {1, 4}) {
    const program::Program* step = model->decode_program(rows);
    ASSERT_NE(step, nullptr);
    int delta_nets = 0;
    for (const program::Instruction& ins : step->instructions()) {
      EXPECT_NE(ins.opcode(), program::Opcode::kFamilyKernel) << ins.name;
      if (ins.opcode() != program::Opcode::kDeltaNet) continue;
      ++delta_nets;
      const auto& op = std::get<program::DeltaNetOperands>(ins.operands);
      EXPECT_EQ(ins.tasks, op.key_heads) << ins.name;
      EXPECT_TRUE(ins.waits.empty()) << ins.name;
      ASSERT_EQ(static_cast<int64_t>(ins.task_waits.size()), ins.tasks) << ins.name;
      const program::Instruction& producer =
          step->instructions()[static_cast<std::size_t>(ins.task_waits[0][0].producer)];
      for (const auto& waits : ins.task_waits) {
        int64_t tiles = 0;
        for (const program::Dependency& d : waits) tiles += d.end - d.begin;
        EXPECT_GT(tiles, 0) << ins.name;
        if (ins.tasks > 1) {
          EXPECT_LT(tiles, producer.tasks) << ins.name;
        }
      }
    }
    EXPECT_GT(delta_nets, 0);
    EXPECT_NE(step->describe().find("delta_net"), std::string::npos);
  }
}

TEST(Qwen38Step, MatchesTheReferenceForward) {
  for (const std::string& fixture : qwen38_fixture_names()) {
    std::vector<int32_t> prompt = prompt_of(20, 2);
    auto mega = decode_run(*model_with(ExecutorKind::kMega, 2, fixture), prompt, 16);
    auto reference = decode_run(*model_with(ExecutorKind::kReference, 2, fixture), prompt, 16);
    for (std::size_t s = 0; s < mega.size(); ++s) {
      // Same kernels in the same per-row order: expected bitwise; the bound is the goldens'.
      EXPECT_LE(relative_error(mega[s].data(), reference[s].data(), mega[s].size()), 1e-3)
          << fixture << " step " << s;
    }
  }
}

// With bf16 matmul inputs the program and the reference forward still run the same kernels in
// the same per-row order: bitwise equal.
TEST(Qwen38Step, Bf16InputsMatchTheReferenceForwardBitwise) {
  if (!bf16_matmul_inputs_supported()) GTEST_SKIP() << "bf16 matmul inputs cannot run here";
  const auto bf16 = kernels::MatmulInputs::kBf16;
  for (const std::string& fixture : qwen38_fixture_names()) {
    std::vector<int32_t> prompt = prompt_of(20, 2);
    auto mega = decode_run(*model_with(ExecutorKind::kMega, 2, fixture, bf16), prompt, 16);
    auto reference =
        decode_run(*model_with(ExecutorKind::kReference, 2, fixture, bf16), prompt, 16);
    auto f32 = decode_run(*model_with(ExecutorKind::kMega, 2, fixture), prompt, 16);
    for (std::size_t s = 0; s < mega.size(); ++s) {
      ASSERT_TRUE(same_bits(mega[s], reference[s])) << fixture << " step " << s;
    }
    // The option is the model's: the f32 model beside it is not in the mode.
    EXPECT_FALSE(same_bits(mega[0], f32[0])) << fixture;
  }
}

TEST(Qwen38Step, ProgramArgmaxEqualsArgmaxOfLogits) {
  auto model = model_with(ExecutorKind::kMega, 2);
  auto state = model->new_sequence(64);
  std::vector<float> logits;
  model->forward(*state, prompt_of(5, 3), LogitRows::kLast, logits);
  for (int s = 0; s < 8; ++s) {
    int32_t token = argmax(logits.data(), model->vocab_size());
    SequenceState* one = state.get();
    model->decode(std::span(&one, 1), std::span(&token, 1), logits);
    EXPECT_EQ(model->last_greedy().at(0), argmax(logits.data(), model->vocab_size()));
  }
}

// Independent rows: three sequences at different positions decoded in one step give exactly what
// each gives alone (a row's arithmetic never depends on the other rows).
// Three sequences decoded together give each row's logits and drafter taps exactly as that
// sequence decoded alone — on the program and on the reference path (whose multi-row decode is
// one forward per sequence and must keep every row's taps).
TEST(Qwen38Step, IndependentRowsAtMixedPositionsEqualSingleRows) {
  for (auto [fixture, executor] : {std::pair{kFixture, ExecutorKind::kMega},
                                   {kFixture, ExecutorKind::kReference},
                                   {kMoeFixture, ExecutorKind::kMega}}) {
    SCOPED_TRACE(fixture + (executor == ExecutorKind::kMega ? " mega" : " reference"));
    auto model = model_with(executor, 2, fixture);
    model->set_tap_layers({1, model->config().num_layers - 1});
    const auto vocab = static_cast<std::ptrdiff_t>(model->vocab_size());
    std::vector<std::vector<int32_t>> prompts = {prompt_of(3, 4), prompt_of(40, 5),
                                                 prompt_of(17, 6)};
    std::vector<std::unique_ptr<SequenceState>> batch, alone;
    std::vector<int32_t> next;
    std::vector<float> logits;
    for (const auto& prompt : prompts) {
      batch.push_back(model->new_sequence(128));
      alone.push_back(model->new_sequence(128));
      model->forward(*batch.back(), prompt, LogitRows::kLast, logits);
      model->forward(*alone.back(), prompt, LogitRows::kLast, logits);
      next.push_back(argmax(logits.data(), model->vocab_size()));
    }
    for (int step = 0; step < 6; ++step) {
      std::vector<SequenceState*> states = {batch[0].get(), batch[1].get(), batch[2].get()};
      std::vector<float> batched;
      model->decode(states, next, batched);
      const std::vector<float> batched_taps = model->last_taps();
      ASSERT_EQ(batched_taps.size(),
                3u * 2u * static_cast<std::size_t>(model->config().hidden_size));
      const auto tap_row = static_cast<std::ptrdiff_t>(batched_taps.size() / 3);
      std::vector<int32_t> following;
      for (std::size_t r = 0; r < 3; ++r) {
        SequenceState* one = alone[r].get();
        model->decode(std::span(&one, 1), std::span(&next[r], 1), logits);
        const auto at = static_cast<std::ptrdiff_t>(r);
        std::vector<float> row(batched.begin() + at * vocab, batched.begin() + (at + 1) * vocab);
        ASSERT_TRUE(same_bits(row, logits)) << "row " << r << " step " << step;
        std::vector<float> taps(batched_taps.begin() + at * tap_row,
                                batched_taps.begin() + (at + 1) * tap_row);
        ASSERT_TRUE(same_bits(taps, model->last_taps())) << "taps of row " << r << " step " << step;
        following.push_back(argmax(logits.data(), model->vocab_size()));
      }
      next = following;
    }
  }
}

// Verify rows: one pass over 8 tokens equals 8 decode steps bitwise, and commit(k) leaves exactly
// the state k decode steps leave, for every k; decoding then continues identically.
void check_verify_rows_commit_every_prefix(
    kernels::MatmulInputs inputs = kernels::MatmulInputs::kF32,
    const std::string& fixture = kFixture) {
  for (ExecutorKind executor : {ExecutorKind::kMega, ExecutorKind::kOps}) {
    auto model = model_with(executor, 2, fixture, inputs);
    std::vector<int32_t> prompt = prompt_of(30, 7);
    std::vector<int32_t> block = prompt_of(8, 8);
    auto base = model->new_sequence(128);
    std::vector<float> logits;
    model->forward(*base, prompt, LogitRows::kLast, logits);

    // The stepwise truth: states after 0..8 tokens and the logits of each step.
    std::vector<std::unique_ptr<SequenceState>> after;
    std::vector<std::vector<float>> step_logits;
    after.push_back(base->clone());
    for (int32_t token : block) {
      auto state = after.back()->clone();
      SequenceState* one = state.get();
      model->decode(std::span(&one, 1), std::span(&token, 1), logits);
      step_logits.push_back(logits);
      after.push_back(std::move(state));
    }
    for (int64_t k = 0; k <= 8; ++k) {
      auto state = base->clone();
      std::vector<float> rows;
      model->verify(*state, block, rows);
      for (std::size_t r = 0; r < block.size(); ++r) {
        std::vector<float> row(
            rows.begin() + static_cast<std::ptrdiff_t>(r * model->vocab_size()),
            rows.begin() + static_cast<std::ptrdiff_t>((r + 1) * model->vocab_size()));
        ASSERT_TRUE(same_bits(row, step_logits[r])) << "verify row " << r;
      }
      model->commit(*state, k);
      ASSERT_TRUE(same_state(*model, *state, *after[static_cast<std::size_t>(k)]))
          << "commit(" << k << ")";
      // The next step after the commit matches the stepwise continuation.
      int32_t token = 42;
      SequenceState* one = state.get();
      model->decode(std::span(&one, 1), std::span(&token, 1), logits);
      auto truth = after[static_cast<std::size_t>(k)]->clone();
      std::vector<float> expected;
      SequenceState* other = truth.get();
      model->decode(std::span(&other, 1), std::span(&token, 1), expected);
      ASSERT_TRUE(same_bits(logits, expected)) << "decode after commit(" << k << ")";
    }
  }
}

TEST(Qwen38Step, VerifyRowsCommitEveryPrefixExactly) {
  check_verify_rows_commit_every_prefix();
}

// MoE verify rows (DFlash2's rounds on a Qwen3.5-MoE target): the block's rows route and share
// experts as independent rows do, and equal the stepwise decode.
TEST(Qwen38Step, MoeVerifyRowsCommitEveryPrefixExactly) {
  check_verify_rows_commit_every_prefix(kernels::MatmulInputs::kF32, kMoeFixture);
}

// The bf16-input kernels keep the determinism contract: 8 verify rows are 8 decode steps.
TEST(Qwen38Step, Bf16InputsVerifyRowsCommitEveryPrefixExactly) {
  if (!bf16_matmul_inputs_supported()) GTEST_SKIP() << "bf16 matmul inputs cannot run here";
  check_verify_rows_commit_every_prefix(kernels::MatmulInputs::kBf16);
}

TEST(Qwen38Step, BadStepInputsAreErrors) {
  auto model = model_with(ExecutorKind::kMega, 1);
  auto state = model->new_sequence(4);
  std::vector<float> logits;
  model->forward(*state, prompt_of(4, 9), LogitRows::kLast, logits);
  int32_t token = 1;
  SequenceState* one = state.get();
  EXPECT_THROW(model->decode(std::span(&one, 1), std::span(&token, 1), logits), Error);  // full
  auto fresh = model->new_sequence(8);
  SequenceState* twice[2] = {fresh.get(), fresh.get()};
  int32_t tokens[2] = {1, 2};
  EXPECT_THROW(model->decode(twice, tokens, logits), Error);  // same sequence twice
  int32_t bad = 99999;
  SequenceState* f = fresh.get();
  EXPECT_THROW(model->decode(std::span(&f, 1), std::span(&bad, 1), logits), Error);
  EXPECT_EQ(fresh->position(), 0);
}

}  // namespace
}  // namespace md::test
