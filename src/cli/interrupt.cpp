#include "cli/interrupt.h"

#include <unistd.h>

#include <csignal>

namespace md::cli {

namespace {

std::atomic<bool> g_interrupted{false};
struct sigaction g_previous {};

void on_sigint(int) {
  if (g_interrupted.exchange(true)) _exit(130);
}

}  // namespace

InterruptScope::InterruptScope() {
  g_interrupted = false;
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_previous);
}

InterruptScope::~InterruptScope() { sigaction(SIGINT, &g_previous, nullptr); }

const std::atomic<bool>& InterruptScope::flag() { return g_interrupted; }
bool InterruptScope::raised() { return g_interrupted.load(); }
void InterruptScope::clear() { g_interrupted = false; }

}  // namespace md::cli
