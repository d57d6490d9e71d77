// The fused Kimi K3 step (models/kimi/kimi_step.h): plain-data instructions only (residual_mix,
// kda with a task per head that waits for its own columns, latent_append and latent_attention,
// the MoE opcodes over MXFP4 experts), and the same bits as the reference forward on both
// executors and any thread count — decode rows of independent sequences, verify rows with the
// KDA snapshot after every row, the taps, and commit to every count — for both cache types.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kimi_test_util.h"
#include "models/kimi/kimi_model.h"
#include "models/kimi/kimi_synthetic.h"
#include "program/instruction.h"

namespace md {
namespace {

using test::kimi_fixture_path;

// Ids within every vocabulary here (the synthetic edges shape has 300).
const std::vector<int32_t> kPrompt = {200, 17, 260, 201, 45, 99, 7, 211, 102};
const std::vector<int32_t> kDrafts = {12, 288, 5, 160, 77, 131, 250, 9};
constexpr char kSynthetic[] = "synthetic:";

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int32_t argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) best = row[i] > row[best] ? i : best;
  return static_cast<int32_t>(best);
}

// A fixture checkpoint, or "synthetic:SHAPE" (weights generated in memory).
std::unique_ptr<KimiModel> model_with(const std::string& fixture, ExecutorKind executor,
                                      int threads, KvCacheType kv = KvCacheType::kBf16) {
  ModelRunOptions options;
  options.executor = executor;
  options.threads = threads;
  options.kv_cache = kv;
  if (fixture.starts_with(kSynthetic)) {
    return make_synthetic_kimi(fixture.substr(std::string(kSynthetic).size()), options);
  }
  return std::make_unique<KimiModel>(kimi_fixture_path(fixture), options);
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

KimiKdaSnapshot kda_of(const SequenceState& s) {
  const KimiSequenceState& data = dynamic_cast<const KimiState&>(s).data();
  return {data.conv_history, data.delta_state};
}

// The whole state: KDA, both latent caches, the position.
void expect_same_state(SequenceState& a, SequenceState& b) {
  EXPECT_EQ(a.position(), b.position());
  EXPECT_EQ(kda_of(a), kda_of(b));
  EXPECT_EQ(dynamic_cast<KimiState&>(a).data().latent_cache,
            dynamic_cast<KimiState&>(b).data().latent_cache);
  EXPECT_EQ(dynamic_cast<KimiState&>(a).data().latent_cache_bf16,
            dynamic_cast<KimiState&>(b).data().latent_cache_bf16);
}

std::vector<int32_t> drafts(int64_t rows) {
  return {kDrafts.begin(), kDrafts.begin() + rows};
}

KimiState& kimi(SequenceState& s) {
  return dynamic_cast<KimiState&>(s);
}

std::unique_ptr<SequenceState> prefilled(KimiModel& model) {
  auto state = model.new_sequence(64);
  std::vector<float> logits;
  model.forward(*state, kPrompt, LogitRows::kLast, logits);
  return state;
}

// The prompt, then `steps` greedy decode steps: each step's logits.
std::vector<std::vector<float>> decode_run(KimiModel& model, int64_t steps) {
  auto state = model.new_sequence(64);
  std::vector<float> logits;
  model.forward(*state, kPrompt, LogitRows::kLast, logits);
  std::vector<std::vector<float>> out;
  SequenceState* one = state.get();
  for (int64_t s = 0; s < steps; ++s) {
    int32_t token = argmax(logits.data(), model.vocab_size());
    model.decode(std::span(&one, 1), std::span(&token, 1), logits);
    out.push_back(logits);
  }
  return out;
}

class KimiStepTest : public ::testing::TestWithParam<std::string> {};

// Every instruction is plain data a second executor could read: a residual_mix per mix of §5.2,
// a kda per KDA layer with a task per head that waits for only some of the projection's tiles, a
// latent_append and a latent_attention per MLA layer, the MoE opcodes per MoE layer.
TEST_P(KimiStepTest, ProgramIsPlainDataWithPerHeadWaits) {
  auto model = model_with(GetParam(), ExecutorKind::kMega, 2);
  const KimiK3Config& c = model->config();
  for (int64_t rows : {1, 4}) {
    const program::Program* step = model->decode_program(rows);
    ASSERT_NE(step, nullptr);
    std::map<program::Opcode, int64_t> seen;
    for (const program::Instruction& ins : step->instructions()) {
      EXPECT_NE(ins.opcode(), program::Opcode::kFamilyKernel) << ins.name;
      ++seen[ins.opcode()];
      if (ins.opcode() != program::Opcode::kKda) continue;
      ASSERT_EQ(ins.tasks, c.kda_num_heads) << ins.name;
      ASSERT_EQ(static_cast<int64_t>(ins.task_waits.size()), c.kda_num_heads);
      const program::Instruction& in =
          step->instructions()[static_cast<std::size_t>(ins.task_waits[0][0].producer)];
      for (const auto& waits : ins.task_waits) {
        int64_t tiles = 0;
        for (const program::Dependency& d : waits) {
          if (d.producer == ins.task_waits[0][0].producer) tiles += d.end - d.begin;
        }
        EXPECT_GT(tiles, 0) << ins.name;
        EXPECT_LT(tiles, in.tasks) << ins.name;  // a head's columns, not the whole projection
      }
    }
    EXPECT_EQ(seen[program::Opcode::kResidualMix], 2 * c.num_layers + 1);
    EXPECT_EQ(seen[program::Opcode::kKda], c.num_kda_layers());
    EXPECT_EQ(seen[program::Opcode::kLatentAppend], c.num_mla_layers());
    EXPECT_EQ(seen[program::Opcode::kLatentAttention], c.num_mla_layers());
    for (const program::Opcode op : {program::Opcode::kMoeRoute, program::Opcode::kMoeExperts,
                                     program::Opcode::kMoeDown, program::Opcode::kMoeMix}) {
      EXPECT_EQ(seen[op], c.num_moe_layers()) << program::opcode_name(op);
    }
    EXPECT_EQ(seen[program::Opcode::kLmHeadArgmax], 1);
    const std::string listing = step->describe();
    for (const char* name : {"residual_mix", "kda", "latent_attention", "moe_experts"}) {
      EXPECT_NE(listing.find(name), std::string::npos) << name;
    }
  }
}

// Mega and ops, 1 to 3 threads, bf16 and f32 latent caches: every decode step's logits are the
// reference forward's, bit for bit (the same kernels in the same per-row order).
TEST_P(KimiStepTest, MegaAndOpsEqualTheReferenceBitwise) {
  for (const KvCacheType kv : {KvCacheType::kBf16, KvCacheType::kF32}) {
    auto reference_model = model_with(GetParam(), ExecutorKind::kReference, 1, kv);
    const auto reference = decode_run(*reference_model, 12);
    for (const ExecutorKind executor : {ExecutorKind::kMega, ExecutorKind::kOps}) {
      for (const int threads : {1, 2, 3}) {
        SCOPED_TRACE(std::string(program::executor_name(executor)) + " " + std::to_string(threads) +
                     " threads");
        auto model = model_with(GetParam(), executor, threads, kv);
        const auto fused = decode_run(*model, 12);
        for (std::size_t s = 0; s < fused.size(); ++s) {
          ASSERT_TRUE(same_bits(fused[s], reference[s])) << "step " << s;
        }
        // The step's own argmax is the logits'.
        EXPECT_EQ(model->last_greedy().at(0), argmax(fused.back().data(), model->vocab_size()));
      }
    }
  }
}

// Negative control: the comparison above notices a difference as small as the cache's rounding.
TEST_P(KimiStepTest, TheBitwiseComparisonNoticesTheCacheType) {
  auto bf16 = model_with(GetParam(), ExecutorKind::kMega, 2, KvCacheType::kBf16);
  auto f32 = model_with(GetParam(), ExecutorKind::kReference, 1, KvCacheType::kF32);
  EXPECT_FALSE(same_bits(decode_run(*bf16, 2)[1], decode_run(*f32, 2)[1]));
}

// Verify rows in one fused step equal the reference's verify (rows one after another): logits,
// taps and the KDA state after every row, for 1, 3 and 8 rows, both cache types and both
// executors; committing a count then decoding agrees too, the whole state included.
TEST_P(KimiStepTest, VerifyAndCommitEqualTheReferenceBitwise) {
  for (auto [kv, executor, threads] : {std::tuple{KvCacheType::kBf16, ExecutorKind::kMega, 3},
                                       {KvCacheType::kF32, ExecutorKind::kOps, 2}}) {
    auto reference = model_with(GetParam(), ExecutorKind::kReference, 1, kv);
    auto fused = model_with(GetParam(), executor, threads, kv);
    const int64_t layers = reference->config().num_layers;
    for (KimiModel* m : {reference.get(), fused.get()}) m->set_tap_layers({0, layers / 2});
    auto base_reference = prefilled(*reference);
    auto base_fused = prefilled(*fused);
    for (const int64_t rows : {1, 3, 8}) {
      for (int64_t kept = 0; kept <= rows; ++kept) {
        SCOPED_TRACE(std::string(program::executor_name(executor)) + " rows " +
                     std::to_string(rows) + " kept " + std::to_string(kept));
        auto r = base_reference->clone();
        auto f = base_fused->clone();
        std::vector<float> r_logits, f_logits;
        reference->verify(*r, drafts(rows), r_logits);
        fused->verify(*f, drafts(rows), f_logits);
        ASSERT_TRUE(same_bits(r_logits, f_logits));
        ASSERT_TRUE(same_bits(reference->last_taps(), fused->last_taps()));
        for (int64_t after = 0; after <= rows; ++after) {
          ASSERT_EQ(kimi(*r).kda_after(after), kimi(*f).kda_after(after)) << "after " << after;
        }
        reference->commit(*r, kept);
        fused->commit(*f, kept);
        expect_same_state(*r, *f);
        int32_t token = 42;
        SequenceState* rs = r.get();
        SequenceState* fs = f.get();
        reference->decode(std::span(&rs, 1), std::span(&token, 1), r_logits);
        fused->decode(std::span(&fs, 1), std::span(&token, 1), f_logits);
        EXPECT_TRUE(same_bits(r_logits, f_logits));
      }
    }
  }
}

// One state through verify, commit, verify, commit and decode: the second verify reuses the
// snapshots' memory and the swapped-in state of the first commit; every step agrees.
TEST_P(KimiStepTest, RepeatedVerifyRoundsOnOneStateAgree) {
  auto reference = model_with(GetParam(), ExecutorKind::kReference, 1);
  auto fused = model_with(GetParam(), ExecutorKind::kMega, 2);
  auto r = prefilled(*reference);
  auto f = prefilled(*fused);
  std::vector<float> r_logits, f_logits;
  for (auto [rows, kept] : {std::pair{8, 2}, {8, 5}, {4, 4}, {8, 0}, {6, 3}}) {
    SCOPED_TRACE(std::to_string(rows) + " rows, kept " + std::to_string(kept));
    reference->verify(*r, drafts(rows), r_logits);
    fused->verify(*f, drafts(rows), f_logits);
    ASSERT_TRUE(same_bits(r_logits, f_logits));
    reference->commit(*r, kept);
    fused->commit(*f, kept);
    expect_same_state(*r, *f);
  }
  int32_t token = 7;
  SequenceState* rs = r.get();
  SequenceState* fs = f.get();
  reference->decode(std::span(&rs, 1), std::span(&token, 1), r_logits);
  fused->decode(std::span(&fs, 1), std::span(&token, 1), f_logits);
  EXPECT_TRUE(same_bits(r_logits, f_logits));
}

// Several sequences at different positions in one fused decode step: each row's logits and taps
// are what the reference gives that sequence alone.
TEST_P(KimiStepTest, DecodeRowsOfSeveralSequencesEqualEachAlone) {
  auto reference = model_with(GetParam(), ExecutorKind::kReference, 1);
  auto fused = model_with(GetParam(), ExecutorKind::kMega, 2);
  for (KimiModel* m : {reference.get(), fused.get()}) m->set_tap_layers({1});
  std::vector<std::unique_ptr<SequenceState>> states;
  for (const int64_t length : {3, 9, 6}) {
    auto state = fused->new_sequence(64);
    std::vector<float> unused;
    fused->forward(*state, std::vector<int32_t>(kPrompt.begin(), kPrompt.begin() + length),
                   LogitRows::kLast, unused);
    states.push_back(std::move(state));
  }
  std::vector<std::unique_ptr<SequenceState>> alone;
  for (const auto& s : states) alone.push_back(s->clone());
  std::vector<int32_t> tokens = {31, 64, 200};
  std::vector<SequenceState*> rows = {states[0].get(), states[1].get(), states[2].get()};
  const auto vocab = static_cast<std::size_t>(fused->vocab_size());
  const auto hidden = static_cast<std::size_t>(fused->config().hidden_size);
  // Several steps, so that a row writing another sequence's state would show.
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<float> logits;
    fused->decode(rows, tokens, logits);
    const std::vector<float> taps = fused->last_taps();
    for (std::size_t i = 0; i < 3; ++i) {
      SequenceState* one = alone[i].get();
      std::vector<float> row;
      reference->decode(std::span(&one, 1), std::span(&tokens[i], 1), row);
      EXPECT_EQ(std::memcmp(row.data(), logits.data() + i * vocab, vocab * sizeof(float)), 0) << i;
      EXPECT_EQ(std::memcmp(reference->last_taps().data(), taps.data() + i * hidden,
                            hidden * sizeof(float)),
                0)
          << i;
      expect_same_state(*states[i], *alone[i]);
      tokens[i] = argmax(row.data(), fused->vocab_size());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KimiStepTest,
                         ::testing::Values("kimi-k3-tiny", "kimi-k3-small",
                                           "synthetic:kimi-k3-edges"),
                         param_name);

}  // namespace
}  // namespace md
