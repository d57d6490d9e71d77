// A model's weights as one name → tensor table over one or more memory-mapped safetensors files
// (single file, sharded with an index, or every *.safetensors file in a directory).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "io/safetensors_file.h"

namespace md {

enum class CheckpointLayout {
  kSingleFile,  // model.safetensors, or a .safetensors path given directly
  kIndexed,     // model.safetensors.index.json (or an index path given directly) + its shards
  kAllFiles,    // fallback: every *.safetensors file in the directory
};

std::string_view checkpoint_layout_name(CheckpointLayout layout);

class Checkpoint {
 public:
  // `path` is a directory, a .safetensors file or an index .json file. In a directory,
  // model.safetensors wins over the index (as in transformers), then the index, then every
  // *.safetensors file. Each shard is mapped once and validated in full.
  //
  // Indexed checkpoints: every tensor the index names must be in the shard it names; shards the
  // index does not mention are not opened. A tensor found in a shard but absent from the index is
  // still loaded (transformers loads whole shards), with one warning per shard. A tensor name
  // stored in two files is an error, in every layout: the files disagree.
  // Throws md::Error naming the files and tensors concerned.
  explicit Checkpoint(const std::string& path);

  const std::string& path() const { return path_; }
  CheckpointLayout layout() const { return layout_; }
  // Sorted by name.
  std::span<const TensorView> tensors() const { return tensors_; }
  std::size_t size() const { return tensors_.size(); }
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  const TensorView* find(std::string_view name) const;
  // Like find, but throws md::Error naming the checkpoint when the tensor is missing.
  const TensorView& at(std::string_view name) const;

  std::vector<std::string> files() const;  // paths of the mapped files
  std::span<const std::unique_ptr<SafetensorsFile>> shards() const { return files_; }
  std::uint64_t total_bytes() const;
  std::map<DType, std::uint64_t> parameter_counts() const;  // elements per dtype

 private:
  void open_single(const std::string& file);
  void open_indexed(const std::string& index_path);
  void open_all_files(const std::string& directory);
  // Adds one tensor to the table; a name already there means two files disagree.
  void add_tensor(const TensorView& view);
  void finish();

  std::string path_;
  CheckpointLayout layout_ = CheckpointLayout::kSingleFile;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<TensorView> tensors_;
  std::unordered_map<std::string_view, std::size_t> index_;
};

}  // namespace md
