// The fused Muse Spark step (musespark_step.h): plain-data instructions only, a task per KV head
// that waits for its own columns, and the same bits as the reference forward on both executors,
// any thread count, independent rows at mixed positions and verify blocks, through the sliding
// layers' ring wrapping around.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <variant>

#include "musespark_test_util.h"
#include "program/instruction.h"

namespace md::test {
namespace {

using md::testing::MuseAblation;

constexpr int64_t kCapacity = 256;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int32_t> prompt_of(const MuseSparkConfig& c, int64_t n, int32_t seed) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    ids.push_back(static_cast<int32_t>((seed * 131 + i * 37) % c.vocab_used));
  }
  return ids;
}

std::unique_ptr<MuseSparkModel> model_with(const std::string& fixture, ExecutorKind executor,
                                           int threads, KvCacheType kv = KvCacheType::kBf16,
                                           MuseAblation ablation = MuseAblation::kNone,
                                           DenseWeights dense = DenseWeights::kAsStored) {
  auto model = load_muse(fixture, kv, ablation, threads, dense);
  EXPECT_TRUE(model->set_executor(executor));
  return model;
}

// A 12-token prompt, then `steps` greedy decode steps: each step's logits. The positions run past
// both fixtures' windows (16 and 8), so the sliding layers' rings wrap.
std::vector<std::vector<float>> decode_run(MuseSparkModel& model, int64_t steps) {
  auto state = model.new_sequence(kCapacity);
  std::vector<float> logits;
  model.forward(*state, prompt_of(model.config(), 12, 3), LogitRows::kLast, logits);
  std::vector<std::vector<float>> out;
  SequenceState* one = state.get();
  for (int64_t s = 0; s < steps; ++s) {
    int32_t token = argmax(logits.data(), model.vocab_size());
    model.decode(std::span(&one, 1), std::span(&token, 1), logits);
    out.push_back(logits);
  }
  return out;
}

class MuseStepTest : public ::testing::TestWithParam<std::string> {};

void expect_verify_equals_prefill(MuseSparkModel& model);

// Every instruction is plain data a second executor could read; attention is one row_attention
// per layer with a task per KV head that waits only for some of its layer's projection tiles.
TEST_P(MuseStepTest, ProgramIsPlainDataWithPerKvHeadAttentionWaits) {
  auto model = model_with(GetParam(), ExecutorKind::kMega, 2);
  const MuseSparkConfig& c = model->config();
  for (int64_t rows : {1, 4}) {
    const program::Program* step = model->decode_program(rows);
    ASSERT_NE(step, nullptr);
    int attentions = 0;
    std::set<program::Opcode> seen;
    for (const program::Instruction& ins : step->instructions()) {
      EXPECT_NE(ins.opcode(), program::Opcode::kFamilyKernel) << ins.name;
      seen.insert(ins.opcode());
      if (ins.opcode() != program::Opcode::kRowAttention) continue;
      ++attentions;
      ASSERT_EQ(ins.tasks, c.num_key_value_heads) << ins.name;
      ASSERT_EQ(static_cast<int64_t>(ins.task_waits.size()), c.num_key_value_heads);
      const program::Dependency& first = ins.task_waits[0][0];
      const program::Instruction& qkvg =
          step->instructions()[static_cast<std::size_t>(first.producer)];
      for (const auto& waits : ins.task_waits) {
        int64_t tiles = 0;
        for (const program::Dependency& d : waits) tiles += d.end - d.begin;
        // A head's columns of q, gate, k and v: never every tile of the projection when there
        // are several KV heads.
        if (c.num_key_value_heads > 1) {
          EXPECT_LT(tiles, qkvg.tasks) << ins.name;
        }
        EXPECT_GT(tiles, 0) << ins.name;
      }
    }
    EXPECT_EQ(attentions, c.num_layers);
    for (const program::Opcode op :
         {program::Opcode::kGatedResidual, program::Opcode::kMoeRoute, program::Opcode::kMoeExperts,
          program::Opcode::kMoeDown, program::Opcode::kMoeMix, program::Opcode::kLmHeadArgmax}) {
      EXPECT_TRUE(seen.count(op)) << program::opcode_name(op);
    }
    EXPECT_NE(step->describe().find("row_attention"), std::string::npos);
  }
}

// Mega and ops, 1 to 3 threads, bf16 and f32 caches: every step's logits are the reference
// forward's, bit for bit (the same kernels in the same per-row order).
TEST_P(MuseStepTest, MegaAndOpsEqualTheReferenceBitwise) {
  for (const KvCacheType kv : {KvCacheType::kBf16, KvCacheType::kF32}) {
    auto reference_model = model_with(GetParam(), ExecutorKind::kReference, 1, kv);
    const auto reference = decode_run(*reference_model, 30);
    for (const ExecutorKind executor : {ExecutorKind::kMega, ExecutorKind::kOps}) {
      for (const int threads : {1, 2, 3}) {
        SCOPED_TRACE(std::string(program::executor_name(executor)) + " " + std::to_string(threads) +
                     " threads");
        auto model = model_with(GetParam(), executor, threads, kv);
        const auto fused = decode_run(*model, 30);
        for (std::size_t s = 0; s < fused.size(); ++s) {
          ASSERT_TRUE(same_bits(fused[s], reference[s])) << "step " << s;
        }
        // The step's own argmax is the logits'.
        EXPECT_EQ(model->last_greedy().at(0), argmax(fused.back().data(), model->vocab_size()));
      }
    }
  }
}

// With the dense matrices in int8 (§7) the fused step runs the int8 tiles the reference runs.
TEST_P(MuseStepTest, Int8DenseMegaEqualsTheReferenceBitwise) {
  const auto int8 = DenseWeights::kInt8;
  auto reference_model = model_with(GetParam(), ExecutorKind::kReference, 1, KvCacheType::kBf16,
                                    MuseAblation::kNone, int8);
  auto model =
      model_with(GetParam(), ExecutorKind::kMega, 2, KvCacheType::kBf16, MuseAblation::kNone, int8);
  auto as_stored = model_with(GetParam(), ExecutorKind::kMega, 2);
  const auto reference = decode_run(*reference_model, 20);
  const auto fused = decode_run(*model, 20);
  for (std::size_t s = 0; s < fused.size(); ++s) {
    ASSERT_TRUE(same_bits(fused[s], reference[s])) << "step " << s;
  }
  EXPECT_FALSE(same_bits(fused[0], decode_run(*as_stored, 1)[0]));  // the option took effect
}

// The negative control of the comparison above: a reference whose sliding layers see one key
// more agrees with the fused step until a sliding layer's window is full, then differs.
TEST_P(MuseStepTest, AReferenceWithAWindowOneLongerDiffersOnceTheWindowFills) {
  auto longer = model_with(GetParam(), ExecutorKind::kReference, 1, KvCacheType::kBf16,
                           MuseAblation::kWindowOneLonger);
  auto fused = model_with(GetParam(), ExecutorKind::kMega, 2);
  const auto a = decode_run(*longer, 30);
  const auto b = decode_run(*fused, 30);
  const int64_t window = fused->config().sliding_window;
  // Step s decodes position 12 + s; its query sees window + 1 keys once 12 + s >= window.
  for (int64_t s = 0; s < 30; ++s) {
    const bool full = 12 + s >= window;
    EXPECT_EQ(same_bits(a[static_cast<std::size_t>(s)], b[static_cast<std::size_t>(s)]), !full)
        << "step " << s;
  }
}

// Three sequences at different positions decoded in one fused step: each row's logits and taps
// are what that sequence gets decoded alone.
TEST_P(MuseStepTest, IndependentRowsAtMixedPositionsEqualSingleRows) {
  auto model = model_with(GetParam(), ExecutorKind::kMega, 2);
  const MuseSparkConfig& c = model->config();
  model->set_tap_layers({1, c.num_layers - 1});
  const auto vocab = static_cast<std::size_t>(c.vocab_size);
  const std::size_t tap_floats = 2 * static_cast<std::size_t>(c.hidden_size);
  const std::vector<int64_t> lengths = {3, 40, 17};
  std::vector<std::unique_ptr<SequenceState>> batch, alone;
  std::vector<float> logits;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const auto prompt = prompt_of(c, lengths[i], static_cast<int32_t>(i) + 4);
    batch.push_back(model->new_sequence(kCapacity));
    alone.push_back(model->new_sequence(kCapacity));
    model->forward(*batch.back(), prompt, LogitRows::kLast, logits);
    model->forward(*alone.back(), prompt, LogitRows::kLast, logits);
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> tokens = {static_cast<int32_t>(11 + step),
                                   static_cast<int32_t>(200 + step),
                                   static_cast<int32_t>(5 * step + 1)};
    std::vector<SequenceState*> rows;
    for (auto& s : batch) rows.push_back(s.get());
    std::vector<float> together;
    model->decode(rows, tokens, together);
    const std::vector<float> taps = model->last_taps();
    ASSERT_EQ(taps.size(), 3 * tap_floats);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      SequenceState* one = alone[i].get();
      model->decode(std::span(&one, 1), std::span(&tokens[i], 1), logits);
      EXPECT_EQ(std::memcmp(logits.data(), together.data() + i * vocab, vocab * sizeof(float)), 0)
          << "step " << step << " row " << i;
      EXPECT_EQ(std::memcmp(model->last_taps().data(), taps.data() + i * tap_floats,
                            tap_floats * sizeof(float)),
                0)
          << "step " << step << " row " << i;
    }
  }
}

// Verify blocks on both executors: the block's logits are the prefill's (the reference forward),
// and a commit of fewer rows continues as if only those were fed.
TEST_P(MuseStepTest, VerifyOnBothExecutorsEqualsThePrefill) {
  for (const ExecutorKind executor : {ExecutorKind::kMega, ExecutorKind::kOps}) {
    SCOPED_TRACE(program::executor_name(executor));
    expect_verify_equals_prefill(*model_with(GetParam(), executor, 2));
  }
}

void expect_verify_equals_prefill(MuseSparkModel& model) {
  const MuseSparkConfig& c = model.config();
  const auto ids = prompt_of(c, 30, 9);
  const auto vocab = static_cast<std::ptrdiff_t>(c.vocab_size);
  std::vector<float> prefill, logits;
  model.forward(*model.new_sequence(kCapacity), ids, LogitRows::kAll, prefill);
  auto state = model.new_sequence(kCapacity);
  model.forward(*state, std::vector<int32_t>(ids.begin(), ids.begin() + 20), LogitRows::kLast,
                logits);
  model.verify(*state, std::vector<int32_t>(ids.begin() + 20, ids.begin() + 28), logits);
  EXPECT_TRUE(same_bits(
      logits, std::vector<float>(prefill.begin() + 20 * vocab, prefill.begin() + 28 * vocab)));
  model.commit(*state, 3);
  EXPECT_EQ(state->position(), 23);
  model.verify(*state, std::vector<int32_t>(ids.begin() + 23, ids.begin() + 30), logits);
  EXPECT_TRUE(same_bits(
      logits, std::vector<float>(prefill.begin() + 23 * vocab, prefill.begin() + 30 * vocab)));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MuseStepTest, ::testing::ValuesIn(musespark_fixture_names()),
                         fixture_test_name);

// A fused step's bytes count the distinct experts its routing plans list: the same experts the
// reference's routing probe sees for the same rows.
TEST(MuseStepBytes, FusedStepCountsTheExpertsItsPlansList) {
  testing::MuseProbe probe;
  auto probed = std::make_unique<MuseSparkModel>(musespark_fixture_dir("muse-spark-tiny"),
                                                 ModelRunOptions{1}, MuseSparkOptions{{}, &probe});
  auto fused = load_muse("muse-spark-tiny", KvCacheType::kBf16, MuseAblation::kNone, 2);
  const MuseSparkConfig& c = fused->config();
  const std::vector<int32_t> tokens = {7, 300, 41, 999};
  std::vector<float> logits;
  for (MuseSparkModel* model : {probed.get(), fused.get()}) {
    std::vector<std::unique_ptr<SequenceState>> owned;
    std::vector<SequenceState*> rows;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      owned.push_back(model->new_sequence(kCapacity));
      model->forward(*owned.back(), prompt_of(c, 5 + static_cast<int64_t>(i), 1), LogitRows::kLast,
                     logits);
      rows.push_back(owned.back().get());
    }
    model->decode(rows, tokens, logits);
  }
  // The probe's last step: per layer, per row, k experts.
  const auto k = c.num_experts_per_token, n = static_cast<int64_t>(tokens.size());
  const std::vector<int32_t> routes(probe.routes.end() - c.num_layers * n * k, probe.routes.end());
  EXPECT_EQ(fused->last_step_weight_bytes(), probed->last_step_weight_bytes());
  std::size_t distinct_total = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    distinct_total +=
        std::set<int32_t>(routes.begin() + l * n * k, routes.begin() + (l + 1) * n * k).size();
  }
  EXPECT_GT(distinct_total, static_cast<std::size_t>(c.num_layers * k));  // rows chose differently
  EXPECT_GT(fused->last_step_weight_bytes(), fused->decode_weight_bytes());
}

}  // namespace
}  // namespace md::test
