// The progress of a long prompt's prefill on stderr, for `run` and `chat`: nothing for a prefill
// that ends within a second (the common case prints no noise), then the tokens done, the share and
// the rate. On a terminal one line rewritten in place; elsewhere (a log) a line per second.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>

namespace md::cli {

class PrefillProgressLine {
 public:
  using Seconds = std::function<double()>;  // a monotonic clock, for tests to replace

  PrefillProgressLine(std::FILE* out, bool terminal, Seconds now = steady_seconds);
  // On stderr, rewritten in place when stderr is a terminal (`run` and `chat`).
  static PrefillProgressLine on_stderr();

  // engine::Generator::PrefillProgress: (0, total) starts a prefill.
  void operator()(int64_t done, int64_t total);

  static double steady_seconds();

 private:
  void print(int64_t done, int64_t total, double elapsed);

  std::FILE* out_;
  bool terminal_;
  Seconds now_;
  double start_ = 0;
  double last_print_ = 0;
  bool printed_ = false;
};

}  // namespace md::cli
