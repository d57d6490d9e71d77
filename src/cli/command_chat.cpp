#include <fmt/format.h>

#include <string>

#include "cli/commands.h"

namespace md::cli {

CommandAction add_chat_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("chat", "Interactive terminal chat with a model");
  auto model = std::make_shared<std::string>();
  sub->add_option("-m,--model", *model,
                  "Model directory, or org/name[@revision] in the Hugging Face cache");
  return [model]() {
    if (model->empty()) {
      fmt::print(stderr,
                 "megadecode chat: no model given.\n"
                 "Point it at one with --model:\n"
                 "  ./megadecode chat --model /path/to/model-dir\n"
                 "  ./megadecode chat --model Qwen/Qwen3.8-27B[@revision]   (from the Hugging Face "
                 "cache, offline)\n"
                 "A model directory holds config.json, *.safetensors and tokenizer files.\n");
      return kExitUsage;
    }
    fmt::print(stderr, "megadecode chat: not implemented yet (arrives with the Qwen3.8 CPU model).\n");
    return kExitNotImplemented;
  };
}

}  // namespace md::cli
