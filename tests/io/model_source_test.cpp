#include "io/model_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"

namespace md {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;
using testing::ScopedEnv;
using testing::TempDir;
using testing::write_text;

const std::string kMain(40, 'a');
const std::string kPinned(40, 'b');

TEST(RepoSpec, ParsesRepoAndRevision) {
  RepoSpec plain = parse_repo_spec("Qwen/Qwen3.8-27B");
  EXPECT_EQ(plain.repo_id, "Qwen/Qwen3.8-27B");
  EXPECT_EQ(plain.revision, "main");
  RepoSpec pinned = parse_repo_spec("RedHatAI/Kimi-K3-speculator.dspark@refs/pr/3");
  EXPECT_EQ(pinned.repo_id, "RedHatAI/Kimi-K3-speculator.dspark");
  EXPECT_EQ(pinned.revision, "refs/pr/3");
  EXPECT_EQ(parse_repo_spec("a_b/c@" + kMain).revision, kMain);
}

TEST(RepoSpec, RejectsMalformedSpecsClearly) {
  struct Case {
    std::string spec;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"gpt2", "expected a Hugging Face repo id of the form org/name[@revision]"},
           {"a/b/c", "of the form org/name"},
           {"/b", "an empty organisation or name"},
           {"a/", "an empty organisation or name"},
           {"org/na me", "a character other than letters, digits"},
           {"org/na$me", "a character other than letters"},
           {"org/a--b", "\"--\" or \"..\""},
           {"org/a..b", "\"--\" or \"..\""},
           {"org/-ab", "starts or ends with '-' or '.'"},
           {"org/ab.", "starts or ends with '-' or '.'"},
           {"org/" + std::string(100, 'x'), "longer than 96"},
           {"org/name@", "nothing follows '@'"},
           {"org/name@../x", "\"..\" path component"},
           {"org/name@a//b", "empty, \".\" or \"..\" path component"},
           {"org/name@/abs", "path component"},
           {"org/name@dev branch", "may only contain letters"},
           {"org/name@a@b", "may only contain letters"},
       }) {
    EXPECT_THAT(error_of([&] { parse_repo_spec(c.spec); }),
                AllOf(HasSubstr("model \""), HasSubstr(c.message)))
        << c.spec;
  }
}

// A fake Hugging Face cache with two repos, selected through HF_HUB_CACHE.
class ModelSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto target = dir.path() / "hub" / "models--Qwen--Qwen3.8-27B";
    write_text(target / "refs" / "main", kMain);
    write_text(target / "refs" / "v2", kPinned);
    write_text(target / "snapshots" / kMain / "config.json", "{}");
    write_text(target / "snapshots" / kPinned / "config.json", "{}");
    auto draft = dir.path() / "hub" / "models--z-lab--Qwen3.8-27B-DFlash2";
    write_text(draft / "refs" / "main", kMain);
    write_text(draft / "snapshots" / kMain / "config.json", "{}");
    write_text(dir.path() / "local" / "config.json", "{}");
  }

  std::string snapshot(const std::string& repo, const std::string& commit) const {
    return dir.str("hub/" + repo + "/snapshots/" + commit);
  }

  TempDir dir;
  ScopedEnv hub{"HF_HUB_CACHE", dir.str("hub")};
  ScopedEnv qwen_revision{"QWEN_CHECKPOINT_REVISION", std::nullopt};
  ScopedEnv draft_revision{"QWEN_DRAFT_REVISION", std::nullopt};
  ScopedEnv kimi_revision{"KIMI_CHECKPOINT_REVISION", std::nullopt};
};

TEST_F(ModelSourceTest, ExistingDirectoriesAreUsedAsIs) {
  ResolvedModel local = resolve_model_source(dir.str("local") + "/");
  EXPECT_EQ(local.directory, dir.str("local"));
  EXPECT_EQ(local.description, "directory " + dir.str("local"));
  EXPECT_TRUE(local.repo_id.empty());
  EXPECT_THAT(error_of([&] { resolve_model_source(dir.str("nope")); }),
              HasSubstr("no such model directory: " + dir.str("nope")));
  EXPECT_THAT(error_of([&] { resolve_model_source(dir.str("nope.gguf")); }),
              HasSubstr("no such GGUF file: " + dir.str("nope.gguf")));
  EXPECT_THAT(error_of([] { resolve_model_source("nope.gguf"); }),
              HasSubstr("no such GGUF file: nope.gguf"));
  EXPECT_THAT(error_of([&] { resolve_model_source(dir.str("local/config.json")); }),
              HasSubstr("is a file; expected a model directory"));
  EXPECT_THAT(error_of([] { resolve_model_source(""); }), HasSubstr("empty model"));
  ScopedEnv home("HOME", dir.str());
  EXPECT_EQ(resolve_model_source("~/local").directory, dir.str("local"));
}

TEST_F(ModelSourceTest, RepoSpecsResolveInTheCache) {
  ResolvedModel main = resolve_model_source("Qwen/Qwen3.8-27B");
  EXPECT_EQ(main.directory, snapshot("models--Qwen--Qwen3.8-27B", kMain));
  EXPECT_EQ(main.repo_id, "Qwen/Qwen3.8-27B");
  EXPECT_EQ(main.revision, "main");
  EXPECT_EQ(main.commit, kMain);
  EXPECT_THAT(main.description, AllOf(HasSubstr("Qwen/Qwen3.8-27B@main (refs/main → " + kMain),
                                      HasSubstr(dir.str("hub") + " ($HF_HUB_CACHE)")));
  EXPECT_EQ(resolve_model_source("Qwen/Qwen3.8-27B@v2").directory,
            snapshot("models--Qwen--Qwen3.8-27B", kPinned));
  EXPECT_EQ(resolve_model_source("Qwen/Qwen3.8-27B@" + kPinned).commit, kPinned);
}

TEST_F(ModelSourceTest, ExplicitSpecsIgnoreRevisionVariables) {
  ScopedEnv pin("QWEN_CHECKPOINT_REVISION", "v2");
  EXPECT_EQ(resolve_model_source("Qwen/Qwen3.8-27B").commit, kMain);
}

TEST_F(ModelSourceTest, MissingReposListThePathsTried) {
  std::string repo = dir.str("hub/models--Qwen--Qwen3.8-27B");
  EXPECT_THAT(error_of([] { resolve_model_source("Qwen/Qwen3.8-27B@nope"); }),
              AllOf(HasSubstr(repo + "/refs/nope (no such file)"),
                    HasSubstr(repo + "/snapshots/nope (no such directory)"),
                    HasSubstr("chosen by $HF_HUB_CACHE")));
}

TEST_F(ModelSourceTest, HfHubCacheWinsOverHfHome) {
  ScopedEnv home("HF_HOME", dir.str("elsewhere"));
  EXPECT_EQ(resolve_model_source("Qwen/Qwen3.8-27B").directory,
            snapshot("models--Qwen--Qwen3.8-27B", kMain));
  ScopedEnv no_hub("HF_HUB_CACHE", std::nullopt);
  EXPECT_THAT(error_of([] { resolve_model_source("Qwen/Qwen3.8-27B"); }),
              HasSubstr(dir.str("elsewhere/hub/models--Qwen--Qwen3.8-27B/refs/main")));
  ScopedEnv home_parent("HF_HOME", dir.str());  // $HF_HOME/hub is the fake cache
  EXPECT_EQ(resolve_model_source("Qwen/Qwen3.8-27B").commit, kMain);
}

TEST_F(ModelSourceTest, FamilyDefaultsFollowTheirRevisionVariables) {
  ResolvedModel target = resolve_family_default(DefaultFamily::kQwen38, RepoRole::kTarget);
  EXPECT_EQ(target.directory, snapshot("models--Qwen--Qwen3.8-27B", kMain));
  EXPECT_THAT(target.description, AllOf(HasSubstr("default qwen38 target: Qwen/Qwen3.8-27B@main"),
                                        HasSubstr("$QWEN_CHECKPOINT_REVISION not set")));
  {
    ScopedEnv pin("QWEN_CHECKPOINT_REVISION", "v2");
    ResolvedModel pinned = resolve_family_default(DefaultFamily::kQwen38, RepoRole::kTarget);
    EXPECT_EQ(pinned.commit, kPinned);
    EXPECT_EQ(pinned.revision, "v2");
    EXPECT_THAT(pinned.description, HasSubstr("revision from $QWEN_CHECKPOINT_REVISION"));
  }
  {
    ScopedEnv pin("QWEN_CHECKPOINT_REVISION", kPinned);
    EXPECT_EQ(resolve_family_default(DefaultFamily::kQwen38, RepoRole::kTarget).directory,
              snapshot("models--Qwen--Qwen3.8-27B", kPinned));
  }
  {
    ScopedEnv pin("QWEN_CHECKPOINT_REVISION", "../x");
    EXPECT_THAT(error_of([] { resolve_family_default(DefaultFamily::kQwen38, RepoRole::kTarget); }),
                HasSubstr("$QWEN_CHECKPOINT_REVISION: revision \"../x\""));
  }
  ResolvedModel draft = resolve_family_default(DefaultFamily::kQwen38, RepoRole::kDraft);
  EXPECT_EQ(draft.directory, snapshot("models--z-lab--Qwen3.8-27B-DFlash2", kMain));
  {
    ScopedEnv pin("QWEN_DRAFT_REVISION", "missing");
    EXPECT_THAT(error_of([] { resolve_family_default(DefaultFamily::kQwen38, RepoRole::kDraft); }),
                AllOf(HasSubstr("z-lab/Qwen3.8-27B-DFlash2@missing is not in the Hugging Face"),
                      HasSubstr("default qwen38 draft; revision from $QWEN_DRAFT_REVISION"),
                      HasSubstr("pass --draft")));
  }
  EXPECT_THAT(error_of([] { resolve_family_default(DefaultFamily::kKimi, RepoRole::kTarget); }),
              AllOf(HasSubstr("moonshotai/Kimi-K3@main"), HasSubstr("pass --model")));
}

TEST(FamilyRepos, TableMatchesTheSpecs) {
  ASSERT_EQ(family_repo_table().size(), 3u);
  const FamilyRepos& kimi = family_repos(DefaultFamily::kKimi);
  EXPECT_EQ(kimi.target_repo, "moonshotai/Kimi-K3");
  EXPECT_EQ(kimi.draft_repo, "RedHatAI/Kimi-K3-speculator.dspark");
  EXPECT_EQ(kimi.target_revision_env, "KIMI_CHECKPOINT_REVISION");
  EXPECT_EQ(kimi.draft_revision_env, "KIMI_DRAFT_REVISION");
  const FamilyRepos& muse = family_repos(DefaultFamily::kMuseSpark);
  EXPECT_EQ(muse.target_repo, "meta-models/Muse-Spark-Open-816B-A42B-NVFP4");
  EXPECT_EQ(muse.draft_repo, "Inferact/Muse-Spark-Open-DSpark");
  EXPECT_EQ(muse.target_revision_env, "MUSE_CHECKPOINT_REVISION");
  EXPECT_EQ(muse.draft_revision_env, "MUSE_DRAFT_REVISION");
  EXPECT_EQ(family_repos(DefaultFamily::kQwen38).draft_repo, "z-lab/Qwen3.8-27B-DFlash2");
  EXPECT_EQ(default_family_from_name("musespark"), DefaultFamily::kMuseSpark);
  EXPECT_EQ(default_family_from_name("llama"), std::nullopt);
  for (const FamilyRepos& entry : family_repo_table()) {
    EXPECT_NO_THROW(parse_repo_spec(entry.target_repo));
    EXPECT_NO_THROW(parse_repo_spec(entry.draft_repo));
  }
}

}  // namespace
}  // namespace md
