#include "cli/cli_app.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>

#include "base/dotenv.h"
#include "base/error.h"
#include "base/log.h"
#include "cli/commands.h"

namespace md::cli {
namespace {

// `.env` in the working directory, then in the repository root (where the launcher lives,
// passed as MEGADECODE_ROOT); values already in the environment always win.
void load_dotenv_files() {
  std::vector<std::string> candidates{".env"};
  if (const char* root = std::getenv("MEGADECODE_ROOT"))
    candidates.push_back(std::string(root) + "/.env");
  for (const std::string& path : candidates) {
    for (const std::string& problem : load_dotenv_file(path)) log::warn("{}", problem);
  }
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"megadecode — fused low-batch LLM decoding on CPUs and GPUs", "megadecode"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "megadecode 0.1.0");
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Log debug details to stderr");
  app.add_flag("-q,--quiet", quiet, "Log only errors");

  std::map<CLI::App*, CommandAction> actions;
  auto add = [&](CommandAction (*factory)(CLI::App&)) {
    std::size_t before = app.get_subcommands({}).size();
    CommandAction action = factory(app);
    actions[app.get_subcommands({})[before]] = std::move(action);
  };
  add(&add_run_command);
  add(&add_chat_command);
  add(&add_serve_command);
  add(&add_bench_command);
  add(&add_pack_command);
  add(&add_tokenize_command);
  add(&add_grammar_command);
  add(&add_info_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (verbose) log::set_threshold(log::Level::kDebug);
  if (quiet) log::set_threshold(log::Level::kError);

  try {
    load_dotenv_files();
    for (CLI::App* sub : app.get_subcommands()) return actions.at(sub)();
    return kExitUsage;
  } catch (const Error& e) {
    fmt::print(stderr, "megadecode: error: {}\n", e.what());
    return kExitError;
  } catch (const std::exception& e) {
    fmt::print(stderr, "megadecode: internal error: {}\n", e.what());
    return kExitError;
  }
}

}  // namespace md::cli
