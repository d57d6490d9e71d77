// Where a model's weights come from: a `--model`/`--draft` value (a directory, or a Hugging Face
// repo "org/name[@revision]" found offline in the local cache) or a family's default repository.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace md {

struct RepoSpec {
  std::string repo_id;   // "org/name"
  std::string revision;  // "main" unless the spec names one
};

// Parses "org/name" or "org/name@revision". The repo id follows the Hub's rules (letters, digits,
// '-', '_', '.'; no "--" or ".."; parts neither start nor end with '-' or '.'; at most 96
// characters). Throws md::Error saying what is malformed.
RepoSpec parse_repo_spec(std::string_view spec);

// A branch, tag, commit or "refs/pr/N": letters, digits, '-', '_', '.', '/', with no empty, "." or
// ".." path component. Throws md::Error naming `origin` (e.g. "$QWEN_CHECKPOINT_REVISION").
void check_revision(std::string_view revision, std::string_view origin);

struct ResolvedModel {
  std::string directory;    // absolute path holding config.json, weights and tokenizer files
  std::string description;  // where it came from, for logs and `megadecode info`
  std::string repo_id;      // empty for a plain directory
  std::string revision;     // the revision asked for; empty for a plain directory
  std::string commit;       // the commit the snapshot belongs to, when known
};

// Resolves an explicit --model/--draft value. An existing directory is used as is ("~/" expanded);
// otherwise the value must be org/name[@revision] (default "main", no environment variable
// involved) and is looked up in the cache given by hf_cache_root(). Throws md::Error: for a
// missing repo the message lists every path tried.
ResolvedModel resolve_model_source(const std::string& spec);

// The families the CLI can run without --model (not md::ModelFamily in models/, which is what a
// config.json describes and includes drafters).
enum class DefaultFamily { kQwen38, kKimi, kMuseSpark };
enum class RepoRole { kTarget, kDraft };

// The repositories a family runs when no --model/--draft is given, and the environment variables
// that pin their revisions.
struct FamilyRepos {
  DefaultFamily family;
  std::string_view name;  // as on the command line: "qwen38", "kimi", "musespark"
  std::string_view target_repo;
  std::string_view draft_repo;
  std::string_view target_revision_env;
  std::string_view draft_revision_env;
};

std::span<const FamilyRepos> family_repo_table();
const FamilyRepos& family_repos(DefaultFamily family);
std::optional<DefaultFamily> default_family_from_name(std::string_view name);

// Resolves a family's default target or draft repo at the revision its environment variable names
// (e.g. $QWEN_CHECKPOINT_REVISION), else "main". The CLI calls resolve_model_source instead when
// the user passes --model/--draft, so explicit values always win.
ResolvedModel resolve_family_default(DefaultFamily family, RepoRole role);

}  // namespace md
