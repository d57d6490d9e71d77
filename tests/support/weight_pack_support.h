// What the weight-pack tests of each family share: a scratch directory, a model on N in-process
// ranks with its slices cut at load or read from a pack, and the logits of a short greedy run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/tensor_parallel_model.h"
#include "models/weight_pack.h"
#include "tensor_parallel_support.h"

namespace md::testing {

// A directory path under the system temp dir that does not exist yet (pack_model creates it),
// removed with everything in it at scope exit.
class ScratchPath {
 public:
  ScratchPath() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (std::string("md_pack_") + (info ? info->name() : "test") + "_" +
             std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
  }
  ~ScratchPath() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchPath(const ScratchPath&) = delete;
  ScratchPath& operator=(const ScratchPath&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// The model at `path` on `ranks` in-process ranks, slices from `pack` (empty: cut at load).
inline std::unique_ptr<LanguageModel> on_ranks(const std::string& path, int ranks,
                                               const std::string& pack) {
  return std::make_unique<TensorParallelModel>(
      ranks, options_for(ExecutorKind::kMega, ranks),
      [path, pack](const ModelRunOptions& run) { return load_rank_model(path, run, pack); });
}

// A prompt's logits (every row), then `steps` greedy decode steps' logits, concatenated.
inline std::vector<float> greedy_logits(LanguageModel& model, const std::vector<int32_t>& prompt,
                                        int steps) {
  auto state = model.new_sequence(64);
  std::vector<float> all, logits;
  model.forward(*state, prompt, LogitRows::kAll, logits);
  all = logits;
  const int64_t vocab = model.vocab_size();
  const float* last = logits.data() + (prompt.size() - 1) * static_cast<std::size_t>(vocab);
  int32_t next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
  for (int s = 0; s < steps; ++s) {
    SequenceState* states[] = {state.get()};
    model.decode(states, std::vector<int32_t>{next}, logits);
    all.insert(all.end(), logits.begin(), logits.end());
    next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  return all;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Packs `path` for `ranks` and runs it from the pack and cut at load: the same bits (a pack holds
// exactly the bytes the cut gives, so even the summation order is the same).
inline void expect_pack_round_trip(const std::string& path, int ranks,
                                   const std::vector<int32_t>& prompt, int steps) {
  ScratchPath pack;
  const PackManifest manifest =
      pack_model(path, ranks, pack.str(), "", [](int, std::uint64_t, std::uint64_t) {});
  ASSERT_EQ(manifest.ranks.size(), static_cast<std::size_t>(ranks));
  EXPECT_FALSE(manifest.ranks[0].tensors.empty());
  const std::vector<float> cut = greedy_logits(*on_ranks(path, ranks, ""), prompt, steps);
  const std::vector<float> packed =
      greedy_logits(*on_ranks(path, ranks, pack.str()), prompt, steps);
  EXPECT_TRUE(same_bits(packed, cut)) << path << " on " << ranks << " ranks";
}

}  // namespace md::testing
