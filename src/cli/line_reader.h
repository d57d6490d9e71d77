// Reads the user's lines: with line editing and in-memory history (libedit) when stdin is a
// terminal, plain lines without a prompt otherwise, so that a chat can be scripted through a pipe.
#pragma once

#include <optional>
#include <string>

namespace md::cli {

class LineReader {
 public:
  LineReader();  // interactive when stdin is a terminal

  // The next line without its newline; nullopt at end of input (Ctrl-D).
  std::optional<std::string> read(const std::string& prompt);
  bool interactive() const { return interactive_; }

 private:
  bool interactive_;
};

}  // namespace md::cli
