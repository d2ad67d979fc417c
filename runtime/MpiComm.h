// Communication between ranks that are OpenMPI processes (MPI_COMM_WORLD).
//
// A group is a sub-communicator created on first use and cached by the
// group's rank list (MPI_Comm_create_group: collective over the group's
// members only, so it needs no assumption about what the other ranks do).
// Before each collective the members exchange a small signature of their
// call (kind, size, dtype, reduction, perm), so a mismatched call throws
// CommError on every member instead of corrupting memory or hanging, as a
// mismatched MPI collective would. MPI errors are returned (not fatal) and
// become CommError. abort(why) prints "gsl: rank R failed: why" and calls
// MPI_Abort, which ends every rank of the mpirun.
//
// This header does not include <mpi.h>.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/Communicator.h"

namespace gsl::runtime {

// MPI_Init_thread (MPI_THREAD_FUNNELED) on construction unless MPI is
// already initialised; MPI_Finalize on destruction if it initialised MPI.
// MpiSession::ensure() initialises MPI on first use with MPI_Finalize at
// exit, for code that does not own a session object.
class MpiSession {
 public:
  MpiSession(int* argc = nullptr, char*** argv = nullptr);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  static void ensure();
  // True when this process was started by mpirun/mpiexec (OpenMPI or PMIx
  // environment variables are set).
  static bool launchedByMpirun();
  // The number of ranks of MPI_COMM_WORLD (initialises MPI: ensure()).
  static int worldSize();
  // This process's rank in MPI_COMM_WORLD (initialises MPI: ensure()).
  static int worldRank();
  // This machine's host name (gethostname), as errors about files that
  // one host lacks name it.
  static std::string hostName();

 private:
  bool owner_ = false;
};

class MpiComm : public backend::Communicator {
 public:
  // Initialises MPI if needed (MpiSession::ensure).
  MpiComm();
  ~MpiComm() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void barrier() override;
  [[noreturn]] void abort(const std::string& why) override;

  // Whether calls are checked for matching kind and size (default on; one
  // small extra all-gather per collective).
  void setCheckCalls(bool on) { checkCalls_ = on; }

  // True on every rank when `mine` is true on any rank (one all-reduce of
  // an int over MPI_COMM_WORLD; not counted in `stats`). Every rank must
  // call it at the same point of the program.
  bool anyRank(bool mine);

 private:
  // The transports (backend/Communicator.h says what each computes).
  void runAllGather(const std::vector<int>& group, const void* send, size_t bytes, void* recv) override;
  void runAllReduce(const std::vector<int>& group, void* data, size_t count, ir::DType dt,
                 backend::ReduceOp op) override;
  void runReduceScatter(const std::vector<int>& group, const void* send, size_t count, ir::DType dt,
                     void* recv) override;
  void runAllToAll(const std::vector<int>& group, const void* send, size_t bytes, void* recv) override;
  void runPermute(const std::vector<int>& group, const std::vector<int64_t>& perm, const void* send,
               size_t bytes, void* recv) override;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1;
  bool checkCalls_ = true;
};

}  // namespace gsl::runtime
