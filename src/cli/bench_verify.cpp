#include "cli/bench_verify.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace md::cli {

namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

std::optional<VerifyFigure> measure_verify(LanguageModel& model, int64_t rows, int64_t context,
                                           double seconds) {
  if (!model.supports_verify()) return std::nullopt;
  using Clock = std::chrono::steady_clock;
  auto elapsed = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  const int64_t vocab = model.vocab_size();
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < 64; ++i) prompt.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
  std::vector<int32_t> block;
  for (int64_t i = 0; i < rows; ++i) block.push_back(static_cast<int32_t>((i * 53 + 3) % vocab));
  auto state = model.new_sequence(context);
  std::vector<float> logits;
  auto refill = [&] {
    state->reset();
    model.forward(*state, prompt, LogitRows::kLast, logits);
  };
  refill();
  std::vector<double> verify, decode;
  int32_t token = 7;
  SequenceState* states[] = {state.get()};
  const Clock::time_point start = Clock::now();
  for (int pass = 0; pass < 5 || elapsed(start) < seconds; ++pass) {
    // Room for a decode step after the verify rows, which commit(0) gives back.
    if (state->position() + rows + 1 >= state->capacity()) refill();
    Clock::time_point t0 = Clock::now();
    model.verify(*state, block, logits);
    verify.push_back(elapsed(t0));
    model.commit(*state, 0);
    t0 = Clock::now();
    model.decode(states, {&token, 1}, logits);
    decode.push_back(elapsed(t0));
    token = static_cast<int32_t>((token * 13 + 5) % vocab);
  }
  return VerifyFigure{rows, median(verify), median(decode)};
}

}  // namespace md::cli
