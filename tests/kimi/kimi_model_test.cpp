// KimiModel, the engine's view of Kimi K3 (models/kimi/kimi_model.h), on the scaled-down
// checkpoints: verify rows equal sequential decode steps (logits, KDA snapshots, taps; §15 test
// 6), commit returns to every count of kept rows (§15 test 7), a row of a multi-row decode does
// not depend on the other rows, prompts longer than one prefill piece, the fixture's tiktoken
// tokenizer, and the errors of bad calls.
#include "models/kimi/kimi_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "kimi_test_util.h"
#include "models/kimi/kimi_synthetic.h"
#include "models/model_loader.h"
#include "text/tokenizer.h"

namespace md {
namespace {

using test::kimi_fixture_path;

ModelRunOptions reference_options() {
  ModelRunOptions options;
  options.executor = ExecutorKind::kReference;
  options.threads = 1;
  return options;
}

KimiState& kimi(SequenceState& s) {
  return dynamic_cast<KimiState&>(s);
}

KimiKdaSnapshot kda_of(const SequenceState& s) {
  const KimiSequenceState& data = dynamic_cast<const KimiState&>(s).data();
  return {data.conv_history, data.delta_state};
}

std::vector<float> decode_one(KimiModel& model, SequenceState& state, int32_t token) {
  std::vector<float> logits;
  model.forward(state, std::span<const int32_t>(&token, 1), LogitRows::kLast, logits);
  return logits;
}

const std::vector<int32_t> kPrompt = {500, 17, 260, 301, 45, 99, 7, 311, 402};
const std::vector<int32_t> kDrafts = {12, 288, 5, 460, 77, 131, 250, 9};

class KimiModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = std::make_unique<KimiModel>(kimi_fixture_path(GetParam()), reference_options());
  }
  std::unique_ptr<SequenceState> prefilled() {
    auto state = model_->new_sequence(64);
    std::vector<float> logits;
    model_->forward(*state, kPrompt, LogitRows::kLast, logits);
    return state;
  }
  std::unique_ptr<KimiModel> model_;
};

// §15 test 6: an 8-row verify equals 8 decode steps — logits, the KDA state after every row and
// the taps, bit for bit (the rows run the decode form one after another).
TEST_P(KimiModelTest, VerifyEqualsSequentialDecodeWithSnapshotsAndTaps) {
  const std::vector<int64_t> taps = {0, model_->config().num_layers / 2,
                                     model_->config().num_layers - 1};
  model_->set_tap_layers(taps);
  auto verified = prefilled();
  auto stepped = verified->clone();
  std::vector<float> logits;
  model_->verify(*verified, kDrafts, logits);
  const std::vector<float> verify_taps = model_->last_taps();
  const auto vocab = static_cast<std::size_t>(model_->vocab_size());
  const std::size_t tap_row = taps.size() * static_cast<std::size_t>(model_->config().hidden_size);
  ASSERT_EQ(logits.size(), kDrafts.size() * vocab);
  ASSERT_EQ(verify_taps.size(), kDrafts.size() * tap_row);
  EXPECT_EQ(kimi(*verified).kda_after(0), kda_of(*stepped));
  for (std::size_t r = 0; r < kDrafts.size(); ++r) {
    const std::vector<float> row = decode_one(*model_, *stepped, kDrafts[r]);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), logits.begin() + r * vocab)) << "row " << r;
    EXPECT_TRUE(std::equal(model_->last_taps().begin(), model_->last_taps().end(),
                           verify_taps.begin() + r * tap_row))
        << "taps of row " << r;
    EXPECT_EQ(kimi(*verified).kda_after(static_cast<int64_t>(r + 1)), kda_of(*stepped))
        << "snapshot after row " << r;
  }
  EXPECT_EQ(verified->position(), stepped->position());
  // Taps are the prefix after the layer: distinct layers give distinct rows (not one copy).
  EXPECT_FALSE(std::equal(verify_taps.begin(), verify_taps.begin() + tap_row / taps.size(),
                          verify_taps.begin() + tap_row / taps.size()));
}

// §15 test 7: for every count of kept rows, continuing after commit() equals having decoded only
// the kept rows: the next token's logits bit for bit, the KDA state and the latent cache.
TEST_P(KimiModelTest, CommitReturnsToEveryCountOfKeptRows) {
  auto base = prefilled();
  for (int64_t kept = 0; kept <= static_cast<int64_t>(kDrafts.size()); ++kept) {
    auto verified = base->clone();
    std::vector<float> logits;
    model_->verify(*verified, kDrafts, logits);
    model_->commit(*verified, kept);
    auto stepped = base->clone();
    for (int64_t r = 0; r < kept; ++r) decode_one(*model_, *stepped, kDrafts[r]);
    ASSERT_EQ(verified->position(), stepped->position()) << kept;
    EXPECT_EQ(kda_of(*verified), kda_of(*stepped)) << kept;
    EXPECT_EQ(kimi(*verified).data().latent_cache, kimi(*stepped).data().latent_cache) << kept;
    EXPECT_EQ(kimi(*verified).data().latent_cache_bf16, kimi(*stepped).data().latent_cache_bf16)
        << kept;
    EXPECT_EQ(decode_one(*model_, *verified, 42), decode_one(*model_, *stepped, 42)) << kept;
  }
}

// Negative control for the test above: keeping one row fewer than was decoded is noticed.
TEST_P(KimiModelTest, CommitToTheWrongCountIsNoticed) {
  auto verified = prefilled();
  auto stepped = verified->clone();
  std::vector<float> logits;
  model_->verify(*verified, kDrafts, logits);
  model_->commit(*verified, 3);
  for (int64_t r = 0; r < 4; ++r) decode_one(*model_, *stepped, kDrafts[r]);
  EXPECT_NE(kda_of(*verified), kda_of(*stepped));
}

// A row's logits do not depend on the other rows of a decode step, nor on its place there.
TEST_P(KimiModelTest, DecodeRowsAreIndependentOfEachOther) {
  auto a = prefilled();
  auto b = model_->new_sequence(64);
  auto c = prefilled();
  std::vector<float> unused;
  model_->forward(*b, std::vector<int32_t>{500, 3, 4}, LogitRows::kLast, unused);
  auto a_alone = a->clone();
  auto b_alone = b->clone();
  auto c_alone = c->clone();
  std::vector<SequenceState*> states = {b.get(), a.get(), c.get()};
  const std::vector<int32_t> tokens = {31, 64, 200};
  std::vector<float> logits;
  model_->decode(states, tokens, logits);
  const auto vocab = static_cast<std::ptrdiff_t>(model_->vocab_size());
  const std::vector<float> alone[] = {decode_one(*model_, *b_alone, 31),
                                      decode_one(*model_, *a_alone, 64),
                                      decode_one(*model_, *c_alone, 200)};
  for (std::ptrdiff_t r = 0; r < 3; ++r) {
    EXPECT_TRUE(std::equal(alone[r].begin(), alone[r].end(), logits.begin() + r * vocab)) << r;
  }
  // a and c hold the same prompt but decode different tokens: their rows differ.
  EXPECT_FALSE(std::equal(alone[1].begin(), alone[1].end(), logits.begin() + 2 * vocab));
}

// A prompt longer than one prefill piece (256 tokens): every row's logits come out, the last
// equals what LogitRows::kLast gives, and the state continues like stepping (the chunked KDA
// form's rounding only: the prefill ≡ decode bound of kimi_reference_test).
TEST_P(KimiModelTest, LongPromptsRunInPiecesAndAgreeWithStepping) {
  std::vector<int32_t> prompt(300);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37) % 500);
  auto all = model_->new_sequence(400);
  auto last = model_->new_sequence(400);
  std::vector<float> all_logits, last_logits;
  model_->forward(*all, prompt, LogitRows::kAll, all_logits);
  model_->forward(*last, prompt, LogitRows::kLast, last_logits);
  const auto vocab = static_cast<std::size_t>(model_->vocab_size());
  ASSERT_EQ(all_logits.size(), prompt.size() * vocab);
  EXPECT_TRUE(std::equal(last_logits.begin(), last_logits.end(), all_logits.end() - vocab));
  auto stepped = model_->new_sequence(400);
  std::vector<float> stepped_logits;
  for (int32_t t : prompt) stepped_logits = decode_one(*model_, *stepped, t);
  float worst = 0, largest = 0;
  for (std::size_t i = 0; i < vocab; ++i) {
    worst = std::max(worst, std::abs(stepped_logits[i] - last_logits[i]));
    largest = std::max(largest, std::abs(stepped_logits[i]));
  }
  EXPECT_LE(worst, 1e-3f * largest);
  EXPECT_EQ(all->position(), 300);
}

// The matrix products run their rows on the pool's workers: the bits do not depend on how many.
TEST_P(KimiModelTest, TheThreadCountDoesNotChangeTheBits) {
  ModelRunOptions three = reference_options();
  three.threads = 3;
  KimiModel threaded(kimi_fixture_path(GetParam()), three);
  auto one = model_->new_sequence(64);
  auto many = threaded.new_sequence(64);
  std::vector<float> a, b;
  model_->forward(*one, kPrompt, LogitRows::kAll, a);
  threaded.forward(*many, kPrompt, LogitRows::kAll, b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(decode_one(*model_, *one, 7), decode_one(threaded, *many, 7));
}

// --kv-cache picks the latent cache's type: bf16 by default (half the bytes per token), f32 on
// request; the rows go to the one the model runs and the logits differ by the rounding only.
TEST_P(KimiModelTest, TheKvCacheOptionPicksTheLatentCacheType) {
  ModelRunOptions f32_options = reference_options();
  f32_options.kv_cache = KvCacheType::kF32;
  KimiModel f32(kimi_fixture_path(GetParam()), f32_options);
  EXPECT_EQ(model_->state_bytes_per_token() * 2, f32.state_bytes_per_token());
  auto rounded = prefilled();
  auto exact = f32.new_sequence(64);
  std::vector<float> unused;
  f32.forward(*exact, kPrompt, LogitRows::kLast, unused);
  const KimiSequenceState& b = kimi(*rounded).data();
  const KimiSequenceState& f = kimi(*exact).data();
  const auto rows =
      static_cast<std::size_t>(kPrompt.size() * model_->config().mla_latent_cache_width());
  for (std::size_t slot = 0; slot < b.latent_cache.size(); ++slot) {
    EXPECT_TRUE(b.latent_cache[slot].empty());
    EXPECT_EQ(b.latent_cache_bf16[slot].size(), rows);
    EXPECT_EQ(f.latent_cache[slot].size(), rows);
    EXPECT_TRUE(f.latent_cache_bf16[slot].empty());
  }
  EXPECT_LT(rounded->bytes(), exact->bytes());
  EXPECT_NE(decode_one(*model_, *rounded, 7), decode_one(f32, *exact, 7));
}

// A prompt longer than a piece writes every token's taps at its place: the same as running the
// pieces as two calls.
TEST_P(KimiModelTest, TapsOfALongPromptAreInPlace) {
  model_->set_tap_layers({1, model_->config().num_layers - 1});
  std::vector<int32_t> prompt(300);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 11) % 500);
  auto whole = model_->new_sequence(400);
  std::vector<float> logits;
  model_->forward(*whole, prompt, LogitRows::kLast, logits);
  const std::vector<float> taps = model_->last_taps();
  auto split = model_->new_sequence(400);
  const std::span<const int32_t> ids(prompt);
  model_->forward(*split, ids.first(256), LogitRows::kLast, logits);
  std::vector<float> joined = model_->last_taps();
  model_->forward(*split, ids.subspan(256), LogitRows::kLast, logits);
  joined.insert(joined.end(), model_->last_taps().begin(), model_->last_taps().end());
  ASSERT_EQ(taps.size(), 300u * 2 * static_cast<std::size_t>(model_->config().hidden_size));
  EXPECT_EQ(taps, joined);
}

TEST_P(KimiModelTest, BadCallsAreRefusedWithoutChangingTheState) {
  auto state = prefilled();
  const int64_t position = state->position();
  std::vector<float> logits;
  const std::vector<int32_t> nine(9, 1);
  EXPECT_THROW(model_->verify(*state, nine, logits), Error);
  EXPECT_THROW(model_->commit(*state, 1), Error);  // no verify ran
  EXPECT_THROW(model_->verify(*state, std::vector<int32_t>{1, 512}, logits), Error);
  EXPECT_EQ(state->position(), position);
  model_->verify(*state, std::vector<int32_t>{1, 2}, logits);
  EXPECT_THROW(model_->commit(*state, 3), Error);
  EXPECT_THROW(model_->set_tap_layers({model_->config().num_layers}), Error);
  auto tiny = model_->new_sequence(2);
  EXPECT_THROW(model_->forward(*tiny, std::vector<int32_t>{1, 2, 3}, LogitRows::kLast, logits),
               Error);
  EXPECT_THROW(model_->new_sequence(model_->max_context() + 1), Error);
  EXPECT_FALSE(model_->can_rewind());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KimiModelTest,
                         ::testing::Values("kimi-k3-tiny", "kimi-k3-small"), test::kimi_param_name);

// The loader picks the family from config.json; the fixture's tokenizer is Kimi's tiktoken with
// the special tokens named from tokenizer_config.json, fitted to the model's vocabulary.
TEST(KimiModelLoading, TheLoaderAndTheTokenizerFindTheFamily) {
  const std::string dir = kimi_fixture_path("kimi-k3-tiny");
  std::unique_ptr<LanguageModel> model = load_language_model(dir, reference_options());
  EXPECT_NE(dynamic_cast<KimiModel*>(model.get()), nullptr);
  EXPECT_EQ(model->stop_token_ids(), (std::vector<int32_t>{501, 502}));
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(dir);
  EXPECT_EQ(tokenizer->vocab_size(), 512);
  EXPECT_EQ(tokenizer->token_id("[BOS]"), 500);
  EXPECT_EQ(tokenizer->token_id("<|end_of_msg|>"), 502);
  EXPECT_EQ(tokenizer->token_id("[PAD]"), 511);
  const std::string text = "The model reads a prompt, one token at a time.";
  const std::vector<int32_t> ids = tokenizer->encode(text);
  EXPECT_LT(ids.size(), text.size() / 2);  // the merges apply
  EXPECT_EQ(tokenizer->decode(ids), text);
  EXPECT_EQ(tokenizer->encode("<|open|>"), (std::vector<int32_t>{503}));
}

}  // namespace
}  // namespace md

namespace md {
namespace {

// The bench shapes: kimi-k3-tiny is §15's configuration (the fixture's), kimi-k3-layer has the
// published widths (real-configs §2a) for a few layers; both build a model that decodes.
TEST(KimiSyntheticShapes, TinyIsTheFixtureConfigAndLayerHasThePublishedWidths) {
  const KimiK3Config tiny = synthetic_kimi_config("kimi-k3-tiny");
  const KimiModel fixture(kimi_fixture_path("kimi-k3-tiny"), reference_options());
  const KimiK3Config& f = fixture.config();
  EXPECT_EQ(tiny.layer_types, f.layer_types);
  EXPECT_EQ(
      std::tie(tiny.hidden_size, tiny.vocab_size, tiny.attn_res_block_size, tiny.kda_num_heads,
               tiny.kda_head_dim, tiny.num_attention_heads, tiny.q_lora_rank, tiny.kv_lora_rank,
               tiny.qk_nope_head_dim, tiny.qk_rope_head_dim, tiny.v_head_dim,
               tiny.intermediate_size, tiny.num_experts, tiny.num_experts_per_token,
               tiny.moe_intermediate_size, tiny.routed_expert_hidden_size, tiny.num_shared_experts),
      std::tie(f.hidden_size, f.vocab_size, f.attn_res_block_size, f.kda_num_heads, f.kda_head_dim,
               f.num_attention_heads, f.q_lora_rank, f.kv_lora_rank, f.qk_nope_head_dim,
               f.qk_rope_head_dim, f.v_head_dim, f.intermediate_size, f.num_experts,
               f.num_experts_per_token, f.moe_intermediate_size, f.routed_expert_hidden_size,
               f.num_shared_experts));
  const KimiK3Config layer = synthetic_kimi_config("kimi-k3-layer");
  EXPECT_EQ(layer.hidden_size, 7168);
  EXPECT_EQ(layer.kda_channels(), 12288);
  EXPECT_EQ(layer.mla_latent_cache_width(), 576);
  EXPECT_EQ(layer.num_experts, 896);
  EXPECT_EQ(layer.num_experts_per_token, 16);
  EXPECT_EQ(layer.layer_types, (std::vector<KimiLayerKind>{KimiLayerKind::kKda, KimiLayerKind::kKda,
                                                           KimiLayerKind::kMla}));
  EXPECT_THROW(synthetic_kimi_config("kimi-k3-huge"), Error);

  std::unique_ptr<KimiModel> model = make_synthetic_kimi("kimi-k3-tiny", reference_options());
  auto state = model->new_sequence(16);
  std::vector<float> logits;
  model->forward(*state, std::vector<int32_t>{500, 3, 9}, LogitRows::kLast, logits);
  ASSERT_EQ(logits.size(), 512u);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace md
