#include "base/dotenv.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>

#include "base/file_util.h"

namespace md {
namespace {

std::string trim(const std::string& s) {
  std::size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

bool is_valid_key(const std::string& key) {
  if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0]))) return false;
  for (char c : key) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Parses the value part; returns false with `why` set when it is malformed.
bool parse_value(const std::string& raw, std::string& value, std::string& why) {
  std::string text = trim(raw);
  if (text.empty()) {
    value.clear();
    return true;
  }
  char quote = text[0];
  if (quote == '\'' || quote == '"') {
    std::string out;
    std::size_t i = 1;
    for (; i < text.size() && text[i] != quote; ++i) {
      if (quote == '"' && text[i] == '\\' && i + 1 < text.size()) {
        char next = text[++i];
        switch (next) {
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          default:
            out += next;
            break;
        }
      } else {
        out += text[i];
      }
    }
    if (i >= text.size()) {
      why = "unterminated quoted value";
      return false;
    }
    std::string rest = trim(text.substr(i + 1));
    if (!rest.empty() && rest[0] != '#') {
      why = "unexpected text after the closing quote";
      return false;
    }
    value = out;
    return true;
  }
  std::size_t comment = text.find(" #");
  value = trim(comment == std::string::npos ? text : text.substr(0, comment));
  return true;
}

}  // namespace

DotenvResult parse_dotenv(const std::string& text, const std::string& origin) {
  DotenvResult result;
  std::size_t line_number = 0, pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = trim(text.substr(pos, end - pos));
    ++line_number;
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("export ", 0) == 0) line = trim(line.substr(7));
    std::size_t eq = line.find('=');
    if (eq == std::string::npos) {
      result.problems.push_back(fmt::format("{}:{}: expected KEY=VALUE", origin, line_number));
      continue;
    }
    std::string key = trim(line.substr(0, eq));
    if (!is_valid_key(key)) {
      result.problems.push_back(
          fmt::format("{}:{}: invalid variable name '{}'", origin, line_number, key));
      continue;
    }
    std::string value, why;
    if (!parse_value(line.substr(eq + 1), value, why)) {
      result.problems.push_back(fmt::format("{}:{}: {}", origin, line_number, why));
      continue;
    }
    result.entries.push_back({key, value});
  }
  return result;
}

std::vector<std::string> load_dotenv_file(const std::string& path) {
  if (!file_exists(path)) return {};
  DotenvResult parsed = parse_dotenv(read_text_file(path), path);
  for (const DotenvEntry& entry : parsed.entries) {
    ::setenv(entry.key.c_str(), entry.value.c_str(), /*overwrite=*/0);
  }
  return parsed.problems;
}

}  // namespace md
