// Loading of an untracked `.env` file at start-up (KEY=VALUE lines), as the seed's launchers do.
// Variables already set in the environment win; malformed lines are reported with their number.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace md {

struct DotenvEntry {
  std::string key;
  std::string value;
};

struct DotenvResult {
  std::vector<DotenvEntry> entries;
  std::vector<std::string> problems;  // "path:LINE: what is wrong"
};

// Parses the text of a .env file. Accepts `KEY=VALUE`, `export KEY=VALUE`, blank lines,
// `# comments`, single-quoted (literal) and double-quoted (with \n \t \\ \" escapes) values,
// and trailing ` # comment` after unquoted values.
DotenvResult parse_dotenv(const std::string& text, const std::string& origin);

// Loads `path` if it exists: sets each variable that is not already set. Returns the problems.
std::vector<std::string> load_dotenv_file(const std::string& path);

}  // namespace md
