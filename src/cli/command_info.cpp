#include "cli/commands.h"

#include <fmt/format.h>

namespace md::cli {

CommandAction add_info_command(CLI::App& app) {
  app.add_subcommand("info", "Describe a model: architecture, parameters, bytes per token, memory");
  return []() {
    fmt::print(stderr, "megadecode info: not implemented yet.\n");
    return kExitNotImplemented;
  };
}

}  // namespace md::cli
