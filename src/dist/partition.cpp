#include "dist/partition.h"

#include <algorithm>

#include "base/error.h"

namespace md::dist {

Range even_part(int64_t total, int parts, int part, int64_t unit) {
  if (parts < 1 || part < 0 || part >= parts || unit < 1 || total < 0 || total % unit != 0) {
    fail("cannot split {} in units of {} into part {} of {}", total, unit, part, parts);
  }
  const int64_t units = total / unit, base = units / parts, extra = units % parts;
  const int64_t begin = part * base + std::min<int64_t>(part, extra);
  const int64_t size = base + (part < extra ? 1 : 0);
  return {begin * unit, (begin + size) * unit};
}

int64_t largest_part(int64_t total, int parts, int64_t unit) {
  return even_part(total, parts, 0, unit).size();
}

}  // namespace md::dist
