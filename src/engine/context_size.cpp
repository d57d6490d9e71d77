#include "engine/context_size.h"

#include <unistd.h>

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace md::engine {

namespace {

// The default context leaves most memory to the weights and the OS: a quarter for state.
constexpr uint64_t kDefaultStateShare = 4;
constexpr int64_t kMinimumDefault = 256;

double gib(uint64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

}  // namespace

uint64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

int64_t choose_context(const LanguageModel& model, int64_t requested, int sequences) {
  int64_t limit = model.max_context();
  uint64_t per_token = std::max<std::size_t>(1, model.state_bytes_per_token());
  uint64_t fixed = model.state_bytes_fixed();
  uint64_t memory = physical_memory_bytes();
  auto state_bytes = [&](int64_t context) {
    return (static_cast<uint64_t>(context) * per_token + fixed) * static_cast<uint64_t>(sequences);
  };
  if (requested > 0) {
    if (requested > limit) {
      fail("--context {} exceeds the model's maximum of {} tokens (max_position_embeddings)",
           requested, limit);
    }
    if (memory != 0 && state_bytes(requested) > memory) {
      fail("--context {} needs {:.1f} GiB of sequence state but the machine has {:.1f} GiB",
           requested, gib(state_bytes(requested)), gib(memory));
    }
    return requested;
  }
  if (memory == 0) return std::min<int64_t>(limit, 4096);
  uint64_t budget = memory / kDefaultStateShare / static_cast<uint64_t>(sequences);
  int64_t fits = budget > fixed ? static_cast<int64_t>((budget - fixed) / per_token) : 0;
  int64_t context = std::min(limit, std::max(fits, kMinimumDefault));
  if (context < limit) {
    log::info(
        "context capped at {} tokens (model allows {}) to keep sequence state within a "
        "quarter of memory; use --context to change it",
        context, limit);
  }
  return context;
}

}  // namespace md::engine
