#include "base/dotenv.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace md {
namespace {

TEST(Dotenv, ParsesPlainQuotedExportedAndCommentedLines) {
  DotenvResult r = parse_dotenv(
      "# comment\n\nA=1\nexport B = two words # trailing\nC='lit # \\n'\nD=\"x\\ny\"\nE=\n",
      ".env");
  ASSERT_TRUE(r.problems.empty());
  ASSERT_EQ(r.entries.size(), 5u);
  EXPECT_EQ(r.entries[0].key, "A");
  EXPECT_EQ(r.entries[0].value, "1");
  EXPECT_EQ(r.entries[1].key, "B");
  EXPECT_EQ(r.entries[1].value, "two words");
  EXPECT_EQ(r.entries[2].value, "lit # \\n");
  EXPECT_EQ(r.entries[3].value, "x\ny");
  EXPECT_EQ(r.entries[4].value, "");
}

TEST(Dotenv, ReportsMalformedLinesWithTheirNumbers) {
  DotenvResult r = parse_dotenv("GOOD=1\nno equals sign\n9BAD=1\nQ=\"open\nOK=2\n", "x/.env");
  ASSERT_EQ(r.problems.size(), 3u);
  EXPECT_EQ(r.problems[0], "x/.env:2: expected KEY=VALUE");
  EXPECT_EQ(r.problems[1], "x/.env:3: invalid variable name '9BAD'");
  EXPECT_EQ(r.problems[2], "x/.env:4: unterminated quoted value");
  ASSERT_EQ(r.entries.size(), 2u);
  EXPECT_EQ(r.entries[1].key, "OK");
}

TEST(Dotenv, FileDoesNotOverrideVariablesAlreadySet) {
  auto dir =
      std::filesystem::temp_directory_path() / ("md_dotenv_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / ".env").string();
  std::ofstream(path) << "MD_TEST_PRESET=from_file\nMD_TEST_NEW=from_file\nbroken\n";
  ::setenv("MD_TEST_PRESET", "from_env", 1);
  ::unsetenv("MD_TEST_NEW");
  auto problems = load_dotenv_file(path);
  EXPECT_STREQ(std::getenv("MD_TEST_PRESET"), "from_env");
  EXPECT_STREQ(std::getenv("MD_TEST_NEW"), "from_file");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], path + ":3: expected KEY=VALUE");
  EXPECT_TRUE(load_dotenv_file((dir / "missing.env").string()).empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace md
