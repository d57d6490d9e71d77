// The Llama family loaded from a Hugging Face directory (config.json + model.safetensors +
// tokenizer.json) into the same LlamaGgufModel and step program as GGUF files, against
// transformers' LlamaForCausalLM in float32 on the tiny-llama fixture
// (tools/make_llama_fixture.py, regenerated and sha256-checked by the llama.hf_fixture test;
// goldens from tools/gen_llama_goldens.py).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>

#include "../support/golden_math.h"
#include "base/error.h"
#include "io/safetensors_file.h"
#include "models/llama/llama_gguf_model.h"
#include "models/llama/llama_testing.h"
#include "models/model_loader.h"

namespace md {
namespace {

namespace fs = std::filesystem;

// Both sides hold the same bf16 weights widened exactly to f32 and compute in f32 (f32 KV cache
// here); they differ only in summation order and exp/rsqrt implementations, a few f32 ulps per
// operation through two small layers: ~1e-6 of the logit range (measured: see the printed
// errors). 1e-4 leaves two orders of magnitude for that while any real mistake (a wrong RoPE
// pairing, a swapped projection, a norm off by one) moves logits by percents (the negative control
// below shows ~1e-1).
constexpr double kBound = 1e-4;

fs::path fixture_dir() {
  return fs::path(MD_GOLDEN_DIR) / "llama_hf" / "tiny-llama";
}
fs::path golden(const std::string& ext) {
  return fs::path(MD_SOURCE_DIR) / "tests" / "goldens" / "llama_hf" / ("tiny-llama" + ext);
}

nlohmann::json golden_json() {
  std::ifstream in(golden(".json"));
  return nlohmann::json::parse(in);
}

std::vector<float> golden_logits(const SafetensorsFile& file, int prompt) {
  const TensorView* view = file.find(fmt::format("logits_{}", prompt));
  if (view == nullptr) throw std::runtime_error(fmt::format("golden logits_{} missing", prompt));
  std::vector<float> out(view->nbytes / sizeof(float));
  std::memcpy(out.data(), view->data, view->nbytes);
  return out;
}

using test::argmax;

// max |ours − theirs| / max |theirs| over the vocabulary.
double relative_error(const float* ours, const float* theirs, int64_t vocab) {
  return test::relative_error(ours, theirs, static_cast<std::size_t>(vocab));
}

const ModelRunOptions kOptions{2, KvCacheType::kF32};

// The worst relative error over every position of every prompt, from the reference forward.
double worst_forward_error(LanguageModel& model, const nlohmann::json& prompts,
                           const SafetensorsFile& goldens) {
  const int64_t vocab = model.vocab_size();
  double worst = 0;
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    std::vector<int32_t> ids = prompts[p].get<std::vector<int32_t>>();
    std::vector<float> expected = golden_logits(goldens, static_cast<int>(p));
    auto state = model.new_sequence(256);
    std::vector<float> logits;
    model.forward(*state, ids, LogitRows::kAll, logits);
    for (std::size_t t = 0; t < ids.size(); ++t) {
      const auto offset = static_cast<int64_t>(t) * vocab;
      worst =
          std::max(worst, relative_error(logits.data() + offset, expected.data() + offset, vocab));
    }
  }
  return worst;
}

class LlamaHf : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fixture_dir() / "model.safetensors")) {
      GTEST_SKIP() << fixture_dir() << " is absent: run the llama.hf_fixture test first";
    }
  }
  nlohmann::json json_ = golden_json();
  SafetensorsFile goldens_{golden(".safetensors").string()};
};

TEST_F(LlamaHf, LoaderDispatchesDirectoriesToTheLlamaModel) {
  std::unique_ptr<LanguageModel> model = load_language_model(fixture_dir().string(), kOptions);
  auto* llama = dynamic_cast<LlamaGgufModel*>(model.get());
  ASSERT_NE(llama, nullptr) << model->description();
  EXPECT_EQ(llama->config().num_layers, 2);
  EXPECT_EQ(llama->vocab_size(), 512);
  EXPECT_EQ(llama->stop_token_ids(), (std::vector<int32_t>{510, 511}));
  // The tensors' bytes (the file less its header): embedding and lm_head 512x64, per layer
  // q/o 64x64, k/v 32x64, gate/up/down 128x64 and two norms of 64, the final norm; all BF16.
  const std::size_t per_layer = 2 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64 + 2 * 64);
  EXPECT_EQ(model->weight_bytes(), 2 * (2 * 512 * 64) + 2 * per_layer + 2 * 64);
}

TEST_F(LlamaHf, ReferenceForwardMatchesTransformers) {
  std::unique_ptr<LanguageModel> model = load_language_model(fixture_dir().string(), kOptions);
  double worst = worst_forward_error(*model, json_["prompts"], goldens_);
  std::printf("reference forward: max |dlogit| / max |logit| = %.3g (bound %.0e)\n", worst, kBound);
  EXPECT_LT(worst, kBound);
}

// Every prompt token fed one at a time through decode() with the default (fused step program)
// executor: every position's logits, then the greedy continuation.
TEST_F(LlamaHf, DecodeStepProgramMatchesTransformers) {
  LlamaGgufModel model(fixture_dir().string(), kOptions);
  ASSERT_EQ(model.executor(), ExecutorKind::kMega);
  const int64_t vocab = model.vocab_size();
  const nlohmann::json& prompts = json_["prompts"];
  double worst = 0;
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    std::vector<int32_t> ids = prompts[p].get<std::vector<int32_t>>();
    std::vector<float> expected = golden_logits(goldens_, static_cast<int>(p));
    auto state = model.new_sequence(256);
    SequenceState* states[] = {state.get()};
    std::vector<float> logits;
    for (std::size_t t = 0; t < ids.size(); ++t) {
      model.decode(states, std::span<const int32_t>(&ids[t], 1), logits);
      worst = std::max(
          worst,
          relative_error(logits.data(), expected.data() + static_cast<int64_t>(t) * vocab, vocab));
    }
  }
  std::printf("decode (mega step program): max |dlogit| / max |logit| = %.3g (bound %.0e)\n", worst,
              kBound);
  EXPECT_LT(worst, kBound);

  // Greedy: prefill by the reference forward, then decode() as the engine runs it. transformers'
  // smallest top-1 margin along the way is ~0.1 against logits of ~17, far above 1e-4 of them,
  // so every token must agree (the loop checks each margin anyway).
  std::vector<int32_t> prompt =
      prompts[json_["greedy_prompt"].get<std::size_t>()].get<std::vector<int32_t>>();
  std::vector<int32_t> want = json_["greedy"].get<std::vector<int32_t>>();
  std::vector<double> margins = json_["greedy_margins"].get<std::vector<double>>();
  auto state = model.new_sequence(256);
  std::vector<float> logits;
  model.forward(*state, prompt, LogitRows::kLast, logits);
  SequenceState* states[] = {state.get()};
  std::vector<int32_t> got;
  for (std::size_t i = 0; i < want.size(); ++i) {
    double scale = 0;
    for (int64_t v = 0; v < vocab; ++v) scale = std::max(scale, std::abs(double{logits[v]}));
    int32_t next = argmax(logits.data(), vocab);
    if (margins[i] > 2 * kBound * scale) {
      EXPECT_EQ(next, want[i]) << "greedy step " << i << " (margin " << margins[i] << ")";
    }
    // Follow transformers' token so that one near tie would not derail the rest.
    got.push_back(next);
    model.decode(states, std::span<const int32_t>(&want[i], 1), logits);
  }
  EXPECT_EQ(got, want);
}

// Negative control: HF's q/k rows bound as stored go through the adjacent-pair RoPE with the
// wrong pairing; that must miss the goldens by far more than the bound, or the test above could
// not tell the permutation from its absence.
TEST_F(LlamaHf, UnpermutedQkFailsByFarMoreThanTheBound) {
  LlamaGgufModel model(fixture_dir().string(), kOptions, testing::LlamaHfQk::kAsStored);
  double worst = worst_forward_error(model, json_["prompts"], goldens_);
  std::printf("q/k not permuted: max |dlogit| / max |logit| = %.3g\n", worst);
  EXPECT_GT(worst, 10 * kBound);
}

class LlamaHfBadInput : public LlamaHf {
 protected:
  void SetUp() override {
    LlamaHf::SetUp();
    if (IsSkipped()) return;
    root_ = fs::temp_directory_path() /
            ("md_llama_hf_bad_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::copy(fixture_dir(), root_, fs::copy_options::recursive);
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  // Edits the safetensors header in place, keeping its length (padded with spaces, which the
  // format allows) so that every data offset stays valid.
  void edit_header(const std::function<void(nlohmann::ordered_json&)>& edit) {
    fs::path path = root_ / "model.safetensors";
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    uint64_t length = 0;
    std::memcpy(&length, bytes.data(), sizeof length);
    auto begin = bytes.begin() + 8;
    nlohmann::ordered_json header =
        nlohmann::ordered_json::parse(begin, begin + static_cast<std::ptrdiff_t>(length));
    edit(header);
    std::string text = header.dump();
    ASSERT_LE(text.size(), length) << "edited header grew";
    text.resize(length, ' ');
    std::copy(text.begin(), text.end(), begin);
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  std::string load_error() const {
    try {
      load_language_model(root_.string(), kOptions);
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }

  void expect_refused(const std::vector<std::string>& parts) const {
    std::string message = load_error();
    ASSERT_FALSE(message.empty()) << "the damaged model loaded";
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }

  fs::path root_;
};

TEST_F(LlamaHfBadInput, IntactCopyLoads) {
  EXPECT_EQ(load_error(), "");
}

TEST_F(LlamaHfBadInput, MissingTensorIsNamed) {
  const std::string name = "model.layers.1.mlp.up_proj.weight";
  edit_header([&](nlohmann::ordered_json& header) {
    header["model.layers.1.mlp.up_proj.weigh"] = header[name];
    header.erase(name);
  });
  expect_refused({name, "missing", root_.string()});
}

TEST_F(LlamaHfBadInput, MissingLmHeadOfAnUntiedModelIsNamed) {
  edit_header([&](nlohmann::ordered_json& header) {
    header["lm_head.weigh"] = header["lm_head.weight"];
    header.erase("lm_head.weight");
  });
  expect_refused({"lm_head.weight", "missing"});
}

TEST_F(LlamaHfBadInput, WrongShapeIsNamedWithBothShapes) {
  // Same element count, so the file itself stays valid: only the config disagrees.
  const std::string name = "model.layers.0.self_attn.k_proj.weight";
  edit_header([&](nlohmann::ordered_json& header) { header[name]["shape"] = {64, 32}; });
  expect_refused({name, "model.safetensors", "[64, 32]", "[32, 64]"});
}

TEST_F(LlamaHfBadInput, UnreadableDtypeIsNamed) {
  const std::string name = "model.layers.1.self_attn.o_proj.weight";
  edit_header([&](nlohmann::ordered_json& header) { header[name]["dtype"] = "I16"; });
  expect_refused({name, "model.safetensors", "I16", "BF16, F16 or F32"});
}

}  // namespace
}  // namespace md
