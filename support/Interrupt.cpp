#include "support/Interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace gsl {

namespace {

static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

std::atomic<int> g_signals{0};  // signals received (or requests)

constexpr int kSlots = 16;
constexpr size_t kPathMax = 4096;
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 holds a path
  char path[kPathMax];
};
Slot g_slots[kSlots];

const char* g_forcedMessage = "";
int g_forcedStatus = 130;

void removeTempFiles() {
  for (Slot& s : g_slots)
    if (s.state.load() == 2) ::unlink(s.path);
}

void onSignal(int) {
  if (g_signals.fetch_add(1) == 0) return;  // the first: polled at the next safe point
  removeTempFiles();
  if (g_forcedMessage[0]) {
    ssize_t ignored = ::write(2, g_forcedMessage, std::strlen(g_forcedMessage));
    (void)ignored;
  }
  ::_exit(g_forcedStatus);
}

}  // namespace

void installInterruptHandler(int sig, const char* forcedMessage, int forcedStatus) {
  g_forcedMessage = forcedMessage ? forcedMessage : "";
  g_forcedStatus = forcedStatus;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, nullptr);
}

bool interruptRequested() { return g_signals.load(std::memory_order_relaxed) != 0; }

void requestInterrupt() { g_signals.fetch_add(1); }

void clearInterrupt() { g_signals.store(0); }

void throwIfInterrupted() {
  if (interruptRequested()) throw Interrupted();
}

TempFileGuard::TempFileGuard(const std::string& path) {
  if (path.size() >= kPathMax) return;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(2);
      slot_ = i;
      return;
    }
  }
}

TempFileGuard::~TempFileGuard() {
  if (slot_ >= 0) g_slots[slot_].state.store(0);
}

}  // namespace gsl
