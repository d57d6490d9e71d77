// Test-name helpers for parameterised GoogleTest suites.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace md::test {

// A fixture name as a test parameter name: GoogleTest parameter names cannot contain '-'.
inline std::string fixture_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

}  // namespace md::test
