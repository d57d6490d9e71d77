#include "models/language_model.h"

#include <algorithm>

#include "base/error.h"

namespace md {

void require_stored_dense_weights(DenseWeights dense, const std::string& model) {
  if (dense != DenseWeights::kAsStored) {
    fail("{}: --dense-weights int8 is implemented for muse_spark models only", model);
  }
}

void require_step_programs(const ModelRunOptions& options, const std::string& model) {
  if (!dist::tensor_parallel(options.ranks) || options.executor != ExecutorKind::kReference) return;
  fail("{}: tensor parallelism runs the step programs (executor mega or ops), not the reference",
       model);
}

void LanguageModel::decode(std::span<SequenceState* const> states, std::span<const int32_t> tokens,
                           std::vector<float>& logits) {
  decode_each(states, tokens, logits, [](std::size_t) {});
}

void LanguageModel::check_tap_layers(std::span<const int64_t> layers, int64_t num_layers) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] >= num_layers) {
      fail("tap layer {} is outside the target's layers [0, {})", layers[i], num_layers);
    }
    if (std::find(layers.begin(), layers.begin() + static_cast<std::ptrdiff_t>(i), layers[i]) !=
        layers.begin() + static_cast<std::ptrdiff_t>(i)) {
      fail("tap layer {} is listed twice", layers[i]);
    }
  }
}

void LanguageModel::check_commit(int64_t verified_rows, int64_t rows_kept) {
  if (verified_rows == 0) fail("commit without a verify run on this sequence");
  if (rows_kept < 0 || rows_kept > verified_rows) {
    fail("commit keeps 0..{} rows, got {}", verified_rows, rows_kept);
  }
}

void LanguageModel::check_append(const SequenceState& state, std::span<const int32_t> tokens,
                                 int64_t vocab_size) {
  if (tokens.empty()) fail("forward needs at least one token");
  const auto count = static_cast<int64_t>(tokens.size());
  if (state.position() + count > state.capacity()) {
    fail(
        "context full: {} tokens already in the sequence + {} new exceed the context of {} "
        "tokens (raise --context)",
        state.position(), count, state.capacity());
  }
  for (const int32_t token : tokens) {
    if (token < 0 || token >= vocab_size) {
      fail("token id {} is outside the vocabulary (0..{})", token, vocab_size - 1);
    }
  }
}

void LanguageModel::decode_each(std::span<SequenceState* const> states,
                                std::span<const int32_t> tokens, std::vector<float>& logits,
                                const std::function<void(std::size_t)>& after_row) {
  if (states.size() != tokens.size()) {
    fail("decode: {} sequences but {} tokens", states.size(), tokens.size());
  }
  auto vocab = static_cast<std::size_t>(vocab_size());
  logits.resize(states.size() * vocab);
  std::vector<float> row;
  for (std::size_t i = 0; i < states.size(); ++i) {
    forward(*states[i], tokens.subspan(i, 1), LogitRows::kLast, row);
    std::copy(row.begin(), row.end(), logits.begin() + static_cast<std::ptrdiff_t>(i * vocab));
    after_row(i);
  }
}

void LanguageModel::rewind(SequenceState&, int64_t) const {
  fail("{} cannot rewind a sequence's state", description());
}

namespace {

[[noreturn]] void no_speculation(const LanguageModel& model) {
  fail("speculative decoding needs verify rows, which {} does not have", model.description());
}

}  // namespace

void LanguageModel::verify(SequenceState&, std::span<const int32_t>, std::vector<float>&) {
  no_speculation(*this);
}
void LanguageModel::commit(SequenceState&, int64_t) {
  no_speculation(*this);
}
void LanguageModel::set_tap_layers(std::vector<int64_t>) {
  no_speculation(*this);
}
const std::vector<float>& LanguageModel::last_taps() const {
  no_speculation(*this);
}
TargetView LanguageModel::target_view() const {
  no_speculation(*this);
}

}  // namespace md
