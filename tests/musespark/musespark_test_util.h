// The scaled-down Muse Spark fixtures and their transformers goldens
// (tests/goldens/musespark/README.md).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../support/golden_math.h"
#include "../support/param_names.h"
#include "io/safetensors_file.h"
#include "models/musespark/musespark_model.h"
#include "models/musespark/musespark_testing.h"

namespace md::test {

inline const std::vector<std::string>& musespark_fixture_names() {
  static const std::vector<std::string> names = {"muse-spark-tiny", "muse-spark-small"};
  return names;
}

inline std::string musespark_fixture_dir(const std::string& name) {
  return std::string(MD_GOLDEN_DIR) + "/musespark/" + name;
}

inline std::string musespark_golden_path(const std::string& name) {
  return std::string(MD_SOURCE_DIR) + "/tests/goldens/musespark/" + name + ".safetensors";
}

inline std::unique_ptr<MuseSparkModel> load_muse(
    const std::string& name, KvCacheType kv = KvCacheType::kF32,
    md::testing::MuseAblation ablation = md::testing::MuseAblation::kNone, int threads = 1,
    DenseWeights dense = DenseWeights::kAsStored, int64_t prefill_rows = 256) {
  ModelRunOptions run{threads, kv};
  run.dense_weights = dense;
  run.prefill_rows = prefill_rows;
  return std::make_unique<MuseSparkModel>(musespark_fixture_dir(name), run,
                                          MuseSparkOptions{ablation});
}

struct MuseGoldenPrompt {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [ids.size()][vocab], transformers' (no tail mask)
  std::vector<int32_t> greedy;
  std::vector<float> greedy_margin;
};

// `name` a fixture, or a twin's golden ("muse-spark-tiny-int8").
inline std::vector<MuseGoldenPrompt> load_muse_goldens(const std::string& name) {
  SafetensorsFile file(musespark_golden_path(name));
  std::vector<MuseGoldenPrompt> prompts;
  for (int p = 0; file.find("p" + std::to_string(p) + ".ids") != nullptr; ++p) {
    const std::string key = "p" + std::to_string(p) + ".";
    MuseGoldenPrompt g;
    g.ids = tensor_values<int32_t>(file, key + "ids");
    g.logits = tensor_values<float>(file, key + "logits");
    if (file.find(key + "greedy") != nullptr) {
      g.greedy = tensor_values<int32_t>(file, key + "greedy");
      g.greedy_margin = tensor_values<float>(file, key + "greedy_margin");
    }
    prompts.push_back(std::move(g));
  }
  return prompts;
}

}  // namespace md::test
