#include "io/safetensors_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "io_test_util.h"

namespace md {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;
using testing::make_safetensors;
using testing::pattern_bytes;
using testing::TempDir;
using testing::write_bytes;

TEST(SafetensorsFile, ViewsPointAtTheBytesInTheMapping) {
  TempDir dir;
  auto w = pattern_bytes(24, 5);
  auto b = pattern_bytes(3, 9);
  write_bytes(dir.path() / "m.safetensors",
              make_safetensors({{"w", "F32", {2, 3}, w}, {"b", "I8", {3}, b}}, {{"k", "v"}}));
  SafetensorsFile file(dir.str("m.safetensors"));
  EXPECT_EQ(file.path(), dir.str("m.safetensors"));
  EXPECT_EQ(file.metadata().at("k"), "v");
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].name, "w");  // file order

  const TensorView* view = file.find("w");
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->dtype, DType::kF32);
  EXPECT_THAT(view->shape, ElementsAre(2, 3));
  EXPECT_EQ(view->numel(), 6u);
  EXPECT_EQ(view->nbytes, 24u);
  EXPECT_EQ(view->file, file.path());
  EXPECT_EQ(std::memcmp(view->data, w.data(), w.size()), 0);
  EXPECT_EQ(view->describe(), "w F32 [2, 3] (" + file.path() + ")");

  view = file.find("b");
  ASSERT_NE(view, nullptr);
  EXPECT_THAT(std::vector<std::uint8_t>(view->bytes().begin(), view->bytes().end()),
              ::testing::ElementsAreArray(b));
  EXPECT_EQ(file.find("missing"), nullptr);
}

TEST(SafetensorsFile, ErrorsNameTheFile) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { SafetensorsFile f(dir.str("absent.safetensors")); }),
              HasSubstr(dir.str("absent.safetensors")));
  write_bytes(dir.path() / "bad.safetensors",
              testing::raw_safetensors(R"({"w":{"dtype":"U8","shape":[9],"data_offsets":[0,9]}})",
                                       pattern_bytes(4, 0)));
  EXPECT_THAT(error_of([&] { SafetensorsFile f(dir.str("bad.safetensors")); }),
              AllOf(HasSubstr(dir.str("bad.safetensors") + ": tensor \"w\""),
                    HasSubstr("run past the end of the data area (4 bytes)")));
  write_bytes(dir.path() / "empty.safetensors", {});
  EXPECT_THAT(error_of([&] { SafetensorsFile f(dir.str("empty.safetensors")); }),
              HasSubstr("0 bytes, too short"));
}

}  // namespace
}  // namespace md
