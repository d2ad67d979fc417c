// Stopping a run cleanly on a signal (Ctrl-C), and temp files that a forced
// exit removes.
//
// installInterruptHandler(sig, ...) makes the first `sig` only set a
// process-wide flag: long-running code polls interruptRequested() at safe
// points (between host statements, between the tensors of a checkpoint
// being written) and throws Interrupted, so every rank unwinds normally,
// temp files are removed and finished files stay as they are. A second
// `sig` is a forced stop: the handler removes the registered temp files
// (TempFileGuard), writes its message and _exits with the given status.
//
// The flag and the handlers are async-signal-safe (a lock-free atomic, a
// fixed table of paths, write/unlink/_exit only).
#pragma once
#include <exception>
#include <string>

namespace gsl {

// Thrown where a run notices the interrupt flag. Deliberately not a
// std::runtime_error, so handlers of ordinary errors let it pass.
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted"; }
};

// The first `sig` sets the flag; the second removes registered temp files,
// writes `forcedMessage` (may be empty) to stderr and calls _exit(forcedStatus).
void installInterruptHandler(int sig, const char* forcedMessage, int forcedStatus);

bool interruptRequested();
// Sets the flag as the first signal would (tests, and forwarding).
void requestInterrupt();
// Clears the flag (tests).
void clearInterrupt();
// Throws Interrupted when the flag is set.
void throwIfInterrupted();

// Registers `path` (a temp file being written) for removal by a forced
// exit for the lifetime of the guard. At most 16 at a time; more are not
// registered (they are still removed on every normal path by their writer).
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& path);
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  int slot_ = -1;
};

}  // namespace gsl
