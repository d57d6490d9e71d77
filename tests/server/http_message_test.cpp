#include "server/http_message.h"

#include <gtest/gtest.h>

#include <random>

namespace md::server {
namespace {

TEST(HttpHeaders, NamesCompareWithoutCase) {
  HttpHeaders h;
  h.add("Content-Length", "5");
  h.add("content-length", "5");
  h.add("X-Other", "a");
  EXPECT_EQ(h.count("CONTENT-LENGTH"), 2u);
  EXPECT_EQ(h.value("content-Length", 1), "5");
  EXPECT_EQ(h.value("content-length", 2), "");
  EXPECT_TRUE(h.has("x-other"));
  EXPECT_FALSE(h.has("x-othe"));
}

TEST(HttpHeaders, SetReplacesEveryFieldOfThatName) {
  HttpHeaders h;
  h.add("Vary", "a");
  h.add("vary", "b");
  h.add("Other", "c");
  h.set("VARY", "Origin");
  EXPECT_EQ(h.count("vary"), 1u);
  EXPECT_EQ(h.value("Vary"), "Origin");
  EXPECT_EQ(h.value("Other"), "c");
}

TEST(SplitTarget, DecodesThePathAndTheQuery) {
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  split_target("/v1/models/a%2Fb%20c?fail_on_no_slot=1&x=a+b%26c&flag&=v&&", path, query);
  EXPECT_EQ(path, "/v1/models/a/b c");
  ASSERT_EQ(query.size(), 4u);
  EXPECT_EQ(query[0], std::make_pair(std::string("fail_on_no_slot"), std::string("1")));
  EXPECT_EQ(query[1], std::make_pair(std::string("x"), std::string("a b&c")));
  EXPECT_EQ(query[2], std::make_pair(std::string("flag"), std::string("")));
  EXPECT_EQ(query[3], std::make_pair(std::string(""), std::string("v")));
}

TEST(SplitTarget, KeepsMalformedEscapesAndPlusInThePath) {
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  split_target("/a+b%zz%4%", path, query);
  EXPECT_EQ(path, "/a+b%zz%4%");
  EXPECT_TRUE(query.empty());
  split_target("/x?%4", path, query);
  ASSERT_EQ(query.size(), 1u);
  EXPECT_EQ(query[0].first, "%4");
}

// Arbitrary bytes never crash or read out of bounds (ASan), and decoding never grows the text.
TEST(SplitTarget, RandomTargets) {
  std::mt19937 random(7);
  std::uniform_int_distribution<int> byte(0, 255), length(0, 40);
  const std::string alphabet = "%?&=+/aF0";
  for (int i = 0; i < 20000; ++i) {
    std::string target;
    for (int n = length(random); n > 0; --n) {
      target += i % 2 ? static_cast<char>(byte(random))
                      : alphabet[static_cast<std::size_t>(byte(random)) % alphabet.size()];
    }
    std::string path;
    std::vector<std::pair<std::string, std::string>> query;
    split_target(target, path, query);
    EXPECT_LE(path.size(), target.size());
  }
}

}  // namespace
}  // namespace md::server
