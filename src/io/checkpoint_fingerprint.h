// What identifies a checkpoint's weights cheaply, so that a weight pack made from one checkpoint
// is refused with another (a different model, quantisation or fine-tune): its files' names and
// sizes, each file's first MiB (the GGUF or safetensors header: every tensor's name, type, shape
// and offset, and config.json whole) and 64 spread samples of 4 KiB of its data, under XXH3-64.
// A fine-tune changes every weight and so the samples; an edit of a few bytes outside them is not
// seen (the pack's own slices carry full content hashes).
#pragma once

#include <cstdint>
#include <string>

namespace md {

struct CheckpointFingerprint {
  std::string name;         // the file or directory name
  std::uint64_t bytes = 0;  // the files' total size
  std::string fingerprint;  // 16 hex digits
};

// For a GGUF file, or a directory's config.json, *.safetensors and *.gguf files. Throws md::Error
// naming `path` when it cannot be read or holds none of them.
CheckpointFingerprint fingerprint_checkpoint(const std::string& path);

}  // namespace md
