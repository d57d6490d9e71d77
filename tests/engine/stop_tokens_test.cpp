#include "engine/stop_tokens.h"

#include <gtest/gtest.h>

namespace md::engine {
namespace {

TEST(StopTokens, RequestIdsAlwaysStopEosOnlyUnlessIgnored) {
  StopTokens stops{.ids = {7}, .eos_ids = {2, 3}};
  EXPECT_TRUE(stops.is_stop(7));
  EXPECT_TRUE(stops.is_stop(3));
  EXPECT_FALSE(stops.is_stop(4));
  stops.ignore_eos = true;
  EXPECT_TRUE(stops.is_stop(7));
  EXPECT_FALSE(stops.is_stop(3));
}

}  // namespace
}  // namespace md::engine
