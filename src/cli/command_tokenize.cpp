#include "cli/commands.h"

#include <fmt/format.h>

namespace md::cli {

CommandAction add_tokenize_command(CLI::App& app) {
  app.add_subcommand("tokenize", "Encode text to token ids, or decode ids to text");
  return []() {
    fmt::print(stderr, "megadecode tokenize: not implemented yet.\n");
    return kExitNotImplemented;
  };
}

}  // namespace md::cli
