// How a run's functions get compiled: the compile-ahead threads, and the
// compile line on a terminal.
#include "runtime/CompileAhead.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <utility>

#include "backend/jit/JitEngine.h"
#include "runtime/HostWalk.h"

namespace gsl::runtime {

namespace {

// The walk's list: every per-rank program, once, in the order met.
struct List : ShardingWalk {
  explicit List(SpmdProgram& spmd) : ShardingWalk(spmd.programs()) {}
  std::vector<const ir::Function*> functions;
  void visit(const Thunk&, const ir::Function& f, bool, const std::vector<std::optional<ir::Sharding>>&) override {
    if (std::find(functions.begin(), functions.end(), &f) == functions.end()) functions.push_back(&f);
  }
};

}  // namespace

CompileAhead::CompileAhead(SpmdProgram& spmd, const frontend::CheckedProgram& prog, const backend::JitOptions& jit,
                           std::vector<trace::Recorder>& tracks)
    : lead_([this, &spmd, &prog, jit, &tracks] {
        auto track = [&](size_t t) { return t < tracks.size() ? &tracks[t] : nullptr; };
        trace::current = track(0);
        List walk(spmd);
        try {
          walk.walk(prog.host.body);
        } catch (...) {
          // The rank that meets the same error reports it.
        }
        std::atomic<size_t> next{0};
        auto work = [&] {
          for (size_t i; !stop_ && (i = next++) < walk.functions.size();)
            backend::jitCompileAhead(*walk.functions[i], jit);
        };
        std::vector<std::thread> more;
        for (size_t t = 1; t < std::min(threads(), walk.functions.size()); ++t)
          more.emplace_back([&, t] {
            trace::current = track(t);
            work();
            trace::current = nullptr;
          });
        work();
        for (std::thread& t : more) t.join();
        trace::current = nullptr;
      }) {}

void showCompilation(const RunOptions& opts) {
  const char* mpiRank = std::getenv("OMPI_COMM_WORLD_RANK");
  bool first = !opts.mpi || !mpiRank || std::string(mpiRank) == "0";
  if (!opts.progress || opts.engine != Engine::Jit || !first || !isatty(2)) {
    backend::setJitCompileObserver(nullptr);
    return;
  }
  // Functions compile on several threads at once (the ranks' and the
  // compile-ahead thread): each function's line is written whole when it is
  // ready, and the last one started shows, unfinished, meanwhile.
  backend::setJitCompileObserver([](const backend::JitCompileEvent& e) {
    static std::mutex m;
    static std::vector<std::pair<std::string, std::string>> pending;  // function, its line's start
    std::lock_guard<std::mutex> lock(m);
    std::string ops = std::to_string(e.ops);
    for (int i = (int)ops.size() - 3; i > 0; i -= 3) ops.insert((size_t)i, ",");
    const std::string head = "compiling " + e.function + " (rank program, " + ops + " ops)... ";
    if (!e.done) {
      pending.emplace_back(e.function, head);
      std::cerr << "\r\033[K" << head << std::flush;
      return;
    }
    auto it = std::find_if(pending.begin(), pending.end(), [&](const auto& p) { return p.first == e.function; });
    if (it != pending.end()) pending.erase(it);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f s", e.seconds);
    std::cerr << "\r\033[K" << head << (e.loaded ? "loaded from cache, " : "") << buf << "\n";
    if (!pending.empty()) std::cerr << pending.back().second;
    std::cerr << std::flush;
  });
}

}  // namespace gsl::runtime
