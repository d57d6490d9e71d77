#include "io/safetensors_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

namespace md {

std::string TensorView::describe() const {
  return fmt::format("{} {} [{}] ({})", name, dtype_name(dtype), fmt::join(shape, ", "), file);
}

SafetensorsFile::SafetensorsFile(std::string path)
    : file_(std::move(path)), header_(parse_safetensors_header(file_.bytes(), file_.path())) {
  views_.reserve(header_.tensors.size());
  index_.reserve(header_.tensors.size());
  for (const SafetensorsEntry& entry : header_.tensors) {
    // The header parser guarantees offset + nbytes <= file size, so these pointers are in range.
    views_.push_back(TensorView{entry.name, entry.dtype, entry.shape, file_.data() + entry.offset,
                                static_cast<std::size_t>(entry.nbytes), file_.path()});
    index_.emplace(views_.back().name, views_.size() - 1);
  }
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &views_[it->second];
}

}  // namespace md
