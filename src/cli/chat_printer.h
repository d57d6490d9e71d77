// Writes a streamed chat reply to the terminal with the reasoning set apart from the answer:
// grey on a colour terminal, otherwise between "[thinking]" and "[/thinking]" lines so that
// piped output stays readable and easy to take apart.
#pragma once

#include <cstdio>
#include <string_view>

#include "text/reasoning_parser.h"

namespace md::cli {

class ChatPrinter {
 public:
  ChatPrinter(std::FILE* out, bool color) : out_(out), color_(color) {}

  void print(const ReasoningParser::Segment& segment);
  // Closes an open reasoning block and ends the reply's last line (an empty reply prints nothing).
  void end_turn();

 private:
  void open_reasoning();
  void close_reasoning(bool answer_follows);
  void write(std::string_view text);
  void style(std::string_view escape);  // an ANSI sequence: prints nothing, moves nothing

  std::FILE* out_;
  bool color_;
  bool in_reasoning_ = false;
  bool at_line_start_ = true;  // the last character written was a newline
};

// Whether stdout takes ANSI colours: a terminal, TERM set and not "dumb", NO_COLOR unset and
// not turned off by the user.
bool stdout_supports_color(bool disabled_by_user);

}  // namespace md::cli
