#include "models/common/pack_writer.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/error.h"
#include "io/content_hash.h"

namespace md {

namespace {

std::uint64_t aligned(std::uint64_t offset) {
  return (offset + kPackAlignment - 1) / kPackAlignment * kPackAlignment;
}

std::uint64_t dense_bytes(const kernels::WeightMatrix& m) {
  return static_cast<std::uint64_t>(m.rows) * shard::dense_row_bytes(m, m.cols);
}

}  // namespace

kernels::WeightMatrix PackWriter::slice(const kernels::WeightMatrix& whole,
                                        const shard::SliceRequest& request,
                                        shard::OwnedBytes& owned, const std::string& model) {
  if (!keys_.insert(request.key).second) {
    fail("{}: the shard asks for slice \"{}\" twice", model, request.key);
  }
  kernels::WeightMatrix m = shard::cut(whole, request, owned, model);
  recorded_.push_back(
      {request.key, request.cut, {request.ranges.begin(), request.ranges.end()}, m});
  return m;
}

std::uint64_t PackWriter::file_bytes() const {
  std::uint64_t end = 0;
  for (const Recorded& r : recorded_) end = aligned(end) + dense_bytes(r.matrix);
  return end;
}

PackRank PackWriter::write(const std::filesystem::path& file, const Progress& progress) const {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) fail("{}: cannot create ({})", file.string(), std::strerror(errno));
  PackRank rank;
  rank.file = file.filename().string();
  const std::uint64_t total = file_bytes();
  constexpr std::uint64_t kReportEvery = std::uint64_t{16} << 20;
  std::uint64_t at = 0, reported = 0;
  static const char zeros[kPackAlignment] = {};
  progress(0, total);
  for (const Recorded& r : recorded_) {
    const std::uint64_t start = aligned(at);
    out.write(zeros, static_cast<std::streamsize>(start - at));
    const kernels::WeightMatrix& m = r.matrix;
    const std::size_t row_bytes = shard::dense_row_bytes(m, m.cols);
    ContentHasher hash;
    for (int64_t row = 0; row < m.rows; ++row) {
      out.write(reinterpret_cast<const char*>(m.row(row)), static_cast<std::streamsize>(row_bytes));
      hash.add(m.row(row), row_bytes);
      at = start + static_cast<std::uint64_t>(row + 1) * row_bytes;
      if (at - reported >= kReportEvery) {
        progress(at, total);
        reported = at;
      }
    }
    if (!out) fail("{}: cannot write ({})", file.string(), std::strerror(errno));
    PackTensor t;
    t.key = r.key;
    t.cut = shard::cut_name(r.cut);
    for (const dist::Range& range : r.ranges) t.ranges.push_back({range.begin, range.end});
    t.format = shard::stored_format(m);
    t.rows = m.rows;
    t.cols = m.cols;
    t.row_bytes = row_bytes;
    t.offset = start;
    t.bytes = static_cast<std::uint64_t>(m.rows) * row_bytes;
    t.xxh3 = hex64(hash.value());
    rank.tensors.push_back(std::move(t));
    at = start + rank.tensors.back().bytes;
  }
  out.close();
  if (!out) fail("{}: cannot write ({})", file.string(), std::strerror(errno));
  rank.bytes = at;
  progress(at, total);
  return rank;
}

}  // namespace md
