// Even parts in whole units (dist/partition.h): the parts tile [0, total) in order, differ by at
// most one unit, the larger ones first, and impossible splits are refused.
#include "dist/partition.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace md::dist {
namespace {

TEST(EvenPart, PartsTileTheRangeInOrderAndDifferByAtMostOneUnit) {
  for (int64_t unit : {1, 16, 32}) {
    for (int64_t units : {1, 2, 3, 7, 48, 49}) {
      for (int parts = 1; parts <= 5; ++parts) {
        const int64_t total = units * unit;
        int64_t at = 0, smallest = total, largest = 0;
        for (int p = 0; p < parts; ++p) {
          const Range r = even_part(total, parts, p, unit);
          EXPECT_EQ(r.begin, at);
          EXPECT_EQ(r.begin % unit, 0);
          EXPECT_EQ(r.end % unit, 0);
          at = r.end;
          smallest = std::min(smallest, r.size());
          largest = std::max(largest, r.size());
          if (p > 0) {
            EXPECT_LE(r.size(), even_part(total, parts, p - 1, unit).size());
          }
        }
        EXPECT_EQ(at, total);
        EXPECT_LE(largest - smallest, unit);
        EXPECT_EQ(largest_part(total, parts, unit), largest);
      }
    }
  }
}

TEST(EvenPart, KnownSplits) {
  EXPECT_EQ(even_part(49152, 3, 1).begin, 16384);
  EXPECT_EQ(even_part(1536, 2, 1, 32).begin, 768);
  // 5 units over 2 parts: 3 then 2.
  EXPECT_EQ(even_part(160, 2, 0, 32).size(), 96);
  EXPECT_EQ(even_part(160, 2, 1, 32).size(), 64);
  // More parts than units: the last parts are empty.
  EXPECT_EQ(even_part(2, 3, 2).size(), 0);
}

TEST(EvenPart, RefusesWhatIsNotASplit) {
  EXPECT_THROW(even_part(10, 0, 0), Error);
  EXPECT_THROW(even_part(10, 2, 2), Error);
  EXPECT_THROW(even_part(10, 2, -1), Error);
  EXPECT_THROW(even_part(100, 2, 0, 32), Error);  // not whole units
  EXPECT_THROW(even_part(-1, 2, 0), Error);
}

}  // namespace
}  // namespace md::dist
