#include "models/common/recording_binder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/error.h"

namespace md {

void RecordingBinder::refuse_unbound() const {
  const Checkpoint& checkpoint = bind_.checkpoint();
  std::vector<std::string> extra;
  for (const TensorView& tensor : checkpoint.tensors()) {
    if (!bound_.contains(tensor.name)) extra.emplace_back(tensor.name);
  }
  if (extra.empty()) return;
  std::size_t shown = std::min<std::size_t>(extra.size(), 5);
  fail("checkpoint {}: {} tensor(s) that the {} config does not account for: '{}'{}",
       checkpoint.path(), extra.size(), family_,
       fmt::join(extra.begin(), extra.begin() + static_cast<std::ptrdiff_t>(shown), "', '"),
       extra.size() > shown ? ", ..." : "");
}

}  // namespace md
