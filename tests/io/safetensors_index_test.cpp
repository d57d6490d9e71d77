#include "io/safetensors_index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io_test_util.h"

namespace md {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(SafetensorsIndex, MapsTensorsToDistinctShards) {
  SafetensorsIndex index = parse_safetensors_index(R"({
    "metadata": {"total_size": 123},
    "weight_map": {"b": "model-00002-of-00002.safetensors", "a": "model-00001-of-00002.safetensors",
                   "c": "model-00001-of-00002.safetensors", "d": "sub/dir/x.safetensors"}})",
                                                   "idx.json");
  EXPECT_THAT(index.shards,
              ElementsAre("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                          "sub/dir/x.safetensors"));
  EXPECT_THAT(index.weight_map,
              ElementsAre(Pair("a", 0), Pair("b", 1), Pair("c", 0), Pair("d", 2)));
}

TEST(SafetensorsIndex, RejectsMalformedIndexes) {
  struct Case {
    const char* json;
    const char* message;
  };
  for (Case c : {
           Case{"[]", "expected a JSON object with a \"weight_map\""},
           {R"({"metadata": {}})", "no \"weight_map\""},
           {R"({"weight_map": []})", "\"weight_map\" is a JSON array, expected an object"},
           {R"({"weight_map": {}})", "\"weight_map\" names no tensors"},
           {R"({"weight_map": {"a": 1}})", "tensor \"a\" maps to a JSON number"},
           {R"({"weight_map": {"a": "x", "a": "y"}})", "duplicate key \"a\""},
           {R"({"weight_map": {"a": "../x.safetensors"}})",
            "tensor \"a\" maps to shard \"../x.safetensors\", which is not a safe relative file "
            "name: it has a \"..\" component"},
           {R"({"weight_map": {"a": "/etc/passwd"}})", "it is an absolute path"},
           {R"({"weight_map": {"a": "d/../../x"}})", "\"..\" component"},
           {R"({"weight_map": {"a": ""}})", "it is empty"},
           {R"({"weight_map": {"a": "x\u0000.safetensors"}})", "control character"},
       }) {
    EXPECT_THAT(error_of([&] { parse_safetensors_index(c.json, "dir/idx.json"); }),
                ::testing::AllOf(HasSubstr("dir/idx.json: "), HasSubstr(c.message)))
        << c.json;
  }
}

TEST(SafetensorsIndex, ShardNamesStayInsideTheDirectory) {
  for (const char* good : {"model.safetensors", "a/b.safetensors", "..x", "x..", "a b"}) {
    EXPECT_EQ(shard_name_problem(good), "") << good;
  }
  for (const char* bad :
       {"", "/abs", "..", "../x", "a/../b", "a/..", "./x", "a//b", "a/", "a\tb"}) {
    EXPECT_NE(shard_name_problem(bad), "") << bad;
  }
}

}  // namespace
}  // namespace md
