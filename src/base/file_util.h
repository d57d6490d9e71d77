// Small whole-file helpers for text files (configs, templates, tokenizer files).
#pragma once

#include <string>

namespace md {

// Reads a whole file into a string; throws md::Error naming the path on failure.
std::string read_text_file(const std::string& path);

bool file_exists(const std::string& path);
bool directory_exists(const std::string& path);

}  // namespace md
