#include "base/log.h"

#include <atomic>
#include <mutex>

namespace md::log {
namespace {
std::atomic<Level> g_threshold{Level::kInfo};
std::mutex g_write_mutex;

const char* level_name(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warning";
    case Level::kError:
      return "error";
    case Level::kOff:
      break;
  }
  return "";
}
}  // namespace

Level threshold() {
  return g_threshold.load(std::memory_order_relaxed);
}
void set_threshold(Level level) {
  g_threshold.store(level, std::memory_order_relaxed);
}

void write(Level level, const std::string& message) {
  std::lock_guard lock(g_write_mutex);
  fmt::print(stderr, "megadecode: {}: {}\n", level_name(level), message);
}

}  // namespace md::log
