#include "cli/line_reader.h"

#include <editline/readline.h>
#include <unistd.h>

#include <clocale>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>

namespace md::cli {
namespace {

constexpr int kHistoryLines = 1000;

volatile std::sig_atomic_t g_prompt_interrupted = 0;

void on_prompt_sigint(int) {
  g_prompt_interrupted = 1;
}

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t") == std::string::npos;
}

// SIGINT handled by on_prompt_sigint for the life of the scope. Without SA_RESTART the read
// libedit is blocked in fails with EINTR, and readline returns null with the terminal restored.
class PromptInterrupt {
 public:
  PromptInterrupt() {
    g_prompt_interrupted = 0;
    struct sigaction action {};
    action.sa_handler = on_prompt_sigint;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    sigaction(SIGINT, &action, &previous_);
  }
  ~PromptInterrupt() { sigaction(SIGINT, &previous_, nullptr); }
  PromptInterrupt(const PromptInterrupt&) = delete;
  PromptInterrupt& operator=(const PromptInterrupt&) = delete;

 private:
  struct sigaction previous_ {};
};

}  // namespace

LineReader::LineReader() : interactive_(isatty(STDIN_FILENO) != 0) {
  if (!interactive_) return;
  // libedit edits characters, not bytes, only under the user's locale.
  std::setlocale(LC_CTYPE, "");
  using_history();
  stifle_history(kHistoryLines);
}

LineInput LineReader::read(const std::string& prompt) {
  if (!interactive_) {
    std::string line;
    if (!std::getline(std::cin, line)) return {};
    if (line.ends_with('\r')) line.pop_back();
    return {LineInput::Kind::kLine, std::move(line)};
  }
  std::unique_ptr<char, decltype(&std::free)> raw(nullptr, &std::free);
  {
    PromptInterrupt interrupt;
    raw.reset(readline(prompt.c_str()));
  }
  if (raw == nullptr) {
    if (g_prompt_interrupted == 0) return {};
    std::cout << std::endl;  // the terminal echoed ^C after the partly typed line
    return {LineInput::Kind::kInterrupted, {}};
  }
  std::string line(raw.get());
  if (!is_blank(line)) add_history(line.c_str());
  return {LineInput::Kind::kLine, std::move(line)};
}

}  // namespace md::cli
