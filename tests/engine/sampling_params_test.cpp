#include "engine/sampling_params.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "base/error.h"

namespace md::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string error_of(const SamplingParams& p) {
  try {
    p.validate();
  } catch (const md::Error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplingParams, DefaultsAndBoundaryValuesAreValid) {
  EXPECT_NO_THROW(SamplingParams{}.validate());
  EXPECT_NO_THROW((SamplingParams{.temperature = 0.0f,
                                  .top_k = -1,
                                  .top_p = 1.0f,
                                  .min_p = 1.0f,
                                  .presence_penalty = -2.0f,
                                  .frequency_penalty = 2.0f,
                                  .repetition_penalty = 1e-3f,
                                  .logprobs_top_k = 20}
                       .validate()));
  EXPECT_NO_THROW(SamplingParams{.temperature = 100.0f}.validate());
}

TEST(SamplingParams, EachOutOfRangeFieldIsNamedWithItsRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(error_of({.temperature = -0.1f}),
              AllOf(HasSubstr("temperature"), HasSubstr("[0, 100]")));
  EXPECT_THAT(error_of({.temperature = 100.5f}), HasSubstr("temperature"));
  EXPECT_THAT(error_of({.temperature = nan}), HasSubstr("temperature"));
  EXPECT_THAT(error_of({.top_k = -2}), AllOf(HasSubstr("top_k"), HasSubstr(">= 0")));
  EXPECT_THAT(error_of({.top_p = -0.01f}), AllOf(HasSubstr("top_p"), HasSubstr("[0, 1]")));
  EXPECT_THAT(error_of({.top_p = 1.01f}), HasSubstr("top_p"));
  EXPECT_THAT(error_of({.min_p = -0.01f}), AllOf(HasSubstr("min_p"), HasSubstr("[0, 1]")));
  EXPECT_THAT(error_of({.min_p = 1.5f}), HasSubstr("min_p"));
  EXPECT_THAT(error_of({.presence_penalty = 2.5f}),
              AllOf(HasSubstr("presence_penalty"), HasSubstr("[-2, 2]")));
  EXPECT_THAT(error_of({.frequency_penalty = -2.5f}),
              AllOf(HasSubstr("frequency_penalty"), HasSubstr("[-2, 2]")));
  EXPECT_THAT(error_of({.repetition_penalty = 0.0f}),
              AllOf(HasSubstr("repetition_penalty"), HasSubstr("> 0")));
  EXPECT_THAT(error_of({.repetition_penalty = std::numeric_limits<float>::infinity()}),
              HasSubstr("repetition_penalty"));
  EXPECT_THAT(error_of({.logprobs_top_k = 21}),
              AllOf(HasSubstr("logprobs_top_k"), HasSubstr("[0, 20]")));
  EXPECT_THAT(error_of({.logprobs_top_k = -1}), HasSubstr("logprobs_top_k"));
}

TEST(SamplingParams, GreedyMeansTemperatureNearZeroOrTopKOne) {
  EXPECT_TRUE(SamplingParams{.temperature = 0.0f}.greedy());
  EXPECT_TRUE(SamplingParams{.temperature = 5e-6f}.greedy());
  EXPECT_TRUE((SamplingParams{.temperature = 1.0f, .top_k = 1}.greedy()));
  EXPECT_TRUE((SamplingParams{.temperature = 1.0f, .top_p = 0.0f}.greedy()));
  EXPECT_FALSE((SamplingParams{.temperature = 1.0f, .top_p = 1e-30f}.greedy()));
  EXPECT_FALSE(SamplingParams{.temperature = 1e-4f}.greedy());
  EXPECT_FALSE(SamplingParams{}.greedy());
}

}  // namespace
}  // namespace md::engine
