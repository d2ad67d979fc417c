#include "runtime/Calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <unistd.h>
#include <sstream>
#include <vector>

#include "backend/jit/JitEngine.h"
#include "ir/Einsum.h"
#include "ir/Function.h"
#include "ir/GradRules.h"
#include "frontend/Frontend.h"
#include "passes/Pipeline.h"
#include "runtime/Host.h"
#include "runtime/MpiComm.h"
#include "runtime/ThreadComm.h"

namespace gsl::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of f: one untimed call, then `rounds` rounds of `reps`
// calls each, the median round.
double perCall(const std::function<void()>& f, int rounds, int reps) {
  f();
  std::vector<double> r;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = Clock::now();
    for (int k = 0; k < reps; ++k) f();
    r.push_back(since(t0) / reps);
  }
  return median(r);
}

// A tensor of 0.25 (the rates do not depend on the values; no denormals).
backend::Tensor filled(const ir::Shape& s) {
  backend::Tensor t(ir::TensorType{ir::DType::F32, s});
  std::fill(t.f32(), t.f32() + t.size(), 0.25f);
  return t;
}

// Appends op `k` to `f`, typed by the op table (ir::GradBuilder).
ir::Value* append(ir::Function& f, ir::OpKind k, std::vector<ir::Value*> in, ir::AttrMap at = {}) {
  return ir::GradBuilder(f).op(k, std::move(in), std::move(at));
}

std::string cpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t c = line.find(':');
      if (c == std::string::npos) break;
      size_t b = line.find_first_not_of(" \t", c + 1);
      return b == std::string::npos ? "" : line.substr(b);
    }
  return "";
}

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

void measureCompute(passes::MachineModel& m, bool quick, std::ostream& log) {
  backend::KernelContext ctx;
  auto jit = backend::makeJitEngine(ctx, backend::jitOptionsFromEnvironment());
  std::vector<std::unique_ptr<ir::Function>> fns;  // alive as long as the engine (it keys by address)
  auto fresh = [&](const char* name) -> ir::Function& {
    fns.push_back(std::make_unique<ir::Function>());
    fns.back()->name = name;
    return *fns.back();
  };
  const int rounds = quick ? 3 : 7;
  char buf[160];

  // GEMMs, one representative shape per class (passes::gemmClassOf).
  struct Shape3 {
    int64_t batch, m, k, n;
  };
  const Shape3 shapes[passes::kGemmClasses] = {
      quick ? Shape3{1, 256, 256, 256} : Shape3{1, 512, 512, 512},  // large
      {1, 64, 512, 512},                                          // skinny: M = 64 rows
      {quick ? 16 : 64, 16, 64, 16},                              // small: per-head products
  };
  for (int c = 0; c < passes::kGemmClasses; ++c) {
    const auto [b, mm, k, n] = shapes[c];
    ir::Function& f = fresh("calibrate_gemm");
    ir::Value* x = f.addArg({ir::DType::F32, {b, mm, k}});
    ir::Value* y = f.addArg({ir::DType::F32, {b, k, n}});
    ir::AttrMap at;
    at.set("spec", ir::einsumSpec("bmk,bkn->bmn", 2));
    f.results = {append(f, ir::OpKind::Einsum, {x, y}, at)};
    const std::vector<backend::Tensor> args{filled({b, mm, k}), filled({b, k, n})};
    const double flops = 2.0 * (double)(b * mm * k * n);
    const int reps = std::max(1, (int)(2e8 / flops));
    const double s = perCall([&] { jit->call(f, args); }, rounds, quick ? std::max(1, reps / 4) : reps);
    m.gemmFlopsPerS[c] = flops / s;
    std::snprintf(buf, sizeof buf, "  GEMM %-6s %lldx%lldx%lld (x%lld): %.1f GFLOP/s\n",
                  passes::gemmClassName((passes::GemmClass)c), (long long)mm, (long long)k, (long long)n,
                  (long long)b, m.gemmFlopsPerS[c] / 1e9);
    log << buf;
  }

  // Elementwise: gelu(x * w + b) over 64K floats (in cache: the rate of
  // the math; three ops, which the cost model counts as 3 FLOPs an element).
  {
    const int64_t n = 1 << 16;
    ir::Function& f = fresh("calibrate_chain");
    ir::Value* x = f.addArg({ir::DType::F32, {n}});
    ir::Value* w = f.addArg({ir::DType::F32, {n}});
    ir::Value* b = f.addArg({ir::DType::F32, {n}});
    f.results = {append(f, ir::OpKind::Gelu, {append(f, ir::OpKind::Add, {append(f, ir::OpKind::Mul, {x, w}), b})})};
    const std::vector<backend::Tensor> args{filled({n}), filled({n}), filled({n})};
    const double s = perCall([&] { jit->call(f, args); }, rounds, quick ? 20 : 200);
    m.elementwiseFlopsPerS = 3.0 * (double)n / s;
    std::snprintf(buf, sizeof buf, "  elementwise (gelu(x * w + b), in cache): %.2f GFLOP/s\n",
                  m.elementwiseFlopsPerS / 1e9);
    log << buf;
  }
  // Memory: x + y over 16 MiB operands (three streams beyond the caches).
  {
    const int64_t n = quick ? (1 << 20) : (1 << 22);
    ir::Function& f = fresh("calibrate_add");
    f.results = {append(f, ir::OpKind::Add, {f.addArg({ir::DType::F32, {n}}), f.addArg({ir::DType::F32, {n}})})};
    const std::vector<backend::Tensor> args{filled({n}), filled({n})};
    const double s = perCall([&] { jit->call(f, args); }, rounds, quick ? 3 : 10);
    m.memoryBytesPerS = 3.0 * 4.0 * (double)n / s;
    std::snprintf(buf, sizeof buf, "  memory (x + y, %lld MiB operands): %.1f GB/s\n", (long long)(n * 4 >> 20),
                  m.memoryBytesPerS / 1e9);
    log << buf;
  }
  // Cache: x + y over 32K floats (384 KiB moved: MachineModel::kCacheBytes
  // and below move at this rate).
  {
    const int64_t n = 1 << 15;
    ir::Function& f = fresh("calibrate_add_cached");
    f.results = {append(f, ir::OpKind::Add, {f.addArg({ir::DType::F32, {n}}), f.addArg({ir::DType::F32, {n}})})};
    const std::vector<backend::Tensor> args{filled({n}), filled({n})};
    const double s = perCall([&] { jit->call(f, args); }, rounds, quick ? 50 : 500);
    m.cacheBytesPerS = 3.0 * 4.0 * (double)n / s;
    std::snprintf(buf, sizeof buf, "  cache (x + y, 128 KiB operands): %.1f GB/s\n", m.cacheBytesPerS / 1e9);
    log << buf;
  }
  // Per-op overhead: 32 dependent 4x4 matmuls (no fusion between them).
  {
    ir::Function& f = fresh("calibrate_overhead");
    ir::Value* x = f.addArg({ir::DType::F32, {4, 4}});
    ir::Value* w = f.addArg({ir::DType::F32, {4, 4}});
    ir::Value* y = x;
    for (int i = 0; i < 32; ++i) y = append(f, ir::OpKind::MatMul, {y, w});
    f.results = {y};
    ir::Function& one = fresh("calibrate_overhead_one");
    ir::Value* x1 = one.addArg({ir::DType::F32, {4, 4}});
    one.results = {append(one, ir::OpKind::MatMul, {x1, one.addArg({ir::DType::F32, {4, 4}})})};
    const std::vector<backend::Tensor> args{filled({4, 4}), filled({4, 4})};
    const double s32 = perCall([&] { jit->call(f, args); }, rounds, quick ? 50 : 500);
    const double s1 = perCall([&] { jit->call(one, args); }, rounds, quick ? 50 : 500);
    m.opOverheadS = std::max(0.0, (s32 - s1) / 31);
    std::snprintf(buf, sizeof buf, "  per-op overhead: %.1f ns\n", m.opOverheadS * 1e9);
    log << buf;
  }
  // Per call of a tensor function from fn main: a training loop of a
  // four-element model (the host script, the batch, the optimizer's step
  // as gsl run runs them), its time per step above a loop of one step.
  {
    const char* program =
        "const STEPS = 1\n"
        "param w: f32[4] = zeros\n"
        "optimizer opt = sgd(lr=0.1)\n"
        "fn loss(x: f32[4]) -> f32 {\n  return sum(x * w)\n}\n"
        "fn main() {\n  let x = random_uniform([4], 3)\n"
        "  for step in 0..STEPS {\n    let l = opt.minimize(loss, x)\n  }\n}\n";
    // The median step of the loop's second half, from its --log.
    const int64_t steps = quick ? 60 : 400;
    SourceManager sm;
    Diagnostics diags(sm);
    frontend::Options fo;
    fo.defines["STEPS"] = steps;
    auto prog = frontend::compileSource("calibrate.gsl", program, fo, sm, diags);
    if (!prog) throw std::logic_error("internal error: gsl calibrate's training program does not compile");
    passes::runGlobalPipeline(*prog->module);
    RunOptions ro;
    ro.progress = false;
    std::ostringstream sink;
    ro.out = &sink;
    char logPath[] = "/tmp/gsl-calibrate-XXXXXX";
    const int fd = mkstemp(logPath);
    if (fd < 0) throw std::runtime_error("gsl calibrate: cannot make a temporary file in /tmp");
    close(fd);
    ro.logPath = logPath;
    const bool ran = runMain(*prog, ro, diags);
    std::vector<double> elapsed;
    {
      std::ifstream in(logPath);
      std::string line;
      while (std::getline(in, line)) elapsed.push_back(nlohmann::json::parse(line).at("elapsed_s").get<double>());
    }
    std::remove(logPath);
    if (!ran || elapsed.size() < 4) throw std::logic_error("internal error: gsl calibrate's training loop failed");
    std::vector<double> per;
    for (size_t i = elapsed.size() / 2; i < elapsed.size(); ++i) per.push_back(elapsed[i] - elapsed[i - 1]);
    m.callOverheadS = median(per);
    std::snprintf(buf, sizeof buf, "  per call from fn main (a training step of 4 params): %.2f us\n",
                  m.callOverheadS * 1e6);
    log << buf;
  }
  m.cpu = cpuName();
  m.date = utcNow();
  m.source = "calibrated";
}

void measureCollectives(backend::Communicator& comm, passes::MachineModel& m, bool quick, std::ostream& log) {
  const int n = comm.size();
  std::vector<int> group(n);
  for (int i = 0; i < n; ++i) group[i] = i;
  std::vector<int64_t> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = (i + n - 1) % n;  // member i receives from i - 1
  const size_t small = 256, large = quick ? (256 << 10) : (4 << 20);
  std::vector<char> send(large), recv(large * (size_t)n);
  std::fill(send.begin(), send.end(), 0);
  const int rounds = quick ? 3 : 7;
  // One kind's seconds per call with an input of `bytes` (what the cost
  // model's volume rule takes: the local input).
  auto timeKind = [&](ir::OpKind k, size_t bytes) {
    const size_t floats = bytes / 4;
    std::function<void()> call;
    switch (k) {
      case ir::OpKind::AllReduce:
        call = [&, floats] { comm.allReduce(group, send.data(), floats, ir::DType::F32, ir::ReduceOp::Sum); };
        break;
      case ir::OpKind::AllGather:
        call = [&, bytes] { comm.allGather(group, send.data(), bytes, recv.data()); };
        break;
      case ir::OpKind::ReduceScatter:  // the input holds n blocks
        call = [&, floats] { comm.reduceScatter(group, send.data(), floats / n, ir::DType::F32, recv.data()); };
        break;
      case ir::OpKind::AllToAll:
        call = [&, bytes] { comm.allToAll(group, send.data(), bytes / n, recv.data()); };
        break;
      default:
        call = [&, bytes] { comm.permute(group, perm, send.data(), bytes, recv.data()); };
        break;
    }
    const int reps = bytes <= small ? (quick ? 20 : 200) : (quick ? 2 : 5);
    return perCall(call, rounds, reps);
  };
  m.collectives.clear();
  m.ranks = n;
  for (ir::OpKind k : {ir::OpKind::AllReduce, ir::OpKind::AllGather, ir::OpKind::ReduceScatter, ir::OpKind::AllToAll,
                       ir::OpKind::CollectivePermute}) {
    const double ts = timeKind(k, small), tl = timeKind(k, large);
    const auto volume = ir::opInfo(k).volume;
    const double bytesSent = (double)volume((uint64_t)n, large);
    passes::LinkModel l;
    l.bytesPerS = bytesSent / std::max(tl - ts, 1e-9);
    l.latencyS = std::max(0.0, ts - (double)volume((uint64_t)n, small) / l.bytesPerS);
    m.collectives[k] = l;
    if (comm.rank() == 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "  %-18s %2d ranks: %7.2f us + %6.2f GB/s\n", ir::opName(k), n, l.latencyS * 1e6,
                    l.bytesPerS / 1e9);
      log << buf;
    }
  }
}

namespace {

// Writes `m` (compute rates and the section of m.transport) to o.dir,
// keeping the file's other transport sections.
int save(const CalibrateOptions& o, const passes::MachineModel& m, std::ostream& out) {
  nlohmann::ordered_json old;
  {
    std::ifstream in(passes::machineModelPath(o.dir));
    if (in) old = nlohmann::ordered_json::parse(in, nullptr, false);
    if (old.is_discarded()) old = nullptr;
  }
  const std::string err = passes::saveMachineModelJson(o.dir, passes::machineModelJson(m, old));
  if (!err.empty()) {
    out << "gsl: error: " << err << "\n";
    return 1;
  }
  out << "wrote " << passes::machineModelPath(o.dir) << "\n";
  return 0;
}

}  // namespace

int calibrateThreads(const CalibrateOptions& o, std::ostream& out) {
  passes::MachineModel m;
  m.transport = "threads";
  out << "calibrating on " << cpuName() << " (one thread for compute, " << o.np << " thread ranks for collectives)\n";
  measureCompute(m, o.quick, out);
  passes::MachineModel links;
  runRanksOrThrow((int)o.np, [&](int rank, backend::Communicator& comm) {
    passes::MachineModel mine;
    measureCollectives(comm, mine, o.quick, out);
    if (rank == 0) links = mine;
  });
  m.collectives = links.collectives;
  m.ranks = links.ranks;
  return save(o, m, out);
}

int calibrateMpiRank(const CalibrateOptions& o, std::ostream& out) {
  MpiComm comm;
  passes::MachineModel m = passes::loadMachineModel(o.dir, "mpi");
  const bool rank0 = comm.rank() == 0;
  if (rank0) out << "calibrating MPI collectives on " << comm.size() << " ranks\n";
  measureCollectives(comm, m, o.quick, out);
  comm.barrier();
  if (!rank0) return 0;
  // No machine file yet: this rank measures the compute rates too.
  if (!m.calibrated()) measureCompute(m, o.quick, out);
  m.transport = "mpi";
  return save(o, m, out);
}

}  // namespace gsl::runtime
