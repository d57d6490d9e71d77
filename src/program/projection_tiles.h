// How a projection's output rows are cut into the tasks of a program instruction (every model's
// step uses it). Results never depend on the cut — the matmul kernels reduce each output in a
// fixed order — only speed does.
#pragma once

#include <algorithm>
#include <cstdint>

namespace md::program {

// Each tile re-derives its input (the norm prologue, the q8 quantisation) and starts its weight
// stream cold: on SmolLM2 in the q8 mode, 128-row tiles decoded 5-10% faster than 64 (interleaved
// runs, 2 threads); 256 was within the noise of 128.
inline constexpr int64_t kMaxTileRows = 128;
inline constexpr int64_t kTilesPerWorker = 4;

// Output rows per task: big enough to stream weights efficiently, small enough that every worker
// gets several tiles of even small matrices. Tiles are multiples of `grain` (a kernel's register
// block, so that no tile pays for a ragged one), at least max(grain, 8) and at most kMaxTileRows
// rows, and never more than the matrix has.
inline int64_t projection_tile_rows(int64_t rows, int workers, int64_t grain = 1) {
  int64_t tile = rows / (kTilesPerWorker * static_cast<int64_t>(workers)) / grain * grain;
  tile = std::clamp<int64_t>(tile, std::max<int64_t>(grain, 8), kMaxTileRows);
  return std::min(tile, rows);
}

}  // namespace md::program
