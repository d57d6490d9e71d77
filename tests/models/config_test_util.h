// Helpers for config tests: fixture loading, JSON mutation and checking that a refusal names the
// field and value.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "models/common/config_files.h"

namespace md::test {

inline std::string config_fixture_dir(const std::string& name) {
  return std::string(MD_SOURCE_DIR) + "/tests/data/configs/" + name;
}

inline nlohmann::json config_fixture(const std::string& name) {
  return read_json_file(config_fixture_dir(name) + "/config.json");
}

// One mutation of a valid config and the fragments its refusal message must contain.
struct Refusal {
  std::string pointer;   // JSON pointer of the field to change, e.g. "/text_config/hidden_act"
  nlohmann::json value;  // the new value; discarded when `erase`
  std::vector<std::string> expected;
  bool erase = false;
};

inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

inline nlohmann::json mutated(nlohmann::json config, const Refusal& refusal) {
  nlohmann::json::json_pointer pointer(refusal.pointer);
  if (refusal.erase) {
    config[pointer.parent_pointer()].erase(pointer.back());
  } else {
    config[pointer] = refusal.value;
  }
  return config;
}

// Parses each mutated config with `parse` and checks the message names file, field and value.
template <typename Parse>
void expect_refusals(const nlohmann::json& valid, const std::vector<Refusal>& refusals,
                     Parse parse) {
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.pointer + " = " + refusal.value.dump());
    nlohmann::json config = mutated(valid, refusal);
    std::string message = error_of([&] { parse(config_files_from_json(config, "config.json")); });
    ASSERT_FALSE(message.empty()) << "accepted";
    EXPECT_TRUE(message.starts_with("config.json: ")) << message;
    for (const std::string& fragment : refusal.expected) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "missing \"" << fragment << "\" in: " << message;
    }
  }
}

}  // namespace md::test
