#include "cli/prefill_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>

namespace md::cli {

namespace {

constexpr double kQuietSeconds = 1.0;  // prefills shorter than this print nothing
constexpr double kLogSeconds = 1.0;    // a log (not a terminal) gets a line this often

}  // namespace

PrefillProgressLine::PrefillProgressLine(std::FILE* out, bool terminal, Seconds now)
    : out_(out), terminal_(terminal), now_(std::move(now)) {}

PrefillProgressLine PrefillProgressLine::on_stderr() {
  return PrefillProgressLine(stderr, isatty(fileno(stderr)) != 0);
}

double PrefillProgressLine::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void PrefillProgressLine::operator()(int64_t done, int64_t total) {
  const double now = now_();
  if (done == 0) {
    start_ = now;
    printed_ = false;
    return;
  }
  const double elapsed = now - start_;
  const bool finished = done >= total;
  if (finished) {
    if (printed_) {
      print(done, total, elapsed);
      if (terminal_) fmt::print(out_, "\n");
      std::fflush(out_);
    }
    return;
  }
  if (elapsed < kQuietSeconds) return;
  if (!terminal_ && printed_ && now - last_print_ < kLogSeconds) return;
  print(done, total, elapsed);
  std::fflush(out_);
  last_print_ = now;
  printed_ = true;
}

void PrefillProgressLine::print(int64_t done, int64_t total, double elapsed) {
  const std::string line =
      fmt::format("prefill {} / {} tokens ({:.0f}%), {:.0f} tok/s, {:.1f} s", done, total,
                  100.0 * static_cast<double>(done) / static_cast<double>(total),
                  static_cast<double>(done) / elapsed, elapsed);
  if (terminal_) {
    fmt::print(out_, "\r{}\x1b[K", line);  // rewritten in place, the rest of the old line erased
  } else {
    fmt::print(out_, "{}\n", line);
  }
}

}  // namespace md::cli
