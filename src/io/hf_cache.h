// Offline lookup of repositories that huggingface_hub downloaded into its local cache
// (<cache>/models--org--name/{refs,snapshots}); megadecode never downloads anything itself.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace md {

struct HfCacheRoot {
  std::string path;
  std::string source;  // how it was chosen, e.g. "$HF_HOME/hub"
};

// The hub cache directory, chosen as huggingface_hub does: $HF_HUB_CACHE, else the legacy
// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// $HOME/.cache/huggingface/hub. A leading "~" is expanded with $HOME; empty variables count as
// unset. Throws md::Error if none of the variables (not even HOME) is set.
HfCacheRoot hf_cache_root();

// "org/name" → "models--org--name".
std::string hf_repo_folder_name(std::string_view repo_id);

// True for a full, lowercase 40-hex-digit commit hash, the only form the cache stores.
bool is_hf_commit_hash(std::string_view revision);

struct HfSnapshot {
  std::string directory;  // <cache>/models--org--name/snapshots/<commit or revision>
  std::string commit;     // the commit hash when known (from a ref or the revision itself)
  std::string how;        // e.g. "refs/main → 0123…", for descriptions
};

// Finds the snapshot of `repo_id` at `revision` (branch, tag or commit) in `cache`:
// a commit hash goes straight to snapshots/<commit>; otherwise refs/<revision> must hold a commit
// whose snapshot exists, and failing that snapshots/<revision> is used if it exists.
// Throws md::Error listing every path tried and why each failed.
HfSnapshot find_hf_snapshot(const HfCacheRoot& cache, std::string_view repo_id,
                            std::string_view revision);

}  // namespace md
