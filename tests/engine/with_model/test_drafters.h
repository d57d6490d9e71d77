// Test doubles of SpeculativeDrafter: an oracle that knows the plain greedy continuation (and
// plants an error at a chosen draft position), and a drafter of random tokens with a known q.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "models/drafters/speculative_drafter.h"

namespace md::test {

inline constexpr int64_t kTestBlock = 8;

// Knows the plain greedy continuation (by position) and proposes it, except that from draft
// position `error_at` on it proposes a wrong token: exercises every acceptance length. With
// `confidence` (one per draft position), its proposals carry those confidences.
class OracleDrafter : public SpeculativeDrafter {
 public:
  OracleDrafter(std::vector<int32_t> truth_by_position, int64_t error_at, int64_t vocab,
                std::vector<float> confidence = {})
      : truth_(std::move(truth_by_position)),
        error_at_(error_at),
        vocab_(vocab),
        confidence_(std::move(confidence)) {}
  int64_t block_size() const override { return kTestBlock; }
  bool has_confidence() const override { return !confidence_.empty(); }
  std::vector<int64_t> tap_layers() const override { return {0, 3}; }
  void append_context(std::span<const float> taps, int64_t rows) override {
    EXPECT_EQ(taps.size() % static_cast<std::size_t>(rows), 0u);
    length_ += rows;
  }
  int64_t context_length() const override { return length_; }
  void truncate_context(int64_t length) override { length_ = std::min(length_, length); }
  DraftProposal propose(int32_t, float, std::span<const double>, bool) override {
    DraftProposal p;
    for (int64_t i = 1; i < kTestBlock; ++i) {
      auto position = static_cast<std::size_t>(length_ + i);
      int32_t truth = position < truth_.size() ? truth_[position] : 0;
      int32_t token = i - 1 >= error_at_ ? static_cast<int32_t>((truth + 1) % vocab_) : truth;
      p.tokens.push_back(token);
      p.q.push_back({{token, 1.0f}});
    }
    p.confidence = confidence_;
    return p;
  }
  std::unique_ptr<SpeculativeDrafter> new_sequence() const override {
    return std::make_unique<OracleDrafter>(truth_, error_at_, vocab_, confidence_);
  }
  std::unique_ptr<SpeculativeDrafter> clone() const override {
    return std::make_unique<OracleDrafter>(*this);
  }

 private:
  std::vector<int32_t> truth_;
  int64_t error_at_;
  int64_t vocab_;
  std::vector<float> confidence_;
  int64_t length_ = 0;
};

// Proposes tokens from a small random distribution q over the vocabulary (sampled with the
// loop's uniforms), so that drafts are sometimes right and q is not one-hot.
class RandomDrafter : public SpeculativeDrafter {
 public:
  explicit RandomDrafter(std::vector<int32_t> support) : support_(std::move(support)) {}
  int64_t block_size() const override { return kTestBlock; }
  std::vector<int64_t> tap_layers() const override { return {2, 3}; }  // within every fixture
  void append_context(std::span<const float>, int64_t rows) override { length_ += rows; }
  int64_t context_length() const override { return length_; }
  void truncate_context(int64_t length) override { length_ = std::min(length_, length); }
  DraftProposal propose(int32_t, float, std::span<const double> uniforms, bool) override {
    DraftProposal p;
    std::vector<std::pair<int32_t, float>> q;
    float mass = 1.0f / static_cast<float>(support_.size());
    for (int32_t t : support_) q.push_back({t, mass});
    for (std::size_t i = 0; i < uniforms.size(); ++i) {
      auto pick = static_cast<std::size_t>(uniforms[i] * static_cast<double>(support_.size()));
      p.tokens.push_back(support_[std::min(pick, support_.size() - 1)]);
      p.q.push_back(q);
    }
    return p;
  }
  std::unique_ptr<SpeculativeDrafter> new_sequence() const override {
    return std::make_unique<RandomDrafter>(support_);
  }
  std::unique_ptr<SpeculativeDrafter> clone() const override {
    return std::make_unique<RandomDrafter>(*this);
  }

 private:
  std::vector<int32_t> support_;
  int64_t length_ = 0;
};

}  // namespace md::test
