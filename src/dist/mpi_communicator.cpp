#include "dist/mpi_communicator.h"

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "base/error.h"

#if defined(MD_HAVE_MPI)
#include <mpi.h>
#endif

namespace md::dist {

bool mpi_available() {
#if defined(MD_HAVE_MPI)
  return true;
#else
  return false;
#endif
}

bool launched_by_mpi() {
  // Open MPI's mpirun, and Slurm's srun with PMI / PMIx: a job of more than one process (one
  // process under a launcher runs its ranks in-process, as without one).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}) {
    if (const char* value = std::getenv(name); value != nullptr && std::atoi(value) > 1) {
      return true;
    }
  }
  return false;
}

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != 0) {
      return std::atoi(value);
    }
  }
  return -1;
}

#if defined(MD_HAVE_MPI)

namespace {

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, message, &length);
  fail("{} failed: {}", what, std::string(message, static_cast<std::size_t>(length)));
}

int count_of(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    fail("a collective of {} bytes is larger than MPI's int count", bytes);
  }
  return static_cast<int>(bytes);
}

}  // namespace

class MpiSession::World final : public Communicator {
 public:
  World() {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    // Errors come back as codes, which check() turns into md::Error with MPI's message.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~World() override { MPI_Comm_free(&comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string transport() const override { return "mpi"; }

  void all_gather(const void* in, std::size_t bytes, void* out) override {
    const int count = count_of(bytes);
    check(MPI_Allgather(in, count, MPI_BYTE, out, count, MPI_BYTE, comm_), "MPI_Allgather");
  }
  void broadcast(void* data, std::size_t bytes, int root) override {
    if (root < 0 || root >= size_) fail("broadcast from rank {} of {}", root, size_);
    check(MPI_Bcast(data, count_of(bytes), MPI_BYTE, root, comm_), "MPI_Bcast");
  }
  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }
  [[noreturn]] void abort(const std::string& why) override {
    // mpirun ends every rank of the job; the message is the one clue left behind.
    std::fprintf(stderr, "megadecode: rank %d failed: %s\n", rank_, why.c_str());
    std::fflush(stderr);
    MPI_Abort(comm_, 1);
    std::abort();
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

MpiSession::MpiSession() {
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    fail("the MPI library offers thread level {}, megadecode needs MPI_THREAD_SERIALIZED",
         provided);
  }
  world_ = std::make_unique<World>();
}

MpiSession::~MpiSession() {
  world_.reset();
  MPI_Finalize();
}

#else

class MpiSession::World {};

MpiSession::MpiSession() {
  fail("this megadecode was built without MPI (install libopenmpi-dev and rebuild: scripts/setup)");
}

MpiSession::~MpiSession() = default;

#endif

Communicator& MpiSession::world() {
#if defined(MD_HAVE_MPI)
  return *world_;
#else
  fail("this megadecode was built without MPI");
#endif
}

}  // namespace md::dist
