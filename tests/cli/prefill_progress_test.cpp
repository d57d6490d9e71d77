#include "cli/prefill_progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace md::cli {
namespace {

// A progress line on an in-memory file with a clock the test sets; text() is what it wrote.
struct Captured {
  explicit Captured(bool terminal)
      : out(open_memstream(&buffer, &size)), line(out, terminal, [this] { return now; }) {}
  ~Captured() {
    if (out != nullptr) std::fclose(out);
    std::free(buffer);
  }
  std::string text() {
    std::fclose(out);
    out = nullptr;
    return std::string(buffer, size);
  }

  char* buffer = nullptr;  // (declared before `out`, which open_memstream writes them through)
  std::size_t size = 0;
  std::FILE* out;
  double now = 0;
  PrefillProgressLine line;
};

// What a progress line writes for a prefill whose chunks end at `times` (seconds after its
// start), 256 tokens each.
std::string written(bool terminal, const std::vector<double>& times) {
  Captured captured(terminal);
  const auto total = static_cast<int64_t>(times.size()) * 256;
  captured.line(0, total);
  for (std::size_t i = 0; i < times.size(); ++i) {
    captured.now = times[i];
    captured.line(static_cast<int64_t>(i + 1) * 256, total);
  }
  return captured.text();
}

TEST(PrefillProgress, APrefillWithinASecondPrintsNothing) {
  EXPECT_EQ(written(true, {0.2, 0.5, 0.9}), "");
  EXPECT_EQ(written(false, {0.2, 0.5, 0.9}), "");
}

TEST(PrefillProgress, ATerminalGetsOneLineRewrittenInPlaceThenANewline) {
  const std::string text = written(true, {0.5, 1.0, 1.5, 2.0});
  EXPECT_EQ(text,
            "\rprefill 512 / 1024 tokens (50%), 512 tok/s, 1.0 s\x1b[K"
            "\rprefill 768 / 1024 tokens (75%), 512 tok/s, 1.5 s\x1b[K"
            "\rprefill 1024 / 1024 tokens (100%), 512 tok/s, 2.0 s\x1b[K\n");
}

TEST(PrefillProgress, ALogGetsALinePerSecondAndTheLast) {
  const std::string text = written(false, {0.5, 1.0, 1.5, 2.0, 2.2, 3.0});
  EXPECT_EQ(text,
            "prefill 512 / 1536 tokens (33%), 512 tok/s, 1.0 s\n"
            "prefill 1024 / 1536 tokens (67%), 512 tok/s, 2.0 s\n"
            "prefill 1536 / 1536 tokens (100%), 512 tok/s, 3.0 s\n");
}

// A second prefill (the next chat turn) starts its own second of quiet.
TEST(PrefillProgress, EachPrefillStartsAgain) {
  Captured c(false);
  c.line(0, 512);
  c.now = 5;
  c.line(256, 512);
  c.now = 6;
  c.line(512, 512);
  c.line(0, 512);
  c.now = 6.5;
  c.line(256, 512);
  c.now = 6.9;
  c.line(512, 512);
  EXPECT_EQ(c.text(),
            "prefill 256 / 512 tokens (50%), 51 tok/s, 5.0 s\n"
            "prefill 512 / 512 tokens (100%), 85 tok/s, 6.0 s\n");
}

}  // namespace
}  // namespace md::cli
