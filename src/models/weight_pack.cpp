#include "models/weight_pack.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "base/error.h"
#include "dist/communicator.h"
#include "io/checkpoint_fingerprint.h"
#include "models/common/pack_reader.h"
#include "models/common/pack_writer.h"
#include "models/model_loader.h"

namespace md {

namespace {

namespace fs = std::filesystem;

// A rank that exists only to be loaded and packed: its model is never run.
class PackedRank final : public dist::Communicator {
 public:
  PackedRank(int rank, int ranks) : rank_(rank), ranks_(ranks) {}
  int rank() const override { return rank_; }
  int size() const override { return ranks_; }
  std::string transport() const override { return "pack"; }
  void all_gather(const void*, std::size_t, void*) override { refuse(); }
  void broadcast(void*, std::size_t, int) override { refuse(); }
  void barrier() override { refuse(); }
  void abort(const std::string&) override {}

 private:
  [[noreturn]] static void refuse() { throw Error("a rank being packed runs no collectives"); }
  int rank_, ranks_;
};

// Creates `out` or checks that it is an empty directory; true when it was created here.
bool prepare_output(const fs::path& out) {
  std::error_code error;
  if (fs::exists(out, error)) {
    if (!fs::is_directory(out, error))
      fail("--out {}: exists and is not a directory", out.string());
    if (!fs::is_empty(out, error)) {
      fail("--out {}: is not empty (a pack is written into a new or empty directory)",
           out.string());
    }
    return false;
  }
  fs::create_directories(out, error);
  if (error) fail("--out {}: cannot create ({})", out.string(), error.message());
  return true;
}

// After a failed pack: what it wrote into `out` (empty before), and `out` itself if it made it.
void remove_output(const fs::path& out, bool created) noexcept {
  std::error_code error;
  if (created) {
    fs::remove_all(out, error);
    return;
  }
  std::vector<fs::path> written;
  for (fs::directory_iterator it(out, error); !error && it != fs::directory_iterator();
       it.increment(error)) {
    written.push_back(it->path());
  }
  for (const fs::path& p : written) fs::remove_all(p, error);
}

void rename_into_place(const fs::path& from, const fs::path& to) {
  std::error_code error;
  fs::rename(from, to, error);
  if (error) fail("{}: cannot rename to {} ({})", from.string(), to.string(), error.message());
}

PackManifest write_pack(const std::string& model_path, int tp, const fs::path& directory,
                        const std::string& revision, const PackProgress& progress) {
  const CheckpointFingerprint source = fingerprint_checkpoint(model_path);
  PackManifest manifest;
  manifest.tp = tp;
  manifest.source = {source.name, revision, source.bytes, source.fingerprint};
  for (int r = 0; r < tp; ++r) {
    PackedRank rank(r, tp);
    PackWriter writer;
    ModelRunOptions options;
    options.threads = 1;
    options.ranks = &rank;
    options.slices = &writer;
    // The model keeps the slices' bytes (views into its mapping, or its copies) until written.
    std::unique_ptr<LanguageModel> model = load_language_model(model_path, options);
    const std::string name = fmt::format("rank-{}-of-{}.bin", r, tp);
    PackRank written =
        writer.write(directory / (name + ".partial"),
                     [&](std::uint64_t done, std::uint64_t total) { progress(r, done, total); });
    rename_into_place(directory / (name + ".partial"), directory / name);
    written.file = name;
    manifest.ranks.push_back(std::move(written));
  }
  const fs::path partial = directory / (std::string(kPackManifestName) + ".partial");
  const std::string text = pack_manifest_json(manifest);
  // What a load will read must parse: the writer and the parser's bounds agree.
  parse_pack_manifest(text, partial.string());
  {
    std::ofstream file(partial, std::ios::binary | std::ios::trunc);
    file << text;
    file.close();
    if (!file) fail("{}: cannot write", partial.string());
  }
  rename_into_place(partial, directory / kPackManifestName);
  return manifest;
}

}  // namespace

PackManifest pack_model(const std::string& model_path, int tp, const std::string& out,
                        const std::string& revision, const PackProgress& progress) {
  if (tp < 2 || tp > 4096) {
    fail(
        "--tp {}: a pack holds the slices of 2 or more ranks (one rank reads the checkpoint in "
        "place)",
        tp);
  }
  const fs::path directory(out);
  const bool created = prepare_output(directory);
  try {
    return write_pack(model_path, tp, directory, revision, progress);
  } catch (...) {
    remove_output(directory, created);
    throw;
  }
}

std::unique_ptr<LanguageModel> load_rank_model(const std::string& model_path,
                                               const ModelRunOptions& options,
                                               const std::string& pack) {
  if (pack.empty()) return load_language_model(model_path, options);
  const int rank = options.ranks != nullptr ? options.ranks->rank() : 0;
  const int ranks = options.ranks != nullptr ? options.ranks->size() : 1;
  PackReader reader(pack, model_path, rank, ranks);
  ModelRunOptions with_pack = options;
  with_pack.slices = &reader;
  std::unique_ptr<LanguageModel> model = load_language_model(model_path, with_pack);
  reader.check_all_taken(fs::path(model_path).filename().string());
  return model;
}

}  // namespace md
