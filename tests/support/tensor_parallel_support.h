// What the tensor-parallel tests share: the session they run on one rank and on many, the
// relative logit gap they bound, and the negative controls' communicator, which misbehaves once
// on purpose.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "dist/communicator.h"
#include "models/tensor_parallel_model.h"

namespace md::testing {

// max |a − b| over max |b| (sizes must agree; a mismatch fails the caller's EXPECTs on it).
inline double relative_gap(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double gap = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    gap = std::max(gap, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return gap / scale;
}

// A communicator around another whose `at`-th all-gather misbehaves: kDrop loses the other
// ranks' parts (as if that all-reduce were missing; the rank still takes part, so the ranks stay
// in step), kFail fails this rank alone (it aborts the group, as a rank that cannot go on does,
// then throws), the other ranks being inside the same step.
class FaultyCommunicator final : public dist::Communicator {
 public:
  enum class Fault { kDrop, kFail };
  FaultyCommunicator(dist::Communicator& inner, Fault fault, int at)
      : inner_(inner), fault_(fault), at_(at) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string transport() const override { return inner_.transport(); }
  void all_gather(const void* in, std::size_t bytes, void* out) override {
    const bool now = calls_++ == at_;
    if (now && fault_ == Fault::kFail) {
      inner_.abort("injected failure");
      throw Error("injected failure");
    }
    inner_.all_gather(in, bytes, out);
    if (!now) return;
    dropped_bytes_ = bytes;
    for (int r = 0; r < size(); ++r) {
      if (r != rank()) std::memset(static_cast<std::byte*>(out) + r * bytes, 0, bytes);
    }
  }
  void broadcast(void* data, std::size_t bytes, int root) override {
    inner_.broadcast(data, bytes, root);
  }
  void barrier() override { inner_.barrier(); }
  void abort(const std::string& why) override { inner_.abort(why); }
  // The size of the part that kDrop dropped (0 before): which sum it was.
  std::size_t dropped_bytes() const { return dropped_bytes_; }

 private:
  dist::Communicator& inner_;
  Fault fault_;
  int at_;
  int calls_ = 0;
  std::size_t dropped_bytes_ = 0;
};

// The negative control of the tensor-parallel tests: the relative gap between `one` rank's
// logits of `prompt` (every row) and those of two ranks, loaded by `load` with `options`, whose
// all-reduce number `at` of the first step (0: layer 0's o products) loses the other rank's part;
// `dropped_bytes` (when not null) receives the size of the part rank 0 dropped, which tells which
// sum it was.
inline double gap_with_a_dropped_all_reduce(LanguageModel& one,
                                            const TensorParallelModel::Loader& load,
                                            const ModelRunOptions& options,
                                            const std::vector<int32_t>& prompt, int64_t context,
                                            int at = 0, std::size_t* dropped_bytes = nullptr) {
  std::vector<std::unique_ptr<FaultyCommunicator>> dropping;
  TensorParallelModel tp(2, options, [&](const ModelRunOptions& rank) {
    dropping.push_back(
        std::make_unique<FaultyCommunicator>(*rank.ranks, FaultyCommunicator::Fault::kDrop, at));
    ModelRunOptions with = rank;
    with.ranks = dropping.back().get();
    return load(with);
  });
  auto a = one.new_sequence(context);
  auto b = tp.new_sequence(context);
  std::vector<float> expected, got;
  one.forward(*a, prompt, LogitRows::kAll, expected);
  tp.forward(*b, prompt, LogitRows::kAll, got);
  if (dropped_bytes != nullptr) *dropped_bytes = dropping.front()->dropped_bytes();
  return relative_gap(got, expected);
}

// The run options of the tensor-parallel tests: f32 KV caches (exact comparisons), prompts in
// prefill programs of 16 rows (several chunks even for short prompts).
inline ModelRunOptions options_for(ExecutorKind executor, int threads) {
  ModelRunOptions run;
  run.threads = threads;
  run.kv_cache = KvCacheType::kF32;
  run.executor = executor;
  run.prefill_rows = 16;
  return run;
}

// Expert parallelism: each expert runs on the one rank that holds it. In a step of two sequences
// (after prompts of 5 and 3 tokens), the experts two ranks of the model `load` opens ran add up,
// layer by layer, to those one rank ran, and some layer ran experts on both ranks. `Model` (a
// family's model class) reports a fused step's experts per MoE layer through experts_run().
template <typename Model>
void expect_the_ranks_share_the_experts(const TensorParallelModel::Loader& load, int64_t context) {
  const ModelRunOptions options = options_for(ExecutorKind::kMega, 2);
  const std::unique_ptr<LanguageModel> one_rank = load(options);
  LanguageModel& one = *one_rank;
  TensorParallelModel tp(2, options, load);
  auto step = [context](LanguageModel& model) {
    auto a = model.new_sequence(context);
    auto b = model.new_sequence(context);
    std::vector<float> logits;
    model.forward(*a, std::vector<int32_t>{5, 216, 427, 138, 349}, LogitRows::kLast, logits);
    model.forward(*b, std::vector<int32_t>{61, 272, 3}, LogitRows::kLast, logits);
    SequenceState* both[] = {a.get(), b.get()};
    model.decode(both, std::vector<int32_t>{17, 230}, logits);
  };
  step(one);
  step(tp);
  ASSERT_EQ(tp.ranks(), 2);
  const std::vector<int64_t>& whole = dynamic_cast<Model&>(one).experts_run();
  const std::vector<int64_t>& first = dynamic_cast<Model&>(tp.rank(0)).experts_run();
  const std::vector<int64_t>& second = dynamic_cast<Model&>(tp.rank(1)).experts_run();
  ASSERT_FALSE(whole.empty());
  ASSERT_EQ(first.size(), whole.size());
  ASSERT_EQ(second.size(), whole.size());
  bool split = false;
  for (std::size_t layer = 0; layer < whole.size(); ++layer) {
    EXPECT_EQ(first[layer] + second[layer], whole[layer]) << "MoE layer " << layer;
    split = split || (first[layer] > 0 && second[layer] > 0);
  }
  EXPECT_TRUE(split) << "no layer ran experts on both ranks";
}

// What the tensor-parallel tests run on one rank and on many: a prompt's logits (every row),
// `steps` greedy decode steps, a step of two sequences (this one and a fresh one-token one), a
// verify of `verify_rows` rows and a commit of two, then one more step: every logit in order, the
// tokens chosen, and the last step's taps (when the model has tap layers).
struct Session {
  std::vector<float> logits, taps;
  std::vector<int32_t> tokens;
};

inline int32_t argmax_of(const float* logits, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
}

inline Session session(LanguageModel& model, const std::vector<int32_t>& prompt, int64_t context,
                       int steps, int verify_rows) {
  Session out;
  auto state = model.new_sequence(context);
  std::vector<float> logits;
  const int64_t vocab = model.vocab_size();
  auto keep = [&] { out.logits.insert(out.logits.end(), logits.begin(), logits.end()); };
  model.forward(*state, prompt, LogitRows::kAll, logits);
  keep();
  int32_t next = argmax_of(logits.data() + (prompt.size() - 1) * vocab, vocab);
  for (int step = 0; step < steps; ++step) {
    out.tokens.push_back(next);
    SequenceState* states[] = {state.get()};
    model.decode(states, std::vector<int32_t>{next}, logits);
    keep();
    next = argmax_of(logits.data(), vocab);
  }
  auto other = model.new_sequence(context);
  model.forward(*other, std::vector<int32_t>{7}, LogitRows::kLast, logits);
  keep();
  SequenceState* both[] = {state.get(), other.get()};
  model.decode(both, std::vector<int32_t>{next, 9}, logits);
  keep();
  next = argmax_of(logits.data(), vocab);
  std::vector<int32_t> verified{next};
  for (int r = 1; r < verify_rows; ++r) verified.push_back(10 + r);
  model.verify(*state, verified, logits);
  keep();
  model.commit(*state, 2);
  SequenceState* states[] = {state.get()};
  model.decode(states, std::vector<int32_t>{14}, logits);
  keep();
  out.tokens.push_back(argmax_of(logits.data(), vocab));
  out.taps = model.last_taps();
  EXPECT_EQ(state->position(), static_cast<int64_t>(prompt.size()) + steps + 1 + 2 + 1);
  return out;
}

}  // namespace md::testing
