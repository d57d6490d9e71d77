#include "cli/interrupt.h"

#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <ctime>

namespace md::cli {

namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<int64_t> g_first_ns{0};
struct sigaction g_previous {};
termios g_terminal{};
bool g_terminal_saved = false;

// A Ctrl-C this long after the first while the reply still has not stopped exits: the engine is
// stuck (it polls the flag between steps), and the user needs a way out.
constexpr int64_t kForceExitNs = 3'000'000'000;

int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

void on_sigint(int) {
  if (!g_interrupted.exchange(true)) {
    g_first_ns = monotonic_ns();
    return;
  }
  // Repeated Ctrl-C while the reply is stopping does nothing: it must not lose the conversation.
  if (monotonic_ns() - g_first_ns.load() >= kForceExitNs) _exit(130);
}

}  // namespace

InterruptScope::InterruptScope() {
  g_interrupted = false;
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_previous);
  // The terminal discards what was typed ahead when Ctrl-C is pressed, unless NOFLSH is set: a
  // line typed during a reply is the user's next message, also when they stop the reply.
  g_terminal_saved = isatty(STDIN_FILENO) != 0 && tcgetattr(STDIN_FILENO, &g_terminal) == 0;
  if (g_terminal_saved) {
    termios keep = g_terminal;
    keep.c_lflag |= NOFLSH;
    tcsetattr(STDIN_FILENO, TCSANOW, &keep);
  }
}

InterruptScope::~InterruptScope() {
  if (g_terminal_saved) tcsetattr(STDIN_FILENO, TCSANOW, &g_terminal);
  sigaction(SIGINT, &g_previous, nullptr);
}

const std::atomic<bool>& InterruptScope::flag() {
  return g_interrupted;
}
bool InterruptScope::raised() {
  return g_interrupted.load();
}
void InterruptScope::clear() {
  g_interrupted = false;
}

}  // namespace md::cli
