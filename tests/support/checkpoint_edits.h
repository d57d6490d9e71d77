// Damaging a copied checkpoint for the loaders' bad-input tests: whole files read and written,
// a safetensors header edited in place (its length kept, so every data offset stays valid), and
// the check that an error message names what it must.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace md::test {

inline std::vector<char> read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_all(const std::filesystem::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Edits a safetensors header in place, padded with spaces (which the format allows).
template <typename Edit>
void edit_header(const std::filesystem::path& path, Edit edit) {
  std::vector<char> bytes = read_all(path);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), sizeof length);
  nlohmann::ordered_json header = nlohmann::ordered_json::parse(
      bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(length));
  edit(header);
  std::string text = header.dump();
  ASSERT_LE(text.size(), length) << "edited header grew";
  text.resize(length, ' ');
  std::copy(text.begin(), text.end(), bytes.begin() + 8);
  write_all(path, bytes);
}

// Overwrites element `index` of tensor `name` (elements of type T) in a safetensors file.
template <typename T>
void edit_element(const std::filesystem::path& path, const std::string& name, int64_t index,
                  T value) {
  std::vector<char> bytes = read_all(path);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), sizeof length);
  const nlohmann::json header = nlohmann::json::parse(
      bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(length));
  const auto begin = header.at(name).at("data_offsets").at(0).get<std::size_t>();
  std::memcpy(bytes.data() + 8 + length + begin + static_cast<std::size_t>(index) * sizeof(T),
              &value, sizeof(T));
  write_all(path, bytes);
}

inline void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  ASSERT_FALSE(message.empty()) << "the damaged model loaded";
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

}  // namespace md::test
