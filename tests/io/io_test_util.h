// Helpers for the io tests: build safetensors bytes in memory, write files and fake directory trees
// in a per-test temporary directory, and set environment variables for one scope.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace md::testing {

struct TestTensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> data;
};

// Bytes with a recognisable pattern, so misplaced views show up as wrong values.
inline std::vector<std::uint8_t> pattern_bytes(std::size_t count, std::uint8_t seed) {
  std::vector<std::uint8_t> bytes(count);
  for (std::size_t i = 0; i < count; ++i) bytes[i] = static_cast<std::uint8_t>(seed + i * 7);
  return bytes;
}

// 8-byte little-endian length + `json` + `data`, with no checks: tests use it to write lies.
inline std::vector<std::uint8_t> raw_safetensors(const std::string& json,
                                                 const std::vector<std::uint8_t>& data = {},
                                                 std::optional<std::uint64_t> length = {}) {
  std::uint64_t n = length.value_or(json.size());
  std::vector<std::uint8_t> bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  bytes.insert(bytes.end(), json.begin(), json.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

// A well-formed file: tensors stored back to back in the given order, header padded with spaces
// to a multiple of 8 bytes as the reference writer does.
inline std::vector<std::uint8_t> make_safetensors(
    const std::vector<TestTensor>& tensors,
    const std::map<std::string, std::string>& metadata = {}) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::uint8_t> data;
  for (const TestTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.data.size()}}};
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  return raw_safetensors(json, data);
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  write_bytes(path, std::vector<std::uint8_t>(text.begin(), text.end()));
}

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name =
        std::string("md_io_") + (info ? info->name() : "test") + "_" + std::to_string(::getpid());
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str(const std::string& relative = "") const {
    return relative.empty() ? path_.string() : (path_ / relative).string();
  }

 private:
  std::filesystem::path path_;
};

// Sets (or, with nullopt, unsets) an environment variable and restores the old value at scope exit.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The message of the md::Error that `action` throws; fails the test if it throws nothing or
// throws anything else.
template <typename Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const md::Error& error) {
    return error.what();
  } catch (const std::exception& other) {
    ADD_FAILURE() << "expected an md::Error, got another exception: " << other.what();
    return {};
  }
  ADD_FAILURE() << "expected an md::Error, nothing was thrown";
  return {};
}

}  // namespace md::testing
