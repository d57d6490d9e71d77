// Verify rows and taps for a drafter: a block of rows verified at once gives the logits those
// tokens get in a prefill; commit(k) leaves the sequence as if only the first k had been fed,
// including on sliding layers whose ring the rejected rows wrote into; taps are the post-layer
// residuals the logits come from.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "kernels/norms.h"
#include "kernels/weight_matrix.h"
#include "musespark_test_util.h"

namespace md::test {
namespace {

constexpr int64_t kCapacity = 512;

std::vector<int32_t> slice(const std::vector<int32_t>& ids, std::size_t begin, std::size_t end) {
  return {ids.begin() + static_cast<std::ptrdiff_t>(begin),
          ids.begin() + static_cast<std::ptrdiff_t>(end)};
}

// Rows [begin, end) of [rows][vocab] logits.
std::vector<float> rows_of(const std::vector<float>& logits, int64_t vocab, std::size_t begin,
                           std::size_t end) {
  return {logits.begin() + static_cast<std::ptrdiff_t>(begin * static_cast<std::size_t>(vocab)),
          logits.begin() + static_cast<std::ptrdiff_t>(end * static_cast<std::size_t>(vocab))};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class MuseVerify : public ::testing::TestWithParam<std::string> {};

// Prompt 2 (40 tokens) verified in a block of 8 at positions 30..37, past both fixtures' windows:
// the rows' keys overwrite ring slots of positions that a commit of fewer rows needs again.
TEST_P(MuseVerify, CommitLeavesTheSequenceAsIfOnlyTheKeptRowsWereFed) {
  auto model = load_muse(GetParam(), KvCacheType::kBf16);
  const int64_t vocab = model->config().vocab_size;
  const std::vector<int32_t> ids = load_muse_goldens(GetParam())[2].ids;
  std::vector<float> reference, logits;
  model->forward(*model->new_sequence(kCapacity), ids, LogitRows::kAll, reference);
  for (const int64_t kept : {0, 1, 3, 8}) {
    auto state = model->new_sequence(kCapacity);
    model->forward(*state, slice(ids, 0, 30), LogitRows::kLast, logits);
    // Drafts: the true tokens up to `kept`, then wrong ones.
    std::vector<int32_t> block = slice(ids, 30, 38);
    for (std::size_t i = static_cast<std::size_t>(kept); i < block.size(); ++i) {
      block[i] = (block[i] + 7) % static_cast<int32_t>(model->config().vocab_used);
    }
    model->verify(*state, block, logits);
    if (kept == 8) {
      EXPECT_TRUE(same_bits(logits, rows_of(reference, vocab, 30, 38)));
    }
    EXPECT_EQ(state->position(), 38);
    model->commit(*state, kept);
    ASSERT_EQ(state->position(), 30 + kept);
    model->forward(*state, slice(ids, 30 + static_cast<std::size_t>(kept), ids.size()),
                   LogitRows::kAll, logits);
    EXPECT_TRUE(same_bits(
        logits, rows_of(reference, vocab, 30 + static_cast<std::size_t>(kept), ids.size())))
        << "kept " << kept;
  }
}

TEST_P(MuseVerify, TapsAreThePostLayerResidualsTheLogitsComeFrom) {
  auto model = load_muse(GetParam());
  const MuseSparkConfig& c = model->config();
  const int64_t h = c.hidden_size, vocab = c.vocab_size;
  model->set_tap_layers({0, c.num_layers - 1});
  const std::vector<int32_t> ids = slice(load_muse_goldens(GetParam())[2].ids, 0, 5);
  std::vector<float> logits;
  model->forward(*model->new_sequence(kCapacity), ids, LogitRows::kAll, logits);
  const std::vector<float>& taps = model->last_taps();
  ASSERT_EQ(taps.size(), ids.size() * 2 * static_cast<std::size_t>(h));
  const MuseSparkWeights& w = model->weights();
  std::vector<float> normed(static_cast<std::size_t>(h)), raw(static_cast<std::size_t>(vocab));
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const float* last = taps.data() + (t * 2 + 1) * static_cast<std::size_t>(h);
    kernels::rms_norm(last, w.final_norm.data(), h, static_cast<float>(c.rms_norm_eps),
                      normed.data());
    kernels::matmul(w.lm_head, normed.data(), 1, raw.data(), nullptr);
    const auto multiplier = static_cast<float>(c.output_multiplier);
    const auto cap = static_cast<float>(c.final_logit_softcapping);
    for (int64_t i = 0; i < c.vocab_used; ++i) {
      ASSERT_EQ(logits[t * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(i)],
                cap * std::tanh(raw[static_cast<std::size_t>(i)] * multiplier / cap))
          << "row " << t << " id " << i;
    }
    // Layer 0's tap is an earlier residual: not what the logits come from.
    EXPECT_NE(std::memcmp(taps.data() + t * 2 * static_cast<std::size_t>(h), last,
                          static_cast<std::size_t>(h) * sizeof(float)),
              0);
  }
  EXPECT_THROW(model->set_tap_layers({c.num_layers}), Error);
  EXPECT_THROW(model->set_tap_layers({1, 0, 1}), Error);  // a layer listed twice
}

TEST(MuseVerifyErrors, CommitNeedsAVerifyAndKeepsAtMostItsRows) {
  auto model = load_muse("muse-spark-small");
  auto state = model->new_sequence(64);
  std::vector<float> logits;
  EXPECT_THROW(model->commit(*state, 0), Error);
  model->verify(*state, std::vector<int32_t>{5, 6, 7}, logits);
  EXPECT_THROW(model->commit(*state, 4), Error);
  EXPECT_THROW(model->verify(*state, std::vector<int32_t>(9, 5), logits), Error);
  model->commit(*state, 2);
  EXPECT_EQ(state->position(), 2);
  EXPECT_THROW(model->commit(*state, 0), Error);  // one commit per verify
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MuseVerify, ::testing::ValuesIn(musespark_fixture_names()),
                         fixture_test_name);

}  // namespace
}  // namespace md::test
