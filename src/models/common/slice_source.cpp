#include "models/common/slice_source.h"

#include "base/error.h"
#include "base/ggml_type.h"
#include "models/common/tensor_shard.h"

namespace md::shard {

std::string_view cut_name(Cut cut) {
  return cut == Cut::kRows ? "rows" : "columns";
}

kernels::WeightMatrix cut(const kernels::WeightMatrix& whole, const SliceRequest& request,
                          OwnedBytes& owned, const std::string& model) {
  const std::string what = model + ": " + request.key;
  return request.cut == Cut::kRows ? rows_of(whole, request.ranges, owned, what)
                                   : columns_of(whole, request.ranges, owned, what);
}

namespace {

class AtLoad final : public SliceSource {
 public:
  kernels::WeightMatrix slice(const kernels::WeightMatrix& whole, const SliceRequest& request,
                              OwnedBytes& owned, const std::string& model) override {
    return cut(whole, request, owned, model);
  }
};

}  // namespace

SliceSource& slice_at_load() {
  static AtLoad source;
  return source;
}

std::string stored_format(const kernels::WeightMatrix& w) {
  if (w.format == kernels::WeightFormat::kGguf)
    return std::string(ggml_type_info(w.gguf_type).name);
  if (w.format == kernels::WeightFormat::kBf16) return "bf16";
  return std::string(w.format_name());
}

std::size_t dense_row_bytes(const kernels::WeightMatrix& like, int64_t cols) {
  if (like.format == kernels::WeightFormat::kGguf) {
    const GgmlTypeInfo& info = ggml_type_info(like.gguf_type);
    return static_cast<std::size_t>(cols / info.block_elems) * info.block_bytes;
  }
  if (like.format == kernels::WeightFormat::kBf16) return static_cast<std::size_t>(cols) * 2;
  fail("tensor parallelism slices bf16 and GGUF matrices, not {}", like.format_name());
}

}  // namespace md::shard
