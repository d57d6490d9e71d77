// `megadecode pack --model M --tp N --out DIR`: a checkpoint's tensor-parallel slices written once
// per TP size (models/weight_pack.h), for `--weights DIR` (or $QWEN_PACKED_WEIGHTS) to map.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "base/log.h"
#include "cli/commands.h"
#include "cli/model_session.h"
#include "io/model_source.h"
#include "models/weight_pack.h"

namespace md::cli {
namespace {

struct PackOptions {
  ModelFlags model;  // --model only
  int tp = 2;
  std::string out;
};

// A bar per rank on a terminal, rewritten in place; elsewhere (a log) one line per rank.
class PackProgressBar {
 public:
  explicit PackProgressBar(int ranks) : ranks_(ranks), terminal_(isatty(fileno(stderr)) != 0) {}

  void operator()(int rank, std::uint64_t done, std::uint64_t total) {
    const double mib = 1024.0 * 1024.0;
    if (!terminal_) {
      if (done == total) {
        fmt::print(stderr, "pack: rank {} of {} written ({:.1f} MiB)\n", rank + 1, ranks_,
                   total / mib);
      }
      return;
    }
    constexpr int kWidth = 30;
    const double share = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
    const int filled = static_cast<int>(share * kWidth);
    fmt::print(stderr, "\rpack: rank {} of {} [{:=<{}}{: <{}}] {:3.0f}% {:.1f}/{:.1f} MiB",
               rank + 1, ranks_, "", filled, "", kWidth - filled, share * 100, done / mib,
               total / mib);
    if (done == total) fmt::print(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  int ranks_;
  bool terminal_;
};

int run_pack(const PackOptions& options) {
  const ResolvedModel source = resolve_model_source(model_spec(options.model));
  const auto start = std::chrono::steady_clock::now();
  PackProgressBar bar(options.tp);
  const PackManifest manifest = pack_model(
      source.directory, options.tp, options.out, source.commit,
      [&](int rank, std::uint64_t done, std::uint64_t total) { bar(rank, done, total); });
  std::uint64_t bytes = 0;
  std::size_t slices = 0;
  for (const PackRank& rank : manifest.ranks) {
    bytes += rank.bytes;
    slices += rank.tensors.size();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("packed {} for --tp {} into {}: {} slices, {:.1f} MiB in {:.1f} s\n",
             manifest.source.name, manifest.tp, options.out, slices, bytes / (1024.0 * 1024.0),
             seconds);
  fmt::print("run it with: --tp {} --weights {} (or QWEN_PACKED_WEIGHTS={})\n", manifest.tp,
             options.out, options.out);
  return kExitOk;
}

}  // namespace

CommandAction add_pack_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "pack", "Write a model's tensor-parallel weight slices for --tp N, for --weights to map");
  auto options = std::make_shared<PackOptions>();
  sub->add_option("-m,--model", options->model.model,
                  "Model directory or .gguf file, or org/name[@revision] in the Hugging Face "
                  "cache (default: the default model)");
  sub->add_option("--tp", options->tp, "Tensor-parallel ranks the pack is for")
      ->check(CLI::Range(2, 64));
  sub->add_option("-o,--out", options->out, "Directory to write the pack into (new, or empty)")
      ->required();
  return [options]() { return run_pack(*options); };
}

}  // namespace md::cli
