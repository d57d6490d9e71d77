// Reads the user's lines: with line editing and in-memory history (libedit) when stdin is a
// terminal, plain lines without a prompt otherwise, so that a chat can be scripted through a pipe.
// At a terminal prompt Ctrl-C is an event of its own, not the end of the program: the caller
// decides what it means (the chat asks before leaving).
#pragma once

#include <string>

namespace md::cli {

struct LineInput {
  enum class Kind { kLine, kInterrupted, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;  // kLine: the line without its newline
};

class LineReader {
 public:
  LineReader();  // interactive when stdin is a terminal

  // The next line; kInterrupted when Ctrl-C was pressed at the prompt (the partly typed line is
  // dropped); kEnd at end of input (Ctrl-D).
  LineInput read(const std::string& prompt);
  bool interactive() const { return interactive_; }

 private:
  bool interactive_;
};

}  // namespace md::cli
