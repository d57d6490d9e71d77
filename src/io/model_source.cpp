#include "io/model_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "base/file_util.h"
#include "io/hf_cache.h"
#include "io/strict_json.h"

namespace md {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxRepoIdLength = 96;
constexpr std::size_t kMaxRevisionLength = 256;

constexpr std::array<FamilyRepos, 3> kFamilies{{
    {DefaultFamily::kQwen38, "qwen38", "Qwen/Qwen3.8-27B", "z-lab/Qwen3.8-27B-DFlash2",
     "QWEN_CHECKPOINT_REVISION", "QWEN_DRAFT_REVISION"},
    {DefaultFamily::kKimi, "kimi", "moonshotai/Kimi-K3", "RedHatAI/Kimi-K3-speculator.dspark",
     "KIMI_CHECKPOINT_REVISION", "KIMI_DRAFT_REVISION"},
    {DefaultFamily::kMuseSpark, "musespark", "meta-models/Muse-Spark-Open-816B-A42B-NVFP4",
     "Inferact/Muse-Spark-Open-DSpark", "MUSE_CHECKPOINT_REVISION", "MUSE_DRAFT_REVISION"},
}};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// What is wrong with one part of "org/name", or an empty string.
std::string repo_part_problem(std::string_view part) {
  if (part.empty()) return "an empty organisation or name";
  for (char c : part) {
    if (!is_name_char(c)) return "a character other than letters, digits, '-', '_' and '.'";
  }
  if (part.find("--") != part.npos || part.find("..") != part.npos) return "\"--\" or \"..\"";
  for (char edge : {part.front(), part.back()}) {
    if (edge == '-' || edge == '.') return "a part that starts or ends with '-' or '.'";
  }
  return {};
}

std::string expand_home(const std::string& path) {
  if (path != "~" && !path.starts_with("~/")) return path;
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') fail("cannot expand {}: $HOME is not set", path);
  return std::string(home) + path.substr(1);
}

bool looks_like_path(std::string_view spec) {
  return spec.starts_with('/') || spec.starts_with('.') || spec.starts_with('~');
}

ResolvedModel resolve_repo(const RepoSpec& repo) {
  HfCacheRoot cache = hf_cache_root();
  HfSnapshot snapshot = find_hf_snapshot(cache, repo.repo_id, repo.revision);
  ResolvedModel resolved;
  resolved.directory = snapshot.directory;
  resolved.repo_id = repo.repo_id;
  resolved.revision = repo.revision;
  resolved.commit = snapshot.commit;
  resolved.description = fmt::format("{}@{} ({}) in the Hugging Face cache {} ({})", repo.repo_id,
                                     repo.revision, snapshot.how, cache.path, cache.source);
  return resolved;
}

}  // namespace

void check_revision(std::string_view revision, std::string_view origin) {
  if (revision.empty()) fail("{}: the revision is empty", origin);
  if (revision.size() > kMaxRevisionLength) {
    fail("{}: the revision is longer than {} characters", origin, kMaxRevisionLength);
  }
  for (char c : revision) {
    if (!is_name_char(c) && c != '/') {
      fail("{}: revision {} may only contain letters, digits, '-', '_', '.' and '/'", origin,
           quote_for_message(revision));
    }
  }
  std::size_t start = 0;
  while (start <= revision.size()) {
    std::size_t slash = std::min(revision.find('/', start), revision.size());
    std::string_view part = revision.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") {
      fail("{}: revision {} has an empty, \".\" or \"..\" path component", origin,
           quote_for_message(revision));
    }
    start = slash + 1;
  }
}

RepoSpec parse_repo_spec(std::string_view spec) {
  std::size_t at = spec.find('@');
  std::string_view repo_id = spec.substr(0, at);
  RepoSpec parsed{std::string(repo_id), "main"};
  std::string origin = "model " + quote_for_message(spec);
  if (at != std::string_view::npos) {
    parsed.revision = std::string(spec.substr(at + 1));
    if (parsed.revision.empty()) fail("{}: nothing follows '@' (expected a revision)", origin);
    check_revision(parsed.revision, origin);
  }
  std::size_t slash = repo_id.find('/');
  if (slash == std::string_view::npos || repo_id.find('/', slash + 1) != std::string_view::npos) {
    fail("{}: expected a Hugging Face repo id of the form org/name[@revision]", origin);
  }
  if (repo_id.size() > kMaxRepoIdLength) {
    fail("{}: the repo id is longer than {} characters", origin, kMaxRepoIdLength);
  }
  for (std::string_view part : {repo_id.substr(0, slash), repo_id.substr(slash + 1)}) {
    if (std::string why = repo_part_problem(part); !why.empty()) {
      fail("{}: the repo id has {}", origin, why);
    }
  }
  return parsed;
}

ResolvedModel resolve_model_source(const std::string& spec) {
  if (spec.empty()) fail("empty model: expected a directory or org/name[@revision]");
  std::string path = expand_home(spec);
  if (directory_exists(path)) {
    ResolvedModel resolved;
    resolved.directory = fs::absolute(path).lexically_normal().string();
    if (resolved.directory.size() > 1 && resolved.directory.ends_with('/')) {
      resolved.directory.pop_back();
    }
    resolved.description = "directory " + resolved.directory;
    return resolved;
  }
  if (file_exists(path)) {
    if (path.ends_with(".gguf")) {
      // A GGUF file carries its configuration, tokenizer and chat template itself.
      ResolvedModel resolved;
      resolved.directory = fs::absolute(path).lexically_normal().string();
      resolved.description = "GGUF file " + resolved.directory;
      return resolved;
    }
    fail(
        "{} is a file; expected a model directory (config.json, weights, tokenizer), a .gguf "
        "file or org/name[@revision]",
        path);
  }
  // A missing "model.gguf" is a missing file (also without a leading ./), not a directory.
  if (fs::path(path).extension() == ".gguf") fail("no such GGUF file: {}", path);
  if (looks_like_path(spec)) fail("no such model directory: {}", path);
  return resolve_repo(parse_repo_spec(spec));
}

std::span<const FamilyRepos> family_repo_table() {
  return kFamilies;
}

const FamilyRepos& family_repos(DefaultFamily family) {
  for (const FamilyRepos& entry : kFamilies) {
    if (entry.family == family) return entry;
  }
  fail("unknown model family {}", static_cast<int>(family));
}

std::optional<DefaultFamily> default_family_from_name(std::string_view name) {
  for (const FamilyRepos& entry : kFamilies) {
    if (entry.name == name) return entry.family;
  }
  return std::nullopt;
}

ResolvedModel resolve_family_default(DefaultFamily family, RepoRole role) {
  const FamilyRepos& repos = family_repos(family);
  bool target = role == RepoRole::kTarget;
  std::string env_name(target ? repos.target_revision_env : repos.draft_revision_env);
  std::string_view what = target ? "target" : "draft";

  RepoSpec repo{std::string(target ? repos.target_repo : repos.draft_repo), "main"};
  std::string pinned;
  if (const char* value = std::getenv(env_name.c_str()); value != nullptr && *value != '\0') {
    check_revision(value, "$" + env_name);
    repo.revision = value;
    pinned = "revision from $" + env_name;
  } else {
    pinned = "$" + env_name + " not set";
  }
  try {
    ResolvedModel resolved = resolve_repo(repo);
    resolved.description =
        fmt::format("default {} {}: {}; {}", repos.name, what, resolved.description, pinned);
    return resolved;
  } catch (const Error& error) {
    fail("{}\n(this is the default {} {}; {}; pass --{} to use another model)", error.what(),
         repos.name, what, pinned, target ? "model" : "draft");
  }
}

}  // namespace md
