// The driver shared by the in-ctest mutation fuzzers of the file parsers: mutate seed files,
// parse each result from an exactly sized heap copy (so ASan sees any read past the end) and
// require that every input either parses, with its invariants holding, or throws an md::Error
// that names the file. Crashes, other exceptions and hangs are failures.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "base/error.h"

namespace md::testing {

struct FuzzOutcome {
  int accepted = 0;
  int rejected = 0;
};

// `mutate(seed bytes) → bytes`; `parse_and_check(bytes)` parses with `origin` as the file name
// and checks invariants with EXPECT/ADD_FAILURE.
template <typename Mutate, typename ParseAndCheck>
FuzzOutcome run_mutation_fuzz(const std::vector<std::vector<std::uint8_t>>& seeds, int iterations,
                              const std::string& origin, Mutate&& mutate,
                              ParseAndCheck&& parse_and_check) {
  FuzzOutcome outcome;
  for (int i = 0; i < iterations; ++i) {
    std::vector<std::uint8_t> file = mutate(seeds[static_cast<std::size_t>(i) % seeds.size()]);
    file.shrink_to_fit();
    try {
      parse_and_check(file);
      ++outcome.accepted;
    } catch (const Error& error) {
      if (std::string(error.what()).find(origin) == std::string::npos) {
        ADD_FAILURE() << "iteration " << i << ": the error does not name " << origin << ": "
                      << error.what();
        return outcome;
      }
      ++outcome.rejected;
    } catch (const std::exception& other) {
      ADD_FAILURE() << "iteration " << i << ": unexpected exception " << other.what();
      return outcome;
    }
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "iteration " << i;
      return outcome;
    }
  }
  return outcome;
}

}  // namespace md::testing
