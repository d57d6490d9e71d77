// The `megadecode` command line: one binary, one subcommand per task (run, chat, serve, bench,
// pack, tokenize, info). Results go to stdout, logs and errors to stderr.
#pragma once

namespace md::cli {

// Parses argv, runs the chosen subcommand and returns the process exit code.
// Never throws: md::Error and other failures become a message on stderr and a non-zero code.
int run_cli(int argc, char** argv);

}  // namespace md::cli
