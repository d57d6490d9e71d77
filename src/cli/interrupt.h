// Ctrl-C while generating stops the current answer, not the program: SIGINT sets a flag the
// generation loop polls. A second Ctrl-C before the flag is cleared exits at once (status 130).
#pragma once

#include <atomic>

namespace md::cli {

class InterruptScope {
 public:
  InterruptScope();   // installs the handler and clears the flag
  ~InterruptScope();  // restores the previous handler
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  static const std::atomic<bool>& flag();
  static bool raised();
  static void clear();
};

}  // namespace md::cli
