#include "cli/line_reader.h"

#include <editline/readline.h>
#include <unistd.h>

#include <clocale>
#include <cstdlib>
#include <iostream>
#include <memory>

namespace md::cli {
namespace {

constexpr int kHistoryLines = 1000;

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t") == std::string::npos;
}

}  // namespace

LineReader::LineReader() : interactive_(isatty(STDIN_FILENO) != 0) {
  if (!interactive_) return;
  // libedit edits characters, not bytes, only under the user's locale.
  std::setlocale(LC_CTYPE, "");
  using_history();
  stifle_history(kHistoryLines);
}

std::optional<std::string> LineReader::read(const std::string& prompt) {
  if (!interactive_) {
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    if (line.ends_with('\r')) line.pop_back();
    return line;
  }
  std::unique_ptr<char, decltype(&std::free)> raw(readline(prompt.c_str()), &std::free);
  if (raw == nullptr) return std::nullopt;
  std::string line(raw.get());
  if (!is_blank(line)) add_history(line.c_str());
  return line;
}

}  // namespace md::cli
