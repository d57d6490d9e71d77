// The ranks of one tensor-parallel model (ARCHITECTURE.md "Tensor parallelism"): what the step
// programs' collective instructions call. Two transports implement it — ranks as threads of one
// process (in_process_group.h) and ranks as MPI processes on one or many hosts
// (mpi_communicator.h) — and both give every rank the same bits: a sum is formed by each rank
// from every rank's part, in rank order, never by the transport's own reduction (whose order an
// MPI library chooses by message size and topology).
//
// Every rank calls the same collectives in the same order; each returns once its rank has what
// it asked for. A rank that fails calls abort(): the others' pending and later collectives throw
// md::Error naming it instead of waiting forever.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace md::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "in-process" or "mpi", for messages and bench.
  virtual std::string transport() const = 0;

  // Every rank's `bytes` bytes from `in`, rank r's at out[r · bytes] (`out` holds size() · bytes;
  // it may not overlap `in`).
  virtual void all_gather(const void* in, std::size_t bytes, void* out) = 0;
  // Rank `root`'s `bytes` bytes of `data` into every rank's `data`.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;
  // Makes every rank's collectives fail with `why` (naming this rank); for a rank that cannot go
  // on. Does not return on MPI (the job ends); returns on in-process ranks.
  virtual void abort(const std::string& why) = 0;

  // Σ over ranks of `n` floats at `data`, in place: rank 0's part + rank 1's + …, left to right,
  // on every rank, so that every rank holds the same bits whatever the transport.
  void all_reduce_sum(float* data, int64_t n);

 private:
  std::vector<float> gathered_;  // all_reduce_sum's [size][n]
};

// Whether `ranks` (null: a model on its own) makes a model tensor-parallel: more than one rank.
inline bool tensor_parallel(const Communicator* ranks) {
  return ranks != nullptr && ranks->size() > 1;
}

}  // namespace md::dist
