// How every family runs a prompt through its prefill programs: in chunks of at most
// ModelRunOptions::prefill_rows tokens, each chunk's logits (every row's, or the last row's, which
// each chunk overwrites until the last) written where the caller's vector holds them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "base/error.h"
#include "models/common/row_mode.h"
#include "models/language_model.h"

namespace md {

// md::Error unless `rows` (ModelRunOptions::prefill_rows) is one a prefill program can take.
inline void check_prefill_rows(int64_t rows) {
  if (rows < 1 || rows > kMaxPrefillRows)
    fail("prefill rows {} is outside 1..{}", rows, kMaxPrefillRows);
}

// Sizes `logits` for the rows `which` asks for (`vocab` each), then calls
// run(tokens of the chunk, where its logits go) for each chunk in order.
template <typename Run>
void for_each_prefill_chunk(std::span<const int32_t> tokens, int64_t chunk, LogitRows which,
                            int64_t vocab, std::vector<float>& logits, Run run) {
  const auto n = static_cast<int64_t>(tokens.size());
  const bool every_row = which == LogitRows::kAll;
  logits.resize(static_cast<std::size_t>((every_row ? n : 1) * vocab));
  for (int64_t first = 0; first < n; first += chunk) {
    run(tokens.subspan(static_cast<std::size_t>(first),
                       static_cast<std::size_t>(std::min(chunk, n - first))),
        logits.data() + (every_row ? first * vocab : 0));
  }
}

}  // namespace md
