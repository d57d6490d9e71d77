#include "io/checkpoint_fingerprint.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "base/error.h"
#include "base/mapped_file.h"
#include "io/content_hash.h"
#include "io/pack_manifest.h"

namespace md {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kHeadBytes = std::size_t{1} << 20;
constexpr std::size_t kSampleBytes = 4096;
constexpr std::size_t kSamples = 64;

bool is_weight_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name == "config.json" || p.extension() == ".safetensors" || p.extension() == ".gguf";
}

std::vector<fs::path> checkpoint_files(const std::string& path) {
  std::error_code error;
  if (fs::is_regular_file(path, error)) return {fs::path(path)};
  if (!fs::is_directory(path, error)) fail("{}: no such checkpoint file or directory", path);
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(path, error)) {
    if (e.is_regular_file(error) && is_weight_file(e.path())) files.push_back(e.path());
  }
  if (error) fail("{}: cannot list the checkpoint's files ({})", path, error.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) fail("{}: holds no config.json, .safetensors or .gguf file", path);
  return files;
}

void add_file(ContentHasher& hash, const fs::path& file, std::uint64_t& total) {
  const MappedFile mapped(file.string());
  const std::uint8_t* data = mapped.data();
  const std::size_t size = mapped.size();
  total += size;
  const std::string name = file.filename().string();
  const std::uint64_t size64 = size;
  hash.add(name.data(), name.size() + 1);
  hash.add(&size64, sizeof size64);
  hash.add(data, std::min(size, kHeadBytes));
  if (size <= kHeadBytes + kSampleBytes) return;
  const std::size_t span = size - kHeadBytes - kSampleBytes;
  for (std::size_t i = 0; i < kSamples; ++i) {
    hash.add(data + kHeadBytes + span * i / (kSamples - 1), kSampleBytes);
  }
}

}  // namespace

CheckpointFingerprint fingerprint_checkpoint(const std::string& path) {
  CheckpointFingerprint out;
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  out.name = fs::path(trimmed).filename().string();
  ContentHasher hash;
  for (const fs::path& file : checkpoint_files(path)) add_file(hash, file, out.bytes);
  out.fingerprint = hex64(hash.value());
  return out;
}

}  // namespace md
