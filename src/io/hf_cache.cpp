#include "io/hf_cache.h"

#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "base/file_util.h"

namespace md {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

std::string expand_home(const std::string& path) {
  if (path == "~" || path.starts_with("~/")) {
    std::string home = env("HOME");
    if (home.empty()) fail("cannot expand {}: $HOME is not set", path);
    return home + path.substr(1);
  }
  return path;
}

std::string trim(const std::string& text) {
  const char* space = " \t\r\n";
  std::size_t first = text.find_first_not_of(space);
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(space) + 1 - first);
}

// Builds the "not found" message: every path tried, with why it did not work.
struct Attempts {
  std::vector<std::string> lines;
  void add(const std::string& path, std::string_view why) {
    lines.push_back("  " + path + " (" + std::string(why) + ")");
  }
  std::string text() const {
    std::string joined;
    for (const std::string& line : lines) joined += "\n" + line;
    return joined;
  }
};

}  // namespace

HfCacheRoot hf_cache_root() {
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"}) {
    if (std::string value = env(name); !value.empty()) {
      return {expand_home(value), std::string("$") + name};
    }
  }
  if (std::string home = env("HF_HOME"); !home.empty()) {
    return {(fs::path(expand_home(home)) / "hub").string(), "$HF_HOME/hub"};
  }
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) {
    return {(fs::path(expand_home(xdg)) / "huggingface" / "hub").string(),
            "$XDG_CACHE_HOME/huggingface/hub"};
  }
  if (std::string home = env("HOME"); !home.empty()) {
    return {(fs::path(home) / ".cache" / "huggingface" / "hub").string(),
            "$HOME/.cache/huggingface/hub"};
  }
  fail(
      "cannot locate the Hugging Face cache: none of HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, "
      "HF_HOME, XDG_CACHE_HOME or HOME is set");
}

std::string hf_repo_folder_name(std::string_view repo_id) {
  std::string folder = "models";
  std::size_t start = 0;
  while (true) {
    std::size_t slash = repo_id.find('/', start);
    folder += "--";
    folder += repo_id.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (slash == std::string_view::npos) return folder;
    start = slash + 1;
  }
}

bool is_hf_commit_hash(std::string_view revision) {
  if (revision.size() != 40) return false;
  for (char c : revision) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

HfSnapshot find_hf_snapshot(const HfCacheRoot& cache, std::string_view repo_id,
                            std::string_view revision) {
  fs::path repo = fs::path(cache.path) / hf_repo_folder_name(repo_id);
  fs::path snapshots = repo / "snapshots";
  Attempts attempts;

  if (is_hf_commit_hash(revision)) {
    std::string directory = (snapshots / revision).string();
    if (directory_exists(directory)) return {directory, std::string(revision), "commit"};
    attempts.add(directory, "no such directory");
  } else {
    std::string ref = (repo / "refs" / revision).string();
    if (file_exists(ref)) {
      std::string commit = trim(read_text_file(ref));
      if (!is_hf_commit_hash(commit)) {
        fail("{}@{}: {} holds \"{}\", which is not a 40-hex-digit commit hash", repo_id, revision,
             ref, commit.substr(0, 80));
      }
      std::string directory = (snapshots / commit).string();
      if (directory_exists(directory)) {
        return {directory, commit, "refs/" + std::string(revision) + " → " + commit};
      }
      attempts.add(ref, "holds commit " + commit);
      attempts.add(directory, "no such directory");
    } else {
      attempts.add(ref, "no such file");
    }
    std::string by_name = (snapshots / revision).string();
    if (directory_exists(by_name)) {
      return {by_name, "", "snapshots/" + std::string(revision)};
    }
    attempts.add(by_name, "no such directory");
  }
  fail(
      "{}@{} is not in the Hugging Face cache {} (chosen by {}; megadecode looks offline only). "
      "Tried:{}\nDownload it first (e.g. `hf download {} --revision {}`) or pass a model "
      "directory.",
      repo_id, revision, cache.path, cache.source, attempts.text(), repo_id, revision);
}

}  // namespace md
