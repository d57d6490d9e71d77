// Weight packs (ARCHITECTURE.md "Weight packs"): a checkpoint's tensor-parallel slices written
// once per TP size (`megadecode pack --model M --tp N --out DIR`), so that each rank maps its
// slices densely and in place instead of cutting them from the checkpoint at every load (bf16
// column slices are copies then; GGUF block-format ones keep the whole rows' stride). The
// embedding, the norms and whatever else every rank holds whole are still read from the checkpoint,
// which the manifest identifies.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "io/pack_manifest.h"
#include "models/language_model.h"

namespace md {

// progress(rank, bytes written, bytes of the rank's file).
using PackProgress = std::function<void(int, std::uint64_t, std::uint64_t)>;

// Loads the model at `model_path` as each of `tp` ranks in turn (tp >= 2) and writes rank files
// and the manifest into `out`, which must not exist or be empty; `revision` is recorded (the
// Hugging Face commit, or empty). Files are written under temporary names and the manifest last,
// so an interrupted pack is never taken for a whole one. Throws md::Error (the family cannot be
// split so, the directory is not empty, a write fails).
PackManifest pack_model(const std::string& model_path, int tp, const std::string& out,
                        const std::string& revision, const PackProgress& progress);

// The model at `model_path` with `options` (one rank of options.ranks, or the whole model), its
// slices read from the pack at `pack` when that is not empty (pack_reader.h checks it against the
// model and the ranks), else cut at load.
std::unique_ptr<LanguageModel> load_rank_model(const std::string& model_path,
                                               const ModelRunOptions& options,
                                               const std::string& pack);

}  // namespace md
