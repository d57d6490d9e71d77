#include "io/hf_cache.h"

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
const std::string kDev = "0123456789abcdef0123456789abcdef01234567";
const std::string kPr(40, 'c');
const std::string kDangling(40, 'd');

// A cache laid out the way huggingface_hub leaves it after a few downloads.
class FakeHfCache : public ::testing::Test {
 protected:
  void SetUp() override {
    auto repo = dir.path() / "models--org--repo";
    write_text(repo / "refs" / "main", kMain);
    write_text(repo / "refs" / "dev", kDev + "\n");
    write_text(repo / "refs" / "refs" / "pr" / "1", kPr);
    write_text(repo / "refs" / "broken", "not a commit");
    write_text(repo / "refs" / "dangling", kDangling);
    for (const std::string& name : {kMain, kDev, kPr, std::string("v1.0")}) {
      write_text(repo / "snapshots" / name / "config.json", "{}");
    }
    cache = {dir.str(), "test"};
  }

  std::string snapshot(const std::string& name) const {
    return (dir.path() / "models--org--repo" / "snapshots" / name).string();
  }

  TempDir dir;
  HfCacheRoot cache;
};

TEST(HfCache, FolderNamesAndCommitHashes) {
  EXPECT_EQ(hf_repo_folder_name("Qwen/Qwen3.8-27B"), "models--Qwen--Qwen3.8-27B");
  EXPECT_EQ(hf_repo_folder_name("gpt2"), "models--gpt2");
  EXPECT_TRUE(is_hf_commit_hash(kDev));
  EXPECT_FALSE(is_hf_commit_hash(std::string(39, 'a')));
  EXPECT_FALSE(is_hf_commit_hash(std::string(40, 'A')));
  EXPECT_FALSE(is_hf_commit_hash(std::string(40, 'g')));
}

TEST_F(FakeHfCache, ResolvesBranchesThroughRefs) {
  HfSnapshot main = find_hf_snapshot(cache, "org/repo", "main");
  EXPECT_EQ(main.directory, snapshot(kMain));
  EXPECT_EQ(main.commit, kMain);
  EXPECT_EQ(main.how, "refs/main → " + kMain);

  HfSnapshot dev = find_hf_snapshot(cache, "org/repo", "dev");  // trailing newline in the ref
  EXPECT_EQ(dev.directory, snapshot(kDev));
  EXPECT_EQ(find_hf_snapshot(cache, "org/repo", "refs/pr/1").directory, snapshot(kPr));
}

TEST_F(FakeHfCache, ResolvesRawCommitsAndUnreferencedSnapshots) {
  HfSnapshot commit = find_hf_snapshot(cache, "org/repo", kDev);
  EXPECT_EQ(commit.directory, snapshot(kDev));
  EXPECT_EQ(commit.commit, kDev);
  HfSnapshot tag = find_hf_snapshot(cache, "org/repo", "v1.0");
  EXPECT_EQ(tag.directory, snapshot("v1.0"));
  EXPECT_EQ(tag.commit, "");
}

TEST_F(FakeHfCache, ListsEveryPathTriedWhenNothingIsFound) {
  std::string repo = (dir.path() / "models--org--repo").string();
  EXPECT_THAT(error_of([&] { find_hf_snapshot(cache, "org/repo", "nope"); }),
              AllOf(HasSubstr("org/repo@nope is not in the Hugging Face cache " + dir.str()),
                    HasSubstr(repo + "/refs/nope (no such file)"),
                    HasSubstr(repo + "/snapshots/nope (no such directory)"),
                    HasSubstr("hf download org/repo --revision nope")));
  EXPECT_THAT(error_of([&] { find_hf_snapshot(cache, "org/repo", kDangling); }),
              HasSubstr(repo + "/snapshots/" + kDangling + " (no such directory)"));
  EXPECT_THAT(error_of([&] { find_hf_snapshot(cache, "org/repo", "dangling"); }),
              AllOf(HasSubstr(repo + "/refs/dangling (holds commit " + kDangling + ")"),
                    HasSubstr(repo + "/snapshots/" + kDangling + " (no such directory)"),
                    HasSubstr(repo + "/snapshots/dangling (no such directory)")));
  EXPECT_THAT(error_of([&] { find_hf_snapshot(cache, "other/repo", "main"); }),
              HasSubstr(dir.str("models--other--repo/refs/main (no such file)")));
  EXPECT_THAT(error_of([&] { find_hf_snapshot(cache, "org/repo", "broken"); }),
              HasSubstr("refs/broken holds \"not a commit\", which is not a 40-hex-digit commit"));
}

class HfCacheRootTest : public ::testing::Test {
 protected:
  // Every variable that matters, unset for the test and restored afterwards.
  ScopedEnv hub{"HF_HUB_CACHE", std::nullopt};
  ScopedEnv legacy{"HUGGINGFACE_HUB_CACHE", std::nullopt};
  ScopedEnv hf_home{"HF_HOME", std::nullopt};
  ScopedEnv xdg{"XDG_CACHE_HOME", std::nullopt};
  ScopedEnv home{"HOME", "/home/u"};
};

TEST_F(HfCacheRootTest, FollowsHuggingFaceHubPrecedence) {
  EXPECT_EQ(hf_cache_root().path, "/home/u/.cache/huggingface/hub");
  EXPECT_EQ(hf_cache_root().source, "$HOME/.cache/huggingface/hub");
  {
    ScopedEnv set("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(hf_cache_root().path, "/xdg/huggingface/hub");
    ScopedEnv hf("HF_HOME", "/hf");
    EXPECT_EQ(hf_cache_root().path, "/hf/hub");
    EXPECT_EQ(hf_cache_root().source, "$HF_HOME/hub");
    ScopedEnv old("HUGGINGFACE_HUB_CACHE", "/legacy");
    EXPECT_EQ(hf_cache_root().path, "/legacy");
    ScopedEnv hub_cache("HF_HUB_CACHE", "/hub");
    EXPECT_EQ(hf_cache_root().path, "/hub");
    EXPECT_EQ(hf_cache_root().source, "$HF_HUB_CACHE");
  }
  {
    ScopedEnv hf("HF_HOME", "~/hf");
    EXPECT_EQ(hf_cache_root().path, "/home/u/hf/hub");
    ScopedEnv empty("HF_HUB_CACHE", "");  // empty counts as unset
    EXPECT_EQ(hf_cache_root().path, "/home/u/hf/hub");
  }
  ScopedEnv no_home("HOME", std::nullopt);
  EXPECT_THAT(error_of([] { hf_cache_root(); }), HasSubstr("cannot locate the Hugging Face cache"));
}

}  // namespace
}  // namespace md
