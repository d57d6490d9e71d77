// Cross-check with huggingface_hub itself (fixture written by tests/io/hf_cache_reference.py): the
// cache root it derives from each environment, and what try_to_load_from_cache finds for each
// repo and revision in a fake cache, must match hf_cache_root() and find_hf_snapshot().
#include <gtest/gtest.h>

#include <filesystem>

#include "base/file_util.h"
#include "io/hf_cache.h"
#include "io_test_util.h"

namespace md {
namespace {

using nlohmann::json;

const std::string kExpected = std::string(MD_GOLDEN_DIR) + "/io/hf_cache/expected.json";

json load_expected() {
  if (!file_exists(kExpected)) return nullptr;
  return json::parse(read_text_file(kExpected));
}

#define REQUIRE_EXPECTED(value)                                                      \
  if ((value).is_null())                                                             \
  GTEST_SKIP() << kExpected << " is missing: run through ctest (fixture "            \
               << "hf_cache_reference) or run tests/io/hf_cache_reference.py --out " \
               << MD_GOLDEN_DIR

TEST(HfCacheReference, CacheRootMatchesHuggingFaceHub) {
  json expected = load_expected();
  REQUIRE_EXPECTED(expected);
  const char* variables[] = {"HOME", "XDG_CACHE_HOME", "HF_HOME", "HUGGINGFACE_HUB_CACHE",
                             "HF_HUB_CACHE"};
  for (const json& c : expected["roots"]) {
    std::vector<std::unique_ptr<testing::ScopedEnv>> env;
    for (const char* name : variables) {
      std::optional<std::string> value;
      if (c["env"].contains(name)) value = c["env"][name].get<std::string>();
      env.push_back(std::make_unique<testing::ScopedEnv>(name, value));
    }
    EXPECT_EQ(hf_cache_root().path, c["root"].get<std::string>()) << c["env"].dump();
  }
}

TEST(HfCacheReference, SnapshotsMatchTryToLoadFromCache) {
  json expected = load_expected();
  REQUIRE_EXPECTED(expected);
  HfCacheRoot cache{expected["hub"].get<std::string>(), "fixture"};
  for (const json& lookup : expected["lookups"]) {
    std::string repo = lookup["repo"];
    std::string revision = lookup["revision"];
    SCOPED_TRACE(repo + "@" + revision);
    if (lookup["config"].is_null()) {
      EXPECT_THROW(find_hf_snapshot(cache, repo, revision), Error);
    } else {
      HfSnapshot snapshot = find_hf_snapshot(cache, repo, revision);
      EXPECT_EQ((std::filesystem::path(snapshot.directory) / "config.json").string(),
                lookup["config"].get<std::string>());
    }
  }
}

}  // namespace
}  // namespace md
