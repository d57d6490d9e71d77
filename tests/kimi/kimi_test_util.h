// What the Kimi K3 tests share: where the scaled-down checkpoints are, and their names as gtest
// parameter names.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace md::test {

// tools/make_kimi_fixtures.py's output in the build tree (ctest's kimi.fixtures writes it).
inline std::string kimi_fixture_path(const std::string& name) {
  return std::string(MD_GOLDEN_DIR) + "/kimi/" + name;
}

// "kimi-k3-tiny" → "kimi_k3_tiny" (gtest names allow no '-').
inline std::string kimi_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
}

}  // namespace md::test
