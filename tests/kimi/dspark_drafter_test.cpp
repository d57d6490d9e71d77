// The DSpark drafter (models/drafters/dspark/dspark_drafter.h) on its scaled-down checkpoints
// (tools/make_dspark_fixtures.py) against two independent references: speculators' own
// DSparkDraftModel (vLLM project; float32, goldens by tools/gen_dspark_speculators_goldens.py in
// tests/goldens/dspark/speculators) and a float64 transcription of kimi-k3-dspark.md §13.3–§13.7
// written here (tools/dspark_reference.py; goldens in tests/goldens/dspark): the logits each draft
// is chosen from, the drafts and the confidences, with negative controls (a bidirectional block,
// no Markov bias) that miss the bound. Both references run all B block rows; the drafter runs
// B − 1 (the last row's draft is never verified), so matching them is §15's "dropping block row 7
// leaves drafts 0–6 unchanged". Then the context's chunking, threads, truncation and window, the
// sampled drafts, and what is refused.
#include "models/drafters/dspark/dspark_drafter.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "../support/checkpoint_edits.h"
#include "base/error.h"
#include "io/checkpoint.h"
#include "kimi_test_util.h"
#include "models/common/config_files.h"
#include "models/drafters/dspark/dspark_step.h"
#include "models/kimi/kimi_model.h"

namespace md {
namespace {

using test::kimi_fixture_path;

// The float64 transcription against the f32 drafter: its rounding is ~1e-6 of the largest logit
// here; 1e-4 leaves room for accumulation order and is 10⁴ below what the wrong formulas miss by.
constexpr float kBound = 1e-4f;

// σ is flat enough that the f32 drafter's logit error (~1e-6) moves a confidence by less.
constexpr float kConfidenceBound = 1e-5f;

struct Golden {
  std::string target;  // the Kimi K3 fixture the drafter drafts for
  int64_t context = 0, anchor = 0;
  std::vector<int32_t> drafts;
  std::vector<float> logits, bidirectional, without_markov;  // [drafts][vocab]
  std::vector<float> confidences;                            // empty: no confidence head
  float largest = 0;
};

std::vector<float> flat(const nlohmann::json& rows) {
  std::vector<float> out;
  for (const auto& row : rows) {
    for (const auto& v : row) out.push_back(v.get<float>());
  }
  return out;
}

nlohmann::json golden_json(const std::string& drafter) {
  return read_json_file(std::string(MD_SOURCE_DIR) + "/tests/goldens/dspark/" + drafter + ".json");
}

Golden golden_of(const std::string& drafter) {
  const nlohmann::json j = golden_json(drafter);
  Golden g;
  g.target = j["target"].get<std::string>();
  g.context = j["context_length"].get<int64_t>();
  g.anchor = j["anchor"].get<int64_t>();
  g.drafts = j["drafts"].get<std::vector<int32_t>>();
  g.logits = flat(j["logits"]);
  g.bidirectional = flat(j["logits_bidirectional"]);
  g.without_markov = flat(j["logits_without_markov"]);
  g.largest = j["max_abs_logit"].get<float>();
  if (!j["confidences"].is_null()) g.confidences = j["confidences"].get<std::vector<float>>();
  return g;
}

nlohmann::json speculators_golden(const std::string& drafter) {
  return read_json_file(std::string(MD_SOURCE_DIR) + "/tests/goldens/dspark/speculators/" +
                        drafter + ".json");
}

// The drafter reads the target's widths and depth, and embeds with its table when it has none of
// its own: a Kimi K3 fixture's whole view (the model loaded); the Muse Spark fixtures'
// (tools/make_musespark_fixtures.py, not built for these tests) as that script writes them,
// hidden size and vocabulary as the golden records them (their drafters have their own tables).
TargetView target_of(const std::string& target, const nlohmann::json& golden,
                     std::unique_ptr<KimiModel>& model) {
  TargetView view;
  if (target.starts_with("kimi")) {
    model = std::make_unique<KimiModel>(kimi_fixture_path(target), ModelRunOptions{.threads = 1});
    return model->target_view();
  }
  view.hidden_size = golden["hidden_size"].get<int64_t>();
  view.vocab_size = golden["vocab_size"].get<int64_t>();
  view.num_layers = target == "muse-spark-tiny" ? 6 : 5;  // muse-spark-small
  return view;
}

// The goldens' taps: tap[p][i][c] = f32(((((p·T + i)·H + c) · 2654435761) mod 2³²) / 2³² − 0.5).
std::vector<float> taps(int64_t first, int64_t rows, int64_t num_taps, int64_t hidden) {
  std::vector<float> out;
  for (int64_t p = first; p < first + rows; ++p) {
    for (int64_t i = 0; i < num_taps * hidden; ++i) {
      const auto index = static_cast<uint64_t>(p * num_taps * hidden + i);
      const uint64_t hashed = (index * 2654435761ull) % (1ull << 32);
      out.push_back(static_cast<float>(static_cast<double>(hashed) / 4294967296.0 - 0.5));
    }
  }
  return out;
}

float worst_gap(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

class DSparkDrafterTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    golden_ = golden_of(GetParam());
    target_ = target_of(golden_.target, golden_json(GetParam()), target_model_);
  }
  std::unique_ptr<DSparkDrafter> drafter(int threads = 1,
                                         ExecutorKind executor = ExecutorKind::kMega) const {
    return std::make_unique<DSparkDrafter>(kimi_fixture_path(GetParam()), target_, threads,
                                           DSparkOptions{.executor = executor});
  }
  void append(DSparkDrafter& d, int64_t first, int64_t rows) const {
    const std::vector<float> t = taps(first, rows, d.config().num_taps(), d.config().hidden_size);
    d.append_context(t, rows);
  }
  DraftProposal greedy(DSparkDrafter& d) const {
    return d.propose(static_cast<int32_t>(golden_.anchor), 0.0f, {}, /*keep_logits=*/true);
  }
  Golden golden_;
  std::unique_ptr<KimiModel> target_model_;  // a Kimi target's weights, which target_ points into
  TargetView target_;
};

TEST_P(DSparkDrafterTest, MatchesTheFloat64Transcription) {
  auto d = drafter();
  const int64_t split = golden_.context / 2 + 1;  // the context arrives in two pieces
  append(*d, 0, split);
  append(*d, split, golden_.context - split);
  const DraftProposal p = greedy(*d);
  EXPECT_EQ(p.tokens, golden_.drafts);
  ASSERT_EQ(p.logits.size(), golden_.logits.size());
  const float error = worst_gap(p.logits, golden_.logits) / golden_.largest;
  std::printf("  %s: %.3g of the largest |logit|\n", GetParam().c_str(), error);
  EXPECT_LE(error, kBound);
  // Negative controls: the wrong formulas are far outside the bound.
  EXPECT_GT(worst_gap(p.logits, golden_.bidirectional) / golden_.largest, 100 * kBound);
  EXPECT_GT(worst_gap(p.logits, golden_.without_markov) / golden_.largest, 100 * kBound);
  // Greedy drafts come with q = {draft: 1}.
  for (std::size_t k = 0; k < p.q.size(); ++k) {
    ASSERT_EQ(p.q[k].size(), 1u);
    EXPECT_EQ(p.q[k][0].first, p.tokens[k]);
  }
  ASSERT_EQ(p.confidence.size(), golden_.confidences.size());
  EXPECT_EQ(d->has_confidence(), !golden_.confidences.empty());
  // A reduced draft vocabulary: the rows are draft ids and the drafts their target ids (d2t);
  // reading the argmax as a target id would give other drafts.
  const int64_t draft_vocab = d->config().draft_vocab_size;
  ASSERT_EQ(static_cast<int64_t>(p.logits.size()), (d->block_size() - 1) * draft_vocab);
  if (draft_vocab < d->config().vocab_size) {
    bool mapped = false;
    for (std::size_t k = 0; k < p.tokens.size(); ++k) {
      const float* row = p.logits.data() + static_cast<int64_t>(k) * draft_vocab;
      mapped |= std::max_element(row, row + draft_vocab) - row != p.tokens[k];
    }
    EXPECT_TRUE(mapped);
  }
  EXPECT_LE(worst_gap(p.confidence, golden_.confidences), kConfidenceBound);
}

// speculators' DSparkDraftModel (its backbone, MarkovHead and ConfidenceHead in float32, the
// chain walked over them): the same drafts, logits within the bound and confidences within theirs.
TEST_P(DSparkDrafterTest, MatchesSpeculators) {
  const nlohmann::json j = speculators_golden(GetParam());
  // Computed from the same fixture files as the transcription's goldens (whose sha256 the
  // dspark.fixtures test checks against the files these tests read).
  ASSERT_EQ(j["fixture_sha256"], golden_json(GetParam())["fixture_sha256"]);
  ASSERT_EQ(j["context_length"].get<int64_t>(), golden_.context);
  ASSERT_EQ(j["anchor"].get<int64_t>(), golden_.anchor);
  auto d = drafter(2);
  append(*d, 0, golden_.context);
  const DraftProposal p = greedy(*d);
  EXPECT_EQ(p.tokens, j["drafts"].get<std::vector<int32_t>>());
  const std::vector<float> logits = flat(j["logits"]);
  ASSERT_EQ(p.logits.size(), logits.size());
  const float error = worst_gap(p.logits, logits) / golden_.largest;
  std::printf("  %s vs speculators: %.3g of the largest |logit|\n", GetParam().c_str(), error);
  EXPECT_LE(error, kBound);
  // Negative control: the bidirectional block misses speculators' causal one by far.
  EXPECT_GT(worst_gap(logits, golden_.bidirectional) / golden_.largest, 100 * kBound);
  if (j["confidences"].is_null()) {
    EXPECT_TRUE(p.confidence.empty());
    return;
  }
  const auto confidences = j["confidences"].get<std::vector<float>>();
  ASSERT_EQ(p.confidence.size(), confidences.size());
  const float confidence_error = worst_gap(p.confidence, confidences);
  std::printf("  confidences: %.3g\n", confidence_error);
  EXPECT_LE(confidence_error, kConfidenceBound);
  // Negative control: one slot's confidence is not another's (the bound tells slots apart).
  std::vector<float> shifted(confidences.begin() + 1, confidences.end());
  shifted.push_back(confidences.front());
  EXPECT_GT(worst_gap(p.confidence, shifted), 100 * kConfidenceBound);
}

// How the context arrived (row by row or at once, truncated and re-appended) and the thread
// count do not change a bit; positions before the window do not matter, the first inside does.
TEST_P(DSparkDrafterTest, ContextChunkingThreadsTruncationAndWindow) {
  auto once = drafter();
  append(*once, 0, golden_.context);
  const DraftProposal reference = greedy(*once);

  auto rows = drafter(3);
  for (int64_t p = 0; p < golden_.context; ++p) append(*rows, p, 1);
  EXPECT_EQ(greedy(*rows).logits, reference.logits);

  auto rewound = drafter(2);
  append(*rewound, 0, golden_.context);
  (void)greedy(*rewound);
  rewound->truncate_context(golden_.context - 5);
  EXPECT_EQ(rewound->context_length(), golden_.context - 5);
  append(*rewound, golden_.context - 5, 5);
  EXPECT_EQ(greedy(*rewound).logits, reference.logits);

  const int64_t window = once->config().sliding_window;
  ASSERT_GT(golden_.context, window);  // the goldens put positions outside the window
  auto outside = drafter();
  std::vector<float> early = taps(1000, golden_.context - window, once->config().num_taps(),
                                  once->config().hidden_size);  // other values
  outside->append_context(early, golden_.context - window);
  append(*outside, golden_.context - window, window);
  EXPECT_EQ(greedy(*outside).logits, reference.logits);
  auto inside = drafter();
  std::vector<float> changed = taps(1000, golden_.context - window + 1, once->config().num_taps(),
                                    once->config().hidden_size);
  inside->append_context(changed, golden_.context - window + 1);
  append(*inside, golden_.context - window + 1, window - 1);
  EXPECT_NE(greedy(*inside).logits, reference.logits);

  // new_sequence starts empty; clone copies the context.
  EXPECT_EQ(once->new_sequence()->context_length(), 0);
  auto copy = once->clone();
  EXPECT_EQ(copy->propose(static_cast<int32_t>(golden_.anchor), 0.0f, {}, true).logits,
            reference.logits);
}

// Sampling: each draft is the draw of its uniform from softmax(logits / T) in id order, and
// q is that whole distribution; the next row's Markov bias follows the drawn token.
TEST_P(DSparkDrafterTest, SampledDraftsAreDrawnFromTheTemperedLogits) {
  auto d = drafter();
  append(*d, 0, golden_.context);
  const float temperature = 0.8f;
  const int64_t drafts = d->block_size() - 1, vocab = d->config().draft_vocab_size;
  std::vector<double> uniforms;
  for (int64_t k = 0; k < drafts; ++k)
    uniforms.push_back((0.37 + 0.29 * k) - std::floor(0.37 + 0.29 * k));
  const DraftProposal p =
      d->propose(static_cast<int32_t>(golden_.anchor), temperature, uniforms, true);
  ASSERT_EQ(static_cast<int64_t>(p.tokens.size()), drafts);
  for (int64_t k = 0; k < drafts; ++k) {
    const float* row = p.logits.data() + k * vocab;
    double total = 0, top = *std::max_element(row, row + vocab);
    for (int64_t i = 0; i < vocab; ++i) total += std::exp((row[i] - top) / temperature);
    double cumulative = 0;
    int32_t expected = static_cast<int32_t>(vocab - 1);
    for (int64_t i = 0; i < vocab; ++i) {
      cumulative += std::exp((row[i] - top) / temperature);
      if (cumulative > uniforms[static_cast<std::size_t>(k)] * total) {
        expected = static_cast<int32_t>(i);
        break;
      }
    }
    // q lists the draft ids' target ids in draft-id order.
    const auto& q = p.q[static_cast<std::size_t>(k)];
    ASSERT_EQ(static_cast<int64_t>(q.size()), vocab);
    EXPECT_EQ(p.tokens[static_cast<std::size_t>(k)], q[static_cast<std::size_t>(expected)].first)
        << k;
    double sum = 0;
    for (const auto& [token, probability] : q) sum += probability;
    EXPECT_NEAR(sum, 1.0, 1e-5) << k;
  }
  // The sampled chain differs from the greedy one somewhere (the uniforms matter).
  EXPECT_NE(p.tokens, golden_.drafts);
}

TEST_P(DSparkDrafterTest, RefusesWhatDoesNotFit) {
  TargetView wider = target_;
  wider.hidden_size += 1;
  EXPECT_THROW(
      {
        try {
          DSparkDrafter(kimi_fixture_path(GetParam()), wider, 1);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("hidden_size"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  TargetView shallow = target_;
  shallow.num_layers = 3;  // a tap id beyond the target's layers
  EXPECT_THROW(DSparkDrafter(kimi_fixture_path(GetParam()), shallow, 1), Error);
  auto d = drafter();
  EXPECT_THROW(d->propose(-1, 0.0f, {}), Error);
  EXPECT_THROW(d->propose(static_cast<int32_t>(target_.vocab_size), 0.0f, {}), Error);
  EXPECT_THROW(d->propose(1, 1.0f, std::vector<double>{0.5}), Error);  // too few uniforms
  EXPECT_THROW(d->append_context(std::vector<float>(3), 1), Error);    // not a row of taps
  EXPECT_THROW(d->truncate_context(1), Error);                         // beyond its length
  // Taps: aux id A is the residual after layer A − 1.
  std::vector<int64_t> expected;
  for (int64_t id : d->config().aux_hidden_state_layer_ids) expected.push_back(id - 1);
  EXPECT_EQ(d->tap_layers(), expected);
}

// The fused round (dspark_step.h) on the mega and ops executors with 1–3 workers equals the
// reference forward bit for bit — drafts, logits and confidences, greedy and sampled — over
// rounds whose context grows by a verify step's few positions (which the program computes
// itself) or a prompt's many (computed before it), and after a truncation. Proposing twice in a
// round (the second time with those positions already stored) changes nothing.
TEST_P(DSparkDrafterTest, FusedRoundsEqualTheReferenceBitForBit) {
  const int64_t vocab = target_.vocab_size;
  std::vector<double> uniforms;
  for (int64_t k = 0; k < 8; ++k) uniforms.push_back(0.1 + 0.11 * static_cast<double>(k));
  auto same = [](const DraftProposal& a, const DraftProposal& b) {
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.logits, b.logits);
    EXPECT_EQ(a.confidence, b.confidence);
    EXPECT_EQ(a.q, b.q);
  };
  for (ExecutorKind executor : {ExecutorKind::kMega, ExecutorKind::kOps}) {
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message()
                   << "executor " << static_cast<int>(executor) << ", " << threads << " threads");
      auto reference = drafter(1, ExecutorKind::kReference);
      auto fused = drafter(threads, executor);
      int64_t position = golden_.context;
      for (DSparkDrafter* d : {reference.get(), fused.get()}) append(*d, 0, position);
      for (int round = 0; round < 6; ++round) {
        const auto anchor = static_cast<int32_t>((100 + 37 * round) % vocab);
        const float temperature = round % 2 == 0 ? 0.0f : 0.8f;
        const DraftProposal expected = reference->propose(anchor, temperature, uniforms, true);
        same(fused->propose(anchor, temperature, uniforms, true), expected);
        same(fused->propose(anchor, temperature, uniforms, true), expected);
        const int64_t rows = 1 + (3 * round) % 8;  // a verify step's commit: 1..8 positions
        for (DSparkDrafter* d : {reference.get(), fused.get()}) append(*d, position, rows);
        position += rows;
        EXPECT_EQ(fused->context_length(), position);
        if (round == 3) {  // a rewind into the stored positions, then a prompt-sized append
          for (DSparkDrafter* d : {reference.get(), fused.get()}) {
            d->truncate_context(position - 12);
            append(*d, position - 12, 20);
          }
          position += 8;
        }
      }
    }
  }
}

// The fused round is plain data on the shared layer library: no family kernel, and each KV
// head's attention task waits for fewer q/k/v tiles than the projection has.
TEST_P(DSparkDrafterTest, FusedRoundIsPlainData) {
  const DSparkConfig config = parse_dspark_config(read_config_files(kimi_fixture_path(GetParam())));
  Checkpoint checkpoint(kimi_fixture_path(GetParam()));
  const DSparkWeights weights = bind_dspark_weights(config, checkpoint, target_);
  const DraftContextSpec spec = dspark_context_spec(config, weights);
  const kernels::Rope rope(config.head_dim, config.rope_theta);
  DSparkStep step(config, weights, spec, rope, 2);
  int attention = 0;
  for (const program::Instruction& ins : step.program().instructions()) {
    EXPECT_NE(ins.opcode(), program::Opcode::kFamilyKernel) << ins.name;
    if (ins.opcode() != program::Opcode::kWindowAttention) continue;
    ++attention;
    ASSERT_EQ(ins.tasks, config.num_key_value_heads);
    const program::Instruction& qkv =
        step.program().instructions()[static_cast<std::size_t>(ins.task_waits[0][0].producer)];
    for (const auto& waits : ins.task_waits) {
      int64_t tiles = 0;
      for (const program::Dependency& d : waits) tiles += d.end - d.begin;
      if (config.num_key_value_heads > 1) {
        EXPECT_LT(tiles, qkv.tasks) << ins.name;
      }
    }
  }
  EXPECT_EQ(attention, config.num_layers);
}

// A reduced draft vocabulary whose d2t is not one-to-one, whose t2d disagrees with it, or a
// drafter without embed_tokens whose target lends no table: refused, naming the tensor.
TEST(DSparkDraftVocabulary, RefusesBrokenMaps) {
  namespace fs = std::filesystem;
  const fs::path source = kimi_fixture_path("dspark-kimi-k3-draftvocab");
  const fs::path work =
      fs::path(::testing::TempDir()) / ("dspark-draftvocab-edits-" + std::to_string(::getpid()));
  auto target_model =
      std::make_unique<KimiModel>(kimi_fixture_path("kimi-k3-tiny"), ModelRunOptions{.threads = 1});
  const TargetView target = target_model->target_view();
  auto load_edited = [&](auto edit) {
    fs::remove_all(work);
    fs::copy(source, work);
    edit(work / "model.safetensors");
    try {
      DSparkDrafter(work.string(), target, 1);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_TRUE(load_edited([](const fs::path&) {}).empty());  // the copy itself loads
  // d2t[1] = d2t[0] - 1: draft ids 0 and 1 both stand for target id d2t[0].
  const auto offsets = [&] {
    Checkpoint checkpoint(source.string());
    std::vector<int64_t> out(2);
    std::memcpy(out.data(), checkpoint.at("d2t").data, sizeof(int64_t) * 2);
    return out;
  }();
  test::expect_contains(load_edited([&](const fs::path& file) {
                          test::edit_element<int64_t>(file, "d2t", 1, offsets[0] - 1);
                        }),
                        {"d2t[1]", "taken twice"});
  test::expect_contains(load_edited([&](const fs::path& file) {
                          test::edit_element<int64_t>(file, "d2t", 0, 100000);
                        }),
                        {"d2t[0] = 100000", "outside the vocabulary"});
  test::expect_contains(load_edited([&](const fs::path& file) {
                          test::edit_element<uint8_t>(file, "t2d", offsets[0], 0);
                        }),
                        {fmt::format("t2d[{}]", offsets[0]), "disagrees with d2t"});
  TargetView bare = target;
  bare.embed_tokens = {};
  EXPECT_THROW(
      {
        try {
          DSparkDrafter(source.string(), bare, 1);
        } catch (const Error& e) {
          test::expect_contains(e.what(), {"embed_tokens.weight", "lends none"});
          throw;
        }
      },
      Error);
  fs::remove_all(work);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DSparkDrafterTest,
                         ::testing::Values("dspark-kimi-k3-tiny", "dspark-kimi-k3-small",
                                           "dspark-muse-spark-tiny", "dspark-muse-spark-small",
                                           "dspark-kimi-k3-draftvocab"),
                         test::kimi_param_name);

}  // namespace
}  // namespace md
