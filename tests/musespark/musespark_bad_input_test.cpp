// Damaged Muse Spark checkpoints: each is a precise md::Error from the loader naming the tensor
// and what is wrong, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../support/checkpoint_edits.h"
#include "base/error.h"
#include "models/model_loader.h"
#include "musespark_test_util.h"

namespace md::test {
namespace {

namespace fs = std::filesystem;

const std::string kLayer1 = "model.language_model.layers.1.mlp.experts.";

class MuseBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("md_muse_bad_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = root_ / "muse-spark-tiny";
    fs::copy(musespark_fixture_dir("muse-spark-tiny"), dir_, fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string load_error() const {
    try {
      load_language_model(dir_.string(), ModelRunOptions{1, KvCacheType::kF32});
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  }
  void edit(const std::function<void(nlohmann::ordered_json&)>& change) {
    edit_header(dir_ / "model.safetensors", change);
  }

  fs::path root_, dir_;
};

TEST_F(MuseBadInput, IntactFixtureLoadsThroughTheLoader) {
  EXPECT_EQ(load_error(), "");
}

TEST_F(MuseBadInput, MissingGlobalScale) {
  const std::string name = kLayer1 + "down_proj_weight_scale_2";
  edit([&](nlohmann::ordered_json& h) {
    h[kLayer1 + "down_proj_weight_scale_3"] = h[name];
    h.erase(name);
  });
  expect_contains(load_error(), {name, "missing"});
}

TEST_F(MuseBadInput, BlockScalesOfTheWrongDtype) {
  const std::string name = kLayer1 + "gate_up_proj_weight_scale";
  edit([&](nlohmann::ordered_json& h) { h[name]["dtype"] = "U8"; });
  expect_contains(load_error(), {name, "is U8", "F8_E4M3"});
}

TEST_F(MuseBadInput, PackedCodesOfTheWrongShape) {
  const std::string name = kLayer1 + "gate_up_proj";
  edit([&](nlohmann::ordered_json& h) { h[name]["shape"] = {16, 128, 192}; });
  expect_contains(load_error(), {name, "[16, 128, 192]", "[16, 192, 128]"});
}

TEST_F(MuseBadInput, ScalesWithoutTheirLayersBlockScales) {
  const std::string name = kLayer1 + "gate_up_proj_weight_scale";
  edit([&](nlohmann::ordered_json& h) {
    h[kLayer1 + "gate_up_proj_weight_scalX"] = h[name];
    h.erase(name);
  });
  expect_contains(load_error(), {"gate_up_proj_weight_scale_2", "is present",
                                 "gate_up_proj_weight_scale' is missing"});
}

TEST_F(MuseBadInput, GlobalScaleWithTheWrongElementCount) {
  const std::string name = kLayer1 + "gate_up_proj_weight_scale_2";
  edit([&](nlohmann::ordered_json& h) { h[name]["shape"] = {32}; });  // 32 elements: as stored
  EXPECT_EQ(load_error(), "");  // any shape holding E·2 elements is accepted ([E, 2] or [2E])
  edit([&](nlohmann::ordered_json& h) {
    h[name]["shape"] = {16};
    h[name]["data_offsets"][1] = h[name]["data_offsets"][0].get<int64_t>() + 64;
  });
  expect_contains(load_error(), {name, "16 elements", "32 elements"});
}

}  // namespace
}  // namespace md::test
