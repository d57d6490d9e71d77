// Ctrl-C while generating stops the current answer, not the program: SIGINT sets a flag the
// generation loop polls. More Ctrl-C while it stops change nothing (the conversation is kept);
// only one pressed 3 s or more after the first, with the reply still running (a stuck engine),
// exits at once (status 130). While the scope lives, the terminal keeps typed-ahead input when
// Ctrl-C is pressed (NOFLSH).
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
