// Ranks as MPI processes (communicator.h), on one host or many: whatever mpirun or Slurm's srun
// launched, over whatever transport Open MPI chose (shared memory, TCP, InfiniBand). Collectives
// are MPI_Allgather / MPI_Bcast / MPI_Barrier on a duplicate of MPI_COMM_WORLD, so the engine's
// traffic never mixes with anyone else's. The sum of all_reduce_sum is formed from the gathered
// parts in rank order (Communicator), so MPI ranks and in-process ranks give the same bits.
//
// Built only where MPI was found (MD_HAVE_MPI); mpi_available() says so at run time.
#pragma once

#include <memory>
#include <string>

#include "dist/communicator.h"

namespace md::dist {

// Whether this binary was built with MPI.
bool mpi_available();
// Whether this process is one of several an MPI launcher (mpirun, srun) started: the
// environment variables they set. Cheap, and safe to call before MPI_Init.
bool launched_by_mpi();
// This process's rank as the launcher numbered it (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or
// SLURM_PROCID), before MPI_Init; -1 when none is set. Lets the other ranks skip what only rank 0
// does (listening on the server's port) before the model is loaded.
int launcher_rank();

// MPI_Init_thread on construction (collectives may come from any one worker thread at a time:
// MPI_THREAD_SERIALIZED), MPI_Finalize on destruction. One per process. Throws md::Error when the
// binary has no MPI or the library refuses.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // The world's ranks as a Communicator (valid while the session lives).
  Communicator& world();

 private:
  class World;
  std::unique_ptr<World> world_;
};

}  // namespace md::dist
