// Helpers for the tokenizer golden tests: reading the JSONL files written by
// tools/gen_tokenizer_goldens.py and printing mismatches readably.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "text/tokenizer.h"

namespace md::testing {

inline std::string golden_dir() {
  return std::string(MD_GOLDEN_DIR) + "/tokenizer";
}

inline std::string golden_path(const std::string& name) {
  return golden_dir() + "/" + name;
}

// Reads a JSONL golden file; fails the test (with the command that makes it) when missing.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "missing golden file " << path << "; generate it with: .venv/bin/python "
                  << "tools/gen_tokenizer_goldens.py --tokenizer-dir " << MD_QWEN3_TOKENIZER_DIR
                  << " --out " << MD_GOLDEN_DIR
                  << " (ctest runs this as the fixture text.tokenizer_goldens)";
    return rows;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

inline std::string unhex(const std::string& hex) {
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Printable form of arbitrary bytes: ASCII as is, controls and non-ASCII bytes as \xNN.
inline std::string escape(std::string_view bytes, std::size_t limit = 160) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size() && i < limit; ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b == '\n') {
      out += "\\n";
    } else if (b >= 0x20 && b < 0x7F) {
      out += static_cast<char>(b);
    } else {
      out += fmt::format("\\x{:02x}", b);
    }
  }
  if (bytes.size() > limit) out += fmt::format("...(+{} bytes)", bytes.size() - limit);
  return out;
}

inline std::string show_ids(const Tokenizer& tok, const std::vector<std::int32_t>& ids,
                            std::size_t from, std::size_t count = 8) {
  std::string out;
  for (std::size_t i = from; i < ids.size() && i < from + count; ++i) {
    out += fmt::format("{}({}) ", ids[i], escape(tok.piece(ids[i]), 24));
  }
  return out.empty() ? "<end>" : out;
}

// Compares encodings of every row's "hex" input against the ids under `key`; prints the count
// to stdout and the first few mismatches. Returns the number of mismatches.
inline std::size_t compare_encodings(const Tokenizer& tok, const std::vector<nlohmann::json>& rows,
                                     const char* key, bool parse_special,
                                     const std::string& label) {
  std::size_t same = 0;
  std::vector<std::string> reports;
  for (const auto& row : rows) {
    const std::string input = unhex(row["hex"].get<std::string>());
    const auto expected = row[key].get<std::vector<std::int32_t>>();
    const auto got = tok.encode(input, parse_special);
    if (got == expected) {
      ++same;
      continue;
    }
    if (reports.size() >= 5) continue;
    std::size_t at = 0;
    while (at < got.size() && at < expected.size() && got[at] == expected[at]) ++at;
    const std::size_t from = at >= 2 ? at - 2 : 0;
    reports.push_back(fmt::format(
        "  [{}] input \"{}\"\n    first difference at token {}\n    expected: {}\n    got:      {}",
        row.value("cat", "?"), escape(input), at, show_ids(tok, expected, from),
        show_ids(tok, got, from)));
  }
  fmt::print("{}: {}/{} strings identical\n", label, same, rows.size());
  for (const auto& r : reports) fmt::print("{}\n", r);
  std::fflush(stdout);
  return rows.size() - same;
}

}  // namespace md::testing
