#include "cli/chat_printer.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace md::cli {
namespace {

constexpr std::string_view kGrey = "\x1b[90m";
constexpr std::string_view kReset = "\x1b[0m";

}  // namespace

void ChatPrinter::print(const ReasoningParser::Segment& segment) {
  if (segment.kind == ReasoningParser::Segment::kReasoning) {
    open_reasoning();
  } else {
    close_reasoning(true);
  }
  write(segment.text);
  std::fflush(out_);
}

void ChatPrinter::end_turn() {
  close_reasoning(false);
  if (!at_line_start_) write("\n");
  std::fflush(out_);
}

void ChatPrinter::open_reasoning() {
  if (in_reasoning_) return;
  in_reasoning_ = true;
  if (!at_line_start_) write("\n");
  if (color_) {
    style(kGrey);
  } else {
    write("[thinking]\n");
  }
}

void ChatPrinter::close_reasoning(bool answer_follows) {
  if (!in_reasoning_) return;
  in_reasoning_ = false;
  if (color_) {
    // The colour ends before the newline so that a cut-off reply never leaves the prompt grey.
    style(kReset);
    if (!at_line_start_) write("\n");
    if (answer_follows) write("\n");  // a blank line between grey and plain text
  } else {
    if (!at_line_start_) write("\n");
    write("[/thinking]\n");
  }
}

void ChatPrinter::write(std::string_view text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), out_);
  at_line_start_ = text.back() == '\n';
}

void ChatPrinter::style(std::string_view escape) {
  std::fwrite(escape.data(), 1, escape.size(), out_);
}

bool stdout_supports_color(bool disabled_by_user) {
  if (disabled_by_user || std::getenv("NO_COLOR") != nullptr) return false;
  const char* term = std::getenv("TERM");
  if (term == nullptr || std::string_view(term) == "dumb") return false;
  return isatty(fileno(stdout)) != 0;
}

}  // namespace md::cli
