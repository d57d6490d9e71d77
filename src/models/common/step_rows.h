// A fused step's rows for the tokens it was given, as every family's step lays them out:
// independent rows take one sequence state per token at that state's position, verify and
// prefill rows one state at its next positions (program::StepRow). Families add their own checks (a
// token's id, the context) and their state's preparation.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <type_traits>

#include "base/error.h"
#include "models/common/row_mode.h"
#include "program/program.h"

namespace md {

// A prefill step writes its logits to the caller's buffer (`logits` set), the other modes to the
// step's own (`logits` null); md::Error otherwise.
inline void check_logits_target(RowMode mode, const float* logits) {
  if ((mode == RowMode::kPrefill) != (logits != nullptr))
    fail("a prefill step writes the caller's logits; the others their own");
}

// Fills rows[0, n) and row_states[0, n) (the state each row extends; both at least max_rows long)
// for n = tokens.size(), and returns n; md::Error when n is outside 1..max_rows or the states do
// not match the mode.
template <typename State>
int64_t lay_out_step_rows(RowMode mode, int64_t max_rows, std::span<State* const> states,
                          std::span<const int32_t> tokens, std::span<program::StepRow> rows,
                          std::type_identity_t<std::span<State*>> row_states) {
  const auto n = static_cast<int64_t>(tokens.size());
  const bool verify = mode != RowMode::kIndependent;
  if (n < 1 || n > max_rows) fail("a step of {} rows was given {} tokens", max_rows, n);
  if (static_cast<int64_t>(rows.size()) < n || static_cast<int64_t>(row_states.size()) < n)
    fail("step rows laid out into room for {} of {}", std::min(rows.size(), row_states.size()), n);
  if (static_cast<int64_t>(states.size()) != (verify ? 1 : n)) {
    const char* kind = mode == RowMode::kVerify    ? "verify"
                       : mode == RowMode::kPrefill ? "prefill"
                                                   : "decode";
    fail("a {} step needs {} sequence state(s), got {}", kind, verify ? 1 : n, states.size());
  }
  for (int64_t r = 0; r < n; ++r) {
    const auto at = static_cast<std::size_t>(r);
    State* state = states[verify ? 0 : at];
    rows[at] = {tokens[at], state->position() + (verify ? r : 0), state};
    row_states[at] = state;
  }
  return n;
}

}  // namespace md
