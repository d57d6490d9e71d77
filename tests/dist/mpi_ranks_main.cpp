// MPI ranks as real processes (dist/mpi_communicator.h), run by ctest under mpirun over TCP:
//   md_mpi_ranks collectives — all-gather, broadcast and all-reduce give every rank what it asked
//                              for, the sum in rank order with the same bits on every rank;
//   md_mpi_ranks abort       — rank 1 aborts while rank 0 waits: the job must end, non-zero,
//                              with rank 1's message (mpi_abort_check.py checks that).
// Exits 0 when every check held; prints each failed check.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "dist/mpi_communicator.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  ++failures;
}

float part(int rank, int i) {
  const float scales[] = {1.0f, 3.0e-8f, -1.0f, 7.0e7f};
  return scales[(rank + i) % 4] * (1.0f + 0.1f * static_cast<float>(rank * 31 + i));
}

void collectives(md::dist::Communicator& c) {
  const int ranks = c.size(), me = c.rank();
  expect(c.transport() == "mpi", "transport");
  const int32_t mine[2] = {me * 10, me * 10 + 1};
  std::vector<int32_t> gathered(static_cast<std::size_t>(2 * ranks));
  c.all_gather(mine, sizeof mine, gathered.data());
  for (int s = 0; s < ranks; ++s) {
    expect(gathered[static_cast<std::size_t>(2 * s)] == s * 10 &&
               gathered[static_cast<std::size_t>(2 * s + 1)] == s * 10 + 1,
           "all_gather from rank " + std::to_string(s));
  }
  int64_t value = me == ranks - 1 ? 4242 : -1;
  c.broadcast(&value, sizeof value, ranks - 1);
  expect(value == 4242, "broadcast");

  constexpr int kN = 37;
  std::vector<float> data(kN);
  for (int i = 0; i < kN; ++i) data[static_cast<std::size_t>(i)] = part(me, i);
  c.all_reduce_sum(data.data(), kN);
  for (int i = 0; i < kN; ++i) {
    float left_to_right = part(0, i);
    for (int r = 1; r < ranks; ++r) left_to_right += part(r, i);
    expect(std::memcmp(&data[static_cast<std::size_t>(i)], &left_to_right, sizeof(float)) == 0,
           "all_reduce_sum value " + std::to_string(i) + " in rank order");
  }
  // Every rank holds the same bits: rank 0's result against everyone's.
  std::vector<float> everyone(static_cast<std::size_t>(ranks * kN));
  c.all_gather(data.data(), kN * sizeof(float), everyone.data());
  for (int r = 1; r < ranks; ++r) {
    expect(std::memcmp(everyone.data(), everyone.data() + r * kN, kN * sizeof(float)) == 0,
           "rank " + std::to_string(r) + " holds rank 0's sum");
  }
  c.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    md::dist::MpiSession session;
    md::dist::Communicator& world = session.world();
    if (mode == "collectives") {
      for (int round = 0; round < 50; ++round) collectives(world);
    } else if (mode == "abort") {
      world.barrier();
      if (world.rank() == 1) world.abort("test abort while rank 0 waits");
      world.barrier();  // rank 0 waits here until mpirun ends the job
      std::fprintf(stderr, "FAILED: rank %d passed a barrier rank 1 never reached\n", world.rank());
      return 1;
    } else {
      std::fprintf(stderr, "usage: md_mpi_ranks collectives|abort\n");
      return 2;
    }
    if (failures > 0) {
      std::fprintf(stderr, "rank %d: %d checks failed\n", world.rank(), failures);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "md_mpi_ranks: %s\n", e.what());
    return 1;
  }
  return 0;
}
