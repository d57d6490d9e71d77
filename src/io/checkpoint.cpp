#include "io/checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/file_util.h"
#include "base/log.h"
#include "io/safetensors_index.h"
#include "io/strict_json.h"

namespace md {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSingleFileName = "model.safetensors";

std::string join_path(const std::string& directory, std::string_view name) {
  return (fs::path(directory) / fs::path(name)).string();
}

// Views of one file share that file's path string, so comparing its address identifies the file.
bool same_file(const TensorView& a, const TensorView& b) {
  return a.file.data() == b.file.data();
}

}  // namespace

std::string_view checkpoint_layout_name(CheckpointLayout layout) {
  switch (layout) {
    case CheckpointLayout::kSingleFile:
      return "single file";
    case CheckpointLayout::kIndexed:
      return "sharded with index";
    case CheckpointLayout::kAllFiles:
      return "all *.safetensors files";
  }
  return "unknown";
}

Checkpoint::Checkpoint(const std::string& path) : path_(path) {
  if (directory_exists(path)) {
    std::string single = join_path(path, kSingleFileName);
    std::string index = join_path(path, kSafetensorsIndexName);
    if (file_exists(single)) {
      if (file_exists(index)) {
        log::warn("{}: both {} and {} exist; reading {} (as transformers does)", path,
                  kSingleFileName, kSafetensorsIndexName, kSingleFileName);
      }
      open_single(single);
    } else if (file_exists(index)) {
      open_indexed(index);
    } else {
      open_all_files(path);
    }
  } else if (file_exists(path)) {
    if (path.ends_with(".json")) {
      open_indexed(path);
    } else {
      open_single(path);
    }
  } else {
    fail("{}: no such checkpoint file or directory", path);
  }
  finish();
}

void Checkpoint::open_single(const std::string& file) {
  layout_ = CheckpointLayout::kSingleFile;
  files_.push_back(std::make_unique<SafetensorsFile>(file));
  for (const TensorView& view : files_.back()->tensors()) add_tensor(view);
}

void Checkpoint::open_indexed(const std::string& index_path) {
  layout_ = CheckpointLayout::kIndexed;
  SafetensorsIndex index = parse_safetensors_index(read_text_file(index_path), index_path);
  // An index given as a bare file name lives in the working directory.
  fs::path parent = fs::path(index_path).parent_path();
  std::string directory = parent.empty() ? fs::current_path().string() : parent.string();

  for (const std::string& shard : index.shards) {
    std::string shard_path = join_path(directory, shard);
    if (!file_exists(shard_path)) {
      fail("{}: names shard {}, which does not exist (looked for {})", index_path,
           quote_for_message(shard), shard_path);
    }
    files_.push_back(std::make_unique<SafetensorsFile>(shard_path));
  }
  for (const auto& [name, shard] : index.weight_map) {
    const TensorView* view = files_[shard]->find(name);
    if (view == nullptr) {
      fail("{}: maps tensor {} to {}, but that file has no tensor of that name", index_path,
           quote_for_message(name), files_[shard]->path());
    }
    add_tensor(*view);
  }

  // Tensors the index does not list: loaded, because transformers loads whole shards.
  for (const auto& file : files_) {
    std::size_t extra = 0;
    std::string_view first;
    for (const TensorView& view : file->tensors()) {
      if (const TensorView* known = find(view.name); known != nullptr && same_file(*known, view)) {
        continue;
      }
      add_tensor(view);
      if (extra++ == 0) first = view.name;
    }
    if (extra > 0) {
      log::warn("{}: {} holds {} tensor(s) the index does not list (first: {}); loading them too",
                index_path, file->path(), extra, quote_for_message(first));
    }
  }
}

void Checkpoint::open_all_files(const std::string& directory) {
  layout_ = CheckpointLayout::kAllFiles;
  std::vector<std::string> paths;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    std::error_code ignored;
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ignored)) {
      paths.push_back(entry.path().string());
    }
  }
  if (error) fail("{}: cannot list directory: {}", directory, error.message());
  if (paths.empty()) {
    fail("{}: no model weights found (looked for {}, {} and *.safetensors)", directory,
         join_path(directory, kSingleFileName), join_path(directory, kSafetensorsIndexName));
  }
  std::sort(paths.begin(), paths.end());
  for (const std::string& file : paths) {
    files_.push_back(std::make_unique<SafetensorsFile>(file));
    for (const TensorView& view : files_.back()->tensors()) add_tensor(view);
  }
}

void Checkpoint::add_tensor(const TensorView& view) {
  auto [it, inserted] = index_.emplace(view.name, tensors_.size());
  if (!inserted) {
    fail("{}: tensor {} is stored in both {} and {}", path_, quote_for_message(view.name),
         tensors_[it->second].file, view.file);
  }
  tensors_.push_back(view);
}

void Checkpoint::finish() {
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  index_.clear();
  for (std::size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const TensorView* Checkpoint::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorView& Checkpoint::at(std::string_view name) const {
  const TensorView* view = find(name);
  if (view == nullptr) {
    fail("{}: checkpoint has no tensor {} ({} tensors in {} file(s))", path_,
         quote_for_message(name), tensors_.size(), files_.size());
  }
  return *view;
}

std::vector<std::string> Checkpoint::files() const {
  std::vector<std::string> paths;
  for (const auto& file : files_) paths.push_back(file->path());
  return paths;
}

std::uint64_t Checkpoint::total_bytes() const {
  std::uint64_t total = 0;
  for (const TensorView& view : tensors_) total += view.nbytes;
  return total;
}

std::map<DType, std::uint64_t> Checkpoint::parameter_counts() const {
  std::map<DType, std::uint64_t> counts;
  for (const TensorView& view : tensors_) counts[view.dtype] += view.numel();
  return counts;
}

}  // namespace md
