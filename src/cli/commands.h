// Registration of each subcommand with the CLI11 app. One command_<name>.cpp per subcommand.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace md::cli {

// A subcommand registers its options and returns the action to run once parsing succeeded.
// The action returns the exit code.
using CommandAction = std::function<int()>;

CommandAction add_run_command(CLI::App& app);
CommandAction add_chat_command(CLI::App& app);
CommandAction add_serve_command(CLI::App& app);
CommandAction add_bench_command(CLI::App& app);
CommandAction add_pack_command(CLI::App& app);
CommandAction add_tokenize_command(CLI::App& app);
CommandAction add_info_command(CLI::App& app);
CommandAction add_grammar_command(CLI::App& app);

// Exit codes shared by all subcommands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNotImplemented = 3;

}  // namespace md::cli
