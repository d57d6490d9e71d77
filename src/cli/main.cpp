#include "cli/cli_app.h"

int main(int argc, char** argv) {
  return md::cli::run_cli(argc, argv);
}
