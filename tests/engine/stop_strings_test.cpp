#include "engine/stop_strings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace md::engine {
namespace {

using ::testing::HasSubstr;

struct Streamed {
  std::string text;  // everything emitted, finish() included
  bool stopped = false;
  std::vector<std::string> emits;
};

Streamed stream(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  Streamed out;
  for (const auto& piece : pieces) {
    StopStringOutput o = m.push(piece);
    out.emits.push_back(o.emit);
    out.text += o.emit;
    out.stopped = o.stopped;
    if (o.stopped) return out;
  }
  out.text += m.finish();
  return out;
}

std::vector<std::string> bytes_of(const std::string& s) {
  std::vector<std::string> pieces;
  for (char c : s) pieces.emplace_back(1, c);
  return pieces;
}

// Checks every emitted piece is whole UTF-8: never starts with a continuation byte, never ends
// inside a character.
bool whole_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    const std::size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (len == 0 || i + len > s.size()) return false;
    i += len;
  }
  return true;
}

TEST(StopStrings, ByteByByteFeedingStopsAndExcludesTheStopString) {
  StopStringMatcher m({"STOP"});
  const Streamed s = stream(m, bytes_of("hello STOP world"));
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "hello ");
  EXPECT_EQ(m.matched_index(), 0);
  EXPECT_EQ(m.push("more").emit, "");
  EXPECT_TRUE(m.push("more").stopped);
  EXPECT_EQ(m.finish(), "");
}

TEST(StopStrings, HoldsBackOnlyWhatCouldStillBecomeAStopString) {
  StopStringMatcher m({"</end>"});
  EXPECT_EQ(m.push("abc</e").emit, "abc");
  EXPECT_EQ(m.push("x").emit, "</ex");  // the partial match broke: release it
  EXPECT_EQ(m.push("<").emit, "");
  EXPECT_EQ(m.finish(), "<");
}

TEST(StopStrings, StopSpanningSeveralPieces) {
  StopStringMatcher m({"###"});
  const Streamed s = stream(m, {"one #", "#", "# two"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "one ");
}

TEST(StopStrings, OverlappingPrefixesAreFoundLikeKmp) {
  StopStringMatcher m({"abcabd"});
  const Streamed s = stream(m, bytes_of("xabcabcabdy"));
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "xabc");
  StopStringMatcher whole({"abcabd"});
  EXPECT_EQ(stream(whole, {"abcabcabd"}).text, "abc");
  StopStringMatcher aaab({"aab"});
  EXPECT_EQ(stream(aaab, bytes_of("aaaab")).text, "aa");
}

TEST(StopStrings, FirstCompletionWinsAmongSeveralStopStrings) {
  StopStringMatcher m({"world", "lo w", "xyz"});
  const Streamed s = stream(m, {"hel", "lo wor", "ld"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "hel");
  EXPECT_EQ(m.matched_index(), 1);
  // Two completing on the same byte: the longer one (which starts earlier) wins.
  StopStringMatcher same_end({"cd", "abcd"});
  EXPECT_EQ(stream(same_end, {"xxabcdyy"}).text, "xx");
  EXPECT_EQ(same_end.matched_index(), 1);
}

TEST(StopStrings, NeverSplitsUtf8AcrossEmits) {
  // "€" is E2 82 AC and "😀" is F0 9F 98 80; fed byte by byte with a stop string that shares
  // the euro sign's first bytes.
  StopStringMatcher m({"\xE2\x82\xAC\xE2"});
  const Streamed s = stream(m, bytes_of("a€b😀c€d"));
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(s.text, "a€b😀c€d");
  for (const auto& e : s.emits) EXPECT_TRUE(whole_utf8(e)) << e;
  // No stop strings at all: still whole characters per emit.
  StopStringMatcher none({});
  const Streamed t = stream(none, bytes_of("日本語😀"));
  EXPECT_EQ(t.text, "日本語😀");
  for (const auto& e : t.emits) EXPECT_TRUE(whole_utf8(e)) << e;
  EXPECT_EQ(t.emits[0], "");
  EXPECT_EQ(t.emits[2], "日");
}

TEST(StopStrings, Utf8StopStringAcrossPieces) {
  StopStringMatcher m({"。終"});
  const Streamed s = stream(m, {"これで", "す\xE3\x80", "\x82\xE7", "\xB5\x82わり"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "これです");
  for (const auto& e : s.emits) EXPECT_TRUE(whole_utf8(e)) << e;
}

TEST(StopStrings, FinishReturnsTheHeldBackText) {
  StopStringMatcher m({"stop here"});
  EXPECT_EQ(m.push("we stop").emit, "we ");
  EXPECT_EQ(m.push(" he").emit, "");
  EXPECT_EQ(m.finish(), "stop he");
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, ValidationNamesTheOffendingIndex) {
  auto message = [](std::vector<std::string> stops) {
    try {
      StopStringMatcher m(std::move(stops));
    } catch (const md::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_THAT(message({"ok", ""}), HasSubstr("stop string 1 is empty"));
  EXPECT_THAT(message({"ok", "fine", std::string(1025, 'x')}), HasSubstr("stop string 2 is 1025"));
  EXPECT_THAT(message(std::vector<std::string>(17, "x")), HasSubstr("at most 16"));
  EXPECT_NO_THROW(StopStringMatcher(std::vector<std::string>(16, std::string(1024, 'x'))));
}

}  // namespace
}  // namespace md::engine
