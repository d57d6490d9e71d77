// Subcommands whose engines arrive with later issues: they exist (with --help) and say so.
#include <fmt/format.h>

#include <string>

#include "cli/commands.h"

namespace md::cli {
namespace {

CommandAction not_yet(CLI::App& app, const char* name, const char* description,
                      const char* arrives_with) {
  CLI::App* sub = app.add_subcommand(name, description);
  sub->allow_extras();
  std::string what = arrives_with;
  std::string command = name;
  return [command, what]() {
    fmt::print(stderr, "megadecode {}: not implemented yet ({}).\n", command, what);
    return kExitNotImplemented;
  };
}

}  // namespace

CommandAction add_pack_command(CLI::App& app) {
  return not_yet(app, "pack", "Write a kernel-layout weight container",
                 "arrives with the CPU megakernel");
}

}  // namespace md::cli
