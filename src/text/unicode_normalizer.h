// Unicode NFC normalization for the tokenizer's normalizer stage (HF "NFC"), built on utf8proc,
// with a fast path that leaves text without composable or decomposable characters untouched.
#pragma once

#include <string>
#include <string_view>

namespace md {

// True when NFC might change `text` (valid UTF-8); false guarantees nfc(text) == text.
bool nfc_may_change(std::string_view text);

// The NFC form of `text` (must be valid UTF-8). Only the stretches around characters that can
// compose, decompose or reorder go through utf8proc; everything else is copied.
std::string nfc(std::string_view text);

}  // namespace md
