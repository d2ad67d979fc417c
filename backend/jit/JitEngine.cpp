// The JIT engine: one process-wide LLJIT, an in-process cache of compiled
// functions, the persistent object cache (ObjectCache.h) behind it, and
// the Engine that calls compiled code.
#include "backend/jit/JitEngine.h"
#include "backend/jit/BF16Gemm.h"

#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/xxhash.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/Utils/SplitModule.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend/jit/Codegen.h"
#include "backend/jit/Emitter.h"
#include "backend/jit/ObjectCache.h"
#include "backend/jit/OpLowering.h"
#include "backend/jit/Runtime.h"
#include "ir/Printer.h"
#include "support/Diagnostics.h"
#include "support/Trace.h"

namespace gsl::backend {

namespace {

using jit::ResultSource;

template <class T>
T expect(llvm::Expected<T> v, const char* what) {
  if (!v) {
    std::string msg = llvm::toString(v.takeError());
    GSL_ASSERT(false, std::string("jit: ") + what + ": " + msg);
  }
  return std::move(*v);
}

void expect(llvm::Error e, const char* what) {
  if (e) GSL_ASSERT(false, std::string("jit: ") + what + ": " + llvm::toString(std::move(e)));
}

// A compiled function, shared by every engine and thread of the process.
struct Compiled {
  jit::CompiledFn fn = nullptr;
  size_t peakBytes = 0;
  std::vector<ResultSource> results;
};

// 32 hex digits of the 128-bit xxh3 hash of `bytes`.
std::string hash128(std::string_view bytes) {
  llvm::XXH128_hash_t h =
      llvm::xxh3_128bits(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
  return buf;
}

// The in-process key of `f`: a hash of its printed IR. ir::printFunction
// renumbers values (it writes ids), so concurrent callers are serialised;
// each engine computes it once per function (JitEngine::call).
std::string functionKey(const ir::Function& f) {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  return hash128(ir::printFunction(const_cast<ir::Function&>(f)));
}

// Bumped whenever the optimisation pipeline or the object format changes
// in a way the generated LLVM IR does not show.
// (2: the objects of a module's code generation parts, packed, packObjects;
// 3: markStreamingStores after the pipeline.)
constexpr const char* kPipelineVersion = "parts-3";

// Several object files as one cache entry: "gsl-objects N\n", then per
// object its size in decimal and "\n", then the objects' bytes in order.
std::string packObjects(const std::vector<std::string>& objects) {
  std::string s = "gsl-objects " + std::to_string(objects.size()) + "\n";
  for (const std::string& o : objects) s += std::to_string(o.size()) + "\n";
  for (const std::string& o : objects) s += o;
  return s;
}

// The inverse of packObjects; false if `blob` is not such a pack (the
// cache's checksum makes that an internal error, but a foreign entry
// written by another version with the same key must not crash).
bool unpackObjects(const std::string& blob, std::vector<std::string>& objects) {
  objects.clear();
  const std::string magic = "gsl-objects ";
  if (blob.compare(0, magic.size(), magic) != 0) return false;
  size_t pos = magic.size();
  auto number = [&](uint64_t& v) {
    size_t end = blob.find('\n', pos);
    if (end == std::string::npos || end == pos || end - pos > 19) return false;
    v = 0;
    for (size_t i = pos; i < end; ++i) {
      if (blob[i] < '0' || blob[i] > '9') return false;
      v = v * 10 + uint64_t(blob[i] - '0');
    }
    pos = end + 1;
    return true;
  };
  uint64_t n = 0;
  if (!number(n) || n == 0 || n > 1024) return false;
  std::vector<uint64_t> sizes(n);
  for (uint64_t& z : sizes)
    if (!number(z)) return false;
  for (uint64_t z : sizes) {
    if (z > blob.size() - pos) return false;
    objects.push_back(blob.substr(pos, z));
    pos += z;
  }
  return pos == blob.size();
}

std::string optionsText(const JitOptions& o) {
  std::string s = "gemm=" + std::to_string(int(o.gemm)) + ";dot=" + std::to_string(o.dotLoopMacs) +
                  ";vw=" + std::to_string(o.vectorWidth) + ";fallback=";
  for (ir::OpKind k : o.fallbackOps) s += std::to_string(int(k)) + ",";
  s += ";opt=" + std::to_string(o.optLevel) + ";codegen=" + std::to_string(o.codegenLevel);
  if (o.bf16Dot > 0) s += ";bf16dot";
  if (o.profileKernels) s += ";profile";
  return s;
}

JitCompileObserver& observer() {
  static JitCompileObserver o;
  return o;
}

// f32 lanes of the host's widest vector registers: 16 with AVX-512, 8 with
// AVX, 4 otherwise (from the features the JIT's target machine is built
// with; no target machine needed).
int hostVectorWidth() {
  static const int width = [] {
    auto jtmb = expect(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host CPU");
    const std::string features = jtmb.getFeatures().getString();
    return features.find("+avx512f") != std::string::npos ? 16 : features.find("+avx") != std::string::npos ? 8 : 4;
  }();
  return width;
}

// `opts` with its vector width resolved against the host: 0 becomes the
// host's widest, a request is narrowed to it.
JitOptions resolve(const JitOptions& opts) {
  GSL_ASSERT(opts.vectorWidth == 0 || opts.vectorWidth == 4 || opts.vectorWidth == 8 || opts.vectorWidth == 16,
             "jit: JitOptions::vectorWidth must be 0, 4, 8 or 16, got " + std::to_string(opts.vectorWidth));
  GSL_ASSERT(opts.optLevel >= 1 && opts.optLevel <= 3,
             "jit: JitOptions::optLevel must be 1, 2 or 3, got " + std::to_string(opts.optLevel));
  GSL_ASSERT(opts.codegenLevel >= 0 && opts.codegenLevel <= 3,
             "jit: JitOptions::codegenLevel must be 0 to 3, got " + std::to_string(opts.codegenLevel));
  JitOptions r = opts;
  r.vectorWidth = opts.vectorWidth ? std::min(opts.vectorWidth, hostVectorWidth()) : hostVectorWidth();
  GSL_ASSERT(opts.compileThreads >= 0, "jit: JitOptions::compileThreads must be at least 0");
  if (!r.compileThreads) r.compileThreads = (int)std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  r.bf16Dot = opts.bf16Dot != 0 && jit::cpuHasAvx512Bf16() ? 1 : 0;
  return r;
}

// `gsl run --perf-map` (jitWritePerfMap): every function linked into the
// LLJIT, kernels included, appended as "address size name" to
// /tmp/perf-PID.map, the file `perf report` reads to name JIT code.
std::atomic<bool> perfMapOn{false};

// The names the map gives the kernels and loop bodies of the programs this
// process links, by their symbol: the source op and line, the kernel's
// number in its program and the program, "FILE:LINE.OP.kN@FUNCTION"
// (perfName). Guarded by `mutex`.
struct PerfNames {
  std::mutex mutex;
  std::vector<std::string> sourceFiles;  // SourceLoc::file -> the name shown
  std::unordered_map<std::string, std::string> bySymbol;
  std::unordered_set<std::string> used;
};

PerfNames& perfNames() {
  static PerfNames p;
  return p;
}

// The perf map's names of the functions in `origins` (KernelOrigin, named
// "gsl_entry..." when lowered) of the program `fn`, whose entry is
// `symbol`: "mlp.gsl:11.matmul.k3@main.1", "+N" after the op when N
// further ops call the same kernel, a loop body "...loop.loop7@main.3" and
// its kernels "...loop7.k2@main.3". Two programs of one name (different
// shardings) have distinct names: the second gets its symbol's hash.
void nameForPerf(const std::string& symbol, const std::string& fn, const std::vector<jit::KernelOrigin>& origins) {
  PerfNames& p = perfNames();
  std::lock_guard<std::mutex> lock(p.mutex);
  for (const jit::KernelOrigin& o : origins) {
    const std::string suffix = o.symbol.substr(std::string_view("gsl_entry").size());  // ".k3", ".loop7.k2"
    std::string name;
    if (o.loc.valid())
      name = ((size_t)o.loc.file < p.sourceFiles.size() ? p.sourceFiles[o.loc.file] : std::string("?")) + ":" +
             std::to_string(o.loc.line) + ".";
    name += ir::opInfo(o.kind).mnemonic;
    if (o.sharedBy) name += "+" + std::to_string(o.sharedBy);
    name += suffix + "@" + fn;
    if (!p.used.insert(name).second) {
      name += "." + symbol.substr(std::string_view("gsl_fn_").size(), 8);
      p.used.insert(name);
    }
    // A module compiled in parts renames its local symbols (emitObjects).
    p.bySymbol[symbol + suffix] = name;
    p.bySymbol[symbol + ".l." + symbol + suffix] = name;
  }
}

class PerfMapPlugin : public llvm::orc::ObjectLinkingLayer::Plugin {
 public:
  // A named function of the graph (a defined symbol with a size, in an
  // executable section).
  static bool executableCode(const llvm::jitlink::Symbol& sym) {
    return sym.hasName() && sym.getSize() && sym.isDefined() &&
           ((unsigned)sym.getBlock().getSection().getMemProt() & (unsigned)llvm::orc::MemProt::Exec);
  }

  void modifyPassConfig(llvm::orc::MaterializationResponsibility&, llvm::jitlink::LinkGraph&,
                        llvm::jitlink::PassConfiguration& config) override {
    if (!perfMapOn) return;
    // The kernels' local symbols are not referenced (calls are relocated
    // against their section), so dead stripping would drop them and their
    // names; they are kept (their code is kept anyway).
    config.PrePrunePasses.push_back([](llvm::jitlink::LinkGraph& g) -> llvm::Error {
      for (llvm::jitlink::Symbol* sym : g.defined_symbols())
        if (executableCode(*sym)) sym->setLive(true);
      return llvm::Error::success();
    });
    config.PostFixupPasses.push_back([](llvm::jitlink::LinkGraph& g) -> llvm::Error {
      static std::mutex m;
      std::lock_guard<std::mutex> lock(m);
      const std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
      if (FILE* f = std::fopen(path.c_str(), "a")) {
        PerfNames& names = perfNames();
        std::lock_guard<std::mutex> namesLock(names.mutex);
        for (const llvm::jitlink::Symbol* sym : g.defined_symbols())
          if (executableCode(*sym)) {
            const std::string symbol = sym->getName().str();
            auto named = names.bySymbol.find(symbol);
            std::fprintf(f, "%llx %llx %s\n", (unsigned long long)sym->getAddress().getValue(),
                         (unsigned long long)sym->getSize(),
                         (named == names.bySymbol.end() ? symbol : named->second).c_str());
          }
        std::fclose(f);
      }
      return llvm::Error::success();
    });
  }
  llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility&) override { return llvm::Error::success(); }
  llvm::Error notifyRemovingResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey) override {
    return llvm::Error::success();
  }
  void notifyTransferringResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey, llvm::orc::ResourceKey) override {}
};

class Compiler {
 public:
  static Compiler& get() {
    static Compiler c;
    return c;
  }

  // The compiled form of `f` under `opts` (compiled on the first request
  // for its text and options; concurrent requests for the same wait for
  // that one compile).
  std::shared_ptr<const Compiled> lookup(const ir::Function& f, const JitOptions& opts) {
    return lookup(f, opts, functionKey(f));
  }

  // The same with `f`'s key (functionKey) already computed.
  std::shared_ptr<const Compiled> lookup(const ir::Function& f, const JitOptions& opts, std::string key) {
    return request(f, opts, std::move(key), /*wait=*/true);
  }

  // Compiles `f` under `opts` unless it is compiled, or being compiled,
  // already (jitCompileAhead): never waits for another thread's compile.
  void ahead(const ir::Function& f, const JitOptions& opts) {
    try {
      request(f, opts, functionKey(f), /*wait=*/false);
    } catch (...) {
      // Kept in the cache's future: the caller that needs `f` gets it.
    }
  }

  uint64_t compiles() const { return compiles_.load(); }
  JitCacheStats stats() const { return {loaded_.load(), compiles_.load(), rebuilt_.load()}; }
  double seconds() const { return double(nanos_.load()) * 1e-9; }

  std::string emit(const ir::Function& f, bool optimized, const JitOptions& opts) {
    const JitOptions resolved = resolve(opts);
    jit::Lowered l = jit::lowerFunction(f, "gsl_" + f.name, resolved);
    prepare(*l.module);
    if (optimized) optimize(*l.module, resolved, *targetMachine(resolved));
    std::string s;
    llvm::raw_string_ostream os(s);
    l.module->print(os, nullptr);
    return s;
  }

 private:
  // The compiled form of `f` (key `key`): the first request compiles it on
  // the calling thread; with `wait`, a later one waits for that compile,
  // without, it returns null at once.
  std::shared_ptr<const Compiled> request(const ir::Function& f, const JitOptions& opts, std::string key, bool wait) {
    const JitOptions resolved = resolve(opts);
    // A test that hides a lowering (jit::ScopedHiddenLowering) gets code
    // compiled without it ("" otherwise). The persistent cache needs no
    // such suffix: its key holds the lowered LLVM IR, which shows the
    // fallback.
    key += jit::hiddenLoweringsKey();
    std::promise<std::shared_ptr<const Compiled>> promise;
    Future fut;
    bool mine = false;
    {
      std::lock_guard<std::mutex> lock(cacheMutex_);
      std::unordered_map<std::string, Future>& cache = cacheFor(resolved);
      auto it = cache.find(key);
      if (it != cache.end()) {
        fut = it->second;
      } else {
        fut = promise.get_future().share();
        cache.emplace(std::move(key), fut);
        mine = true;
      }
    }
    if (mine) {
      try {
        promise.set_value(compile(f, resolved));
      } catch (...) {
        promise.set_exception(std::current_exception());
      }
    } else if (!wait) {
      return nullptr;
    }
    return fut.get();
  }

  Compiler() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    auto jtmb = expect(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host CPU");
    jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    tm_ = expect(jtmb.createTargetMachine(), "creating the target machine");
    jtmb_ = std::make_unique<llvm::orc::JITTargetMachineBuilder>(jtmb);
    jit_ = expect(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create(), "creating the LLJIT");
    if (auto* layer = llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(&jit_->getObjLinkingLayer()))
      layer->addPlugin(std::make_unique<PerfMapPlugin>());
    // Every runtime helper is an absolute symbol of the main JITDylib.
    llvm::orc::SymbolMap syms;
    for (auto& [name, addr] : jit::runtimeSymbols())
      syms[jit_->mangleAndIntern(name)] = {llvm::orc::ExecutorAddr::fromPtr(addr),
                                           llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
    expect(jit_->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(syms))), "defining runtime symbols");
  }

  // Target triple, data layout and host CPU attributes (so the optimiser's
  // cost model and vectoriser see the host's vector units).
  void prepare(llvm::Module& m) {
    m.setTargetTriple(tm_->getTargetTriple().str());
    m.setDataLayout(tm_->createDataLayout());
    for (llvm::Function& fn : m) {
      if (fn.isDeclaration()) continue;
      fn.addFnAttr("target-cpu", tm_->getTargetCPU());
      fn.addFnAttr("target-features", tm_->getTargetFeatureString());
    }
  }

  // A target machine of its own for one compile (a TargetMachine is not
  // shared between threads), generating code at `o.codegenLevel`.
  std::unique_ptr<llvm::TargetMachine> targetMachine(const JitOptions& o) {
    llvm::orc::JITTargetMachineBuilder b = *jtmb_;
    b.setCodeGenOptLevel(llvm::CodeGenOptLevel(o.codegenLevel));
    return expect(b.createTargetMachine(), "creating a target machine");
  }

  // The new pass manager's pipeline at `o.optLevel`.
  void optimize(llvm::Module& m, const JitOptions& o, llvm::TargetMachine& tm) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(&tm);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    const llvm::OptimizationLevel level = o.optLevel == 1   ? llvm::OptimizationLevel::O1
                                          : o.optLevel == 2 ? llvm::OptimizationLevel::O2
                                                            : llvm::OptimizationLevel::O3;
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(level);
    mpm.run(m, mam);
    jit::markStreamingStores(m);
  }

  // The key of a lowered module in the persistent cache: its unoptimised
  // LLVM IR (which shows every change of the lowering), the target, the
  // options, the pipeline, LLVM's and gsl's versions.
  std::string objectKey(llvm::Module& m, const JitOptions& resolved, const std::string& version) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "gsl-object-cache 1\n" << version << "\nllvm " << LLVM_VERSION_STRING << "\n" << kPipelineVersion << "\n"
       << tm_->getTargetTriple().str() << "\n" << tm_->getTargetCPU() << "\n" << tm_->getTargetFeatureString() << "\n"
       << optionsText(resolved) << "\n";
    m.print(os, nullptr);
    return hash128(text);
  }

  // The object file of an optimised module, generated at `o.codegenLevel`.
  std::string emitObject(llvm::Module& m, llvm::TargetMachine& tm) {
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    GSL_ASSERT(!tm.addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile),
               "internal error: jit: the target cannot emit object files");
    pm.run(m);
    return std::string(buf.data(), buf.size());
  }

  // Code generation of an optimised module into up to `o.compileThreads`
  // objects, generated at once on as many threads: the module is split by
  // function (llvm::SplitModule, round robin by size), each part goes to
  // its thread as bitcode (an LLVMContext is not shared between threads)
  // and gets a target machine of its own. Code is generated per function,
  // so the parts' code is the code one object would hold. Its local
  // symbols become hidden globals; they are renamed after `symbol` first,
  // so that the parts of different programs, linked into one JITDylib,
  // never define the same name.
  std::vector<std::string> emitObjects(llvm::Module& m, const JitOptions& o, llvm::TargetMachine& tm,
                                       const std::string& symbol) {
    // A part is worth a thread only with enough code: below about
    // kInstructionsPerPart instructions, splitting, the bitcode round trip,
    // a target machine and an object of its own cost more than they save
    // (a program of many small functions compiled 1.25x slower in CPU time
    // with every module split in two).
    constexpr size_t kInstructionsPerPart = 10000;
    size_t functions = 0, instructions = 0;
    for (llvm::Function& fn : m)
      if (!fn.isDeclaration()) {
        ++functions;
        instructions += fn.getInstructionCount();
      }
    const unsigned parts = (unsigned)std::min<size_t>(
        {(size_t)std::max(1, o.compileThreads), functions, std::max<size_t>(1, instructions / kInstructionsPerPart)});
    if (parts <= 1) return {emitObject(m, tm)};
    for (llvm::GlobalValue& gv : m.global_values())
      if (gv.hasLocalLinkage() && !gv.isDeclaration())
        gv.setName(symbol + ".l." + (gv.hasName() ? gv.getName().str() : std::string("unnamed")));
    std::vector<llvm::SmallVector<char, 0>> bitcode;
    llvm::SplitModule(
        m, parts,
        [&](std::unique_ptr<llvm::Module> part) {
          bitcode.emplace_back();
          llvm::raw_svector_ostream os(bitcode.back());
          llvm::WriteBitcodeToFile(*part, os);
        },
        /*PreserveLocals=*/false, /*RoundRobin=*/true);
    std::vector<std::string> objects(bitcode.size());
    std::vector<std::string> errors(bitcode.size());
    auto generate = [&](size_t i) {
      try {
        llvm::LLVMContext ctx;
        auto mod = llvm::parseBitcodeFile(
            llvm::MemoryBufferRef(llvm::StringRef(bitcode[i].data(), bitcode[i].size()), "part"), ctx);
        if (!mod) {
          errors[i] = llvm::toString(mod.takeError());
          return;
        }
        objects[i] = emitObject(**mod, *targetMachine(o));
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    };
    std::vector<std::thread> threads;
    for (size_t i = 1; i < bitcode.size(); ++i) threads.emplace_back(generate, i);
    generate(0);
    for (std::thread& t : threads) t.join();
    for (const std::string& e : errors) GSL_ASSERT(e.empty(), "internal error: jit: parallel code generation: " + e);
    return objects;
  }

  // LLVM's two phases, timed for --trace and `gsl compile --time-passes`.
  // Runs on the compiling thread with no lock held: the module, its
  // context and the target machine are this compile's own.
  void optimizeAndEmit(llvm::Module& m, const JitOptions& o, const std::string& symbol,
                       std::vector<std::string>& objects) {
    std::unique_ptr<llvm::TargetMachine> tm = targetMachine(o);
    {
      trace::Scope s("jit", "optimise");
      optimize(m, o, *tm);
    }
    trace::Scope s("jit", "codegen");
    objects = emitObjects(m, o, *tm, symbol);
  }

  std::shared_ptr<const Compiled> compile(const ir::Function& f, const JitOptions& resolved) {
    const auto t0 = std::chrono::steady_clock::now();
    JitCompileEvent ev;
    ev.function = f.name;
    ev.ops = f.ops.size();
    const JitCompileObserver& obs = observer();
    if (obs) obs(ev);
    const CompileCacheConfig& cfg = compileCacheConfig();
    // Lowering, optimisation and code generation hold no lock (different
    // functions compile at once on different threads, jitCompileAhead);
    // compileMutex_ guards only the linked objects and the LLJIT.
    // --trace: on the track of the thread that compiles; its "source" says
    // whether LLVM compiled it or it came from the persistent cache.
    trace::Scope traced("compile", f.name);
    // A fixed name while hashing, then one derived from the object key (so
    // an object loaded from the cache defines the symbol looked up).
    jit::Lowered l = [&] {
      trace::Scope s("jit", "lower");
      return jit::lowerFunction(f, "gsl_entry", resolved);
    }();
    if (traced) {
      traced.arg("ops", (int64_t)f.ops.size());
      traced.arg("kernels", (int64_t)l.kernels);
      traced.arg("kernel_calls", (int64_t)l.kernelCalls);
    }
    prepare(*l.module);
    const std::string okey = objectKey(*l.module, resolved, cfg.version);
    const std::string symbol = "gsl_fn_" + okey;
    auto c = std::make_shared<Compiled>();
    c->peakBytes = l.peakBytes;
    c->results = std::move(l.results);
    llvm::Function* entry = l.module->getFunction("gsl_entry");
    GSL_ASSERT(entry, "internal error: jit: lowered module has no entry function");
    entry->setName(symbol);
    // Its kernel functions (internal, "gsl_entry.kN") follow the entry's
    // name, so a profile tells the programs' kernels apart.
    for (llvm::Function& fn : *l.module)
      if (!fn.isDeclaration() && fn.getName().starts_with("gsl_entry.")) fn.setName(symbol + fn.getName().substr(9).str());
    std::string object;  // the cache entry: packObjects(objects)
    std::vector<std::string> objects;
    bool loaded = false;
    // An identical module may already be linked (another function that
    // lowered to the same code): checked before compiling, after waiting
    // for another process, and again before linking.
    auto linkedLocked = [&] {  // compileMutex_ held
      auto it = objects_.find(okey);
      if (it == objects_.end()) return false;
      c->fn = it->second;
      return true;
    };
    auto linkedBefore = [&] {
      std::lock_guard<std::mutex> lock(compileMutex_);
      return linkedLocked();
    };
    bool linked = linkedBefore();
    if (!linked && cfg.enabled && !cfg.dir.empty()) {
      ObjectStore store(cfg.dir, cfg.maxBytes);
      ObjectStore::Found found = store.load(okey, object);
      if (found == ObjectStore::Found::Hit && !unpackObjects(object, objects)) found = ObjectStore::Found::Invalid;
      if (found == ObjectStore::Found::Hit) {
        loaded = true;
      } else {
        // One process compiles, the others wait for its entry.
        ObjectStore::Lock fileLock = [&] {
          trace::Scope s("jit", "cache wait");
          return store.lock(okey);
        }();
        linked = linkedBefore();
        if (!linked) {
          ObjectStore::Found again = store.load(okey, object);
          if (again == ObjectStore::Found::Hit && !unpackObjects(object, objects)) again = ObjectStore::Found::Invalid;
          if (again == ObjectStore::Found::Hit) {
            loaded = true;
          } else {
            if (found == ObjectStore::Found::Invalid || again == ObjectStore::Found::Invalid) rebuilt_++;
            optimizeAndEmit(*l.module, resolved, symbol, objects);
            store.store(okey, packObjects(objects));
            compiles_++;
          }
        }
      }
    } else if (!linked) {
      optimizeAndEmit(*l.module, resolved, symbol, objects);
      compiles_++;
    }
    if (traced) traced.arg("source", std::string(linked ? "linked" : loaded ? "cache" : "llvm"));
    if (!linked) {
      if (loaded) loaded_++;
      ev.loaded = loaded;
      trace::Scope s("jit", "link");
      std::lock_guard<std::mutex> lock(compileMutex_);
      if (!linkedLocked()) {  // else linked by another thread meanwhile
        if (perfMapOn) nameForPerf(symbol, f.name, l.origins);
        for (size_t i = 0; i < objects.size(); ++i)
          expect(jit_->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(objects[i], symbol + "." + std::to_string(i))),
                 "adding an object file");
        auto addr = expect(jit_->lookup(symbol), "looking up a compiled function");
        c->fn = addr.toPtr<jit::CompiledFn>();
        objects_.emplace(okey, c->fn);
      }
    }
    const auto dt = std::chrono::steady_clock::now() - t0;
    nanos_ += (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count();
    ev.done = true;
    ev.seconds = std::chrono::duration<double>(dt).count();
    if (obs) obs(ev);
    return c;
  }

  using Future = std::shared_future<std::shared_ptr<const Compiled>>;

  // The cache of functions compiled with `resolved` (guarded by cacheMutex_;
  // a process sees few distinct options, so a list is searched).
  std::unordered_map<std::string, Future>& cacheFor(const JitOptions& resolved) {
    for (auto& [opts, fns] : caches_)
      if (opts == resolved) return fns;
    caches_.emplace_back(resolved, std::unordered_map<std::string, Future>{});
    return caches_.back().second;
  }

  std::unique_ptr<llvm::TargetMachine> tm_;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb_;  // for code generation threads
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::mutex compileMutex_;  // objects_ and the LLJIT's linking
  std::mutex cacheMutex_;
  // Per resolved options: printed IR -> compiled function.
  std::vector<std::pair<JitOptions, std::unordered_map<std::string, Future>>> caches_;
  // Object key -> the linked function (guarded by compileMutex_).
  std::unordered_map<std::string, jit::CompiledFn> objects_;
  std::atomic<uint64_t> compiles_{0}, loaded_{0}, rebuilt_{0}, nanos_{0};
};

// Nanoseconds the calling thread has spent getting functions ready to run:
// compiling them, or waiting for another thread's compile.
thread_local uint64_t threadReadyNanos = 0;

thread_local JitWorkspace threadWorkspace;

// The calling thread's workspace, grown on demand (64-byte aligned).
char* workspace(size_t bytes) {
  JitWorkspace& buf = threadWorkspace;
  if (bytes > buf.size) {
    std::free(buf.p);
    size_t n = (bytes + 63) / 64 * 64;
    buf.p = static_cast<char*>(std::aligned_alloc(64, n));
    buf.size = buf.p ? n : 0;
    if (!buf.p) throw std::bad_alloc();  // out of memory: reported as a user error by the host
  }
  return buf.p;
}

class JitEngine : public Engine {
 public:
  JitEngine(const KernelContext& ctx, const JitOptions& opts) : ctx_(ctx), opts_(opts) {}
  const char* name() const override { return "jit"; }

  std::vector<Tensor> call(const ir::Function& f, const std::vector<Tensor>& args, const Donation& donated) override {
    GSL_ASSERT(args.size() == f.args.size(), "jit: function '" + f.name + "' takes " +
                                                 std::to_string(f.args.size()) + " arguments, got " +
                                                 std::to_string(args.size()));
    std::vector<void*> inputs(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      GSL_ASSERT(args[i].defined() && args[i].type() == f.args[i]->type,
                 "jit: argument " + std::to_string(i) + " of '" + f.name + "' has type " +
                     (args[i].defined() ? args[i].type().str() : std::string("<undefined>")) + ", expected " +
                     f.args[i]->type.str());
      inputs[i] = const_cast<void*>(args[i].raw());
    }
    std::shared_ptr<const Compiled> c = compiled(f);
    GSL_ASSERT(c->results.size() == f.results.size(), "jit: compiled function does not match '" + f.name + "'");
    std::vector<Tensor> results(f.results.size());
    std::vector<void*> outputs(f.results.size(), nullptr);
    for (size_t j = 0; j < f.results.size(); ++j)
      if (c->results[j].kind == ResultSource::Computed) {
        // Into a donated input's buffer, if the plan allows it and no one
        // else holds the buffer; else a new one, not zero-filled: the
        // compiled code writes every element of a computed result (as it
        // does of its workspace buffers, which are never cleared).
        results[j] = donatedBuffer(c->results[j].donor, f.results[j]->type, args, donated);
        if (!results[j].defined()) results[j] = Tensor::uninitialized(f.results[j]->type);
        outputs[j] = results[j].raw();
      }
    jit::CallContext rc;
    rc.kctx = &ctx_;
    rc.fn = &f;
    rc.root = &f;
    if (c->fn(inputs.data(), outputs.data(), workspace(c->peakBytes), &rc) != 0) {
      GSL_ASSERT(rc.error, "jit: compiled code failed without an error");
      std::rethrow_exception(rc.error);
    }
    for (size_t j = 0; j < f.results.size(); ++j) {
      const ResultSource& s = c->results[j];
      if (s.kind == ResultSource::Arg) results[j] = args[s.index];
      if (s.kind == ResultSource::Repeat) results[j] = results[s.index];
    }
    return results;
  }

 private:
  // The donated input whose buffer a result may be written into (the
  // plan's donor), when the caller donated it and holds the only tensor
  // of it; else an undefined tensor.
  Tensor donatedBuffer(const DonorInput& d, const ir::TensorType& t, const std::vector<Tensor>& args,
                       const Donation& donated) {
    const Tensor* in = nullptr;
    if (d.arg >= 0 && donated.arg((size_t)d.arg)) in = &args[(size_t)d.arg];
    if (!d.param.empty() && donated.param(d.param)) in = &ctx_.param(d.param);
    if (in && in->defined() && in->type() == t && in->soleOwner()) return *in;
    return {};
  }

  // `f` compiled, remembered by address: the key is computed once per
  // function and engine, not on every call.
  std::shared_ptr<const Compiled> compiled(const ir::Function& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = known_.find(&f);
    if (it != known_.end()) return it->second;
    const auto t0 = std::chrono::steady_clock::now();
    auto c = Compiler::get().lookup(f, opts_, functionKey(f));
    threadReadyNanos += (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
    known_.emplace(&f, c);
    return c;
  }

  KernelContext ctx_;
  JitOptions opts_;
  std::mutex mutex_;
  std::unordered_map<const ir::Function*, std::shared_ptr<const Compiled>> known_;
};

}  // namespace

std::unique_ptr<Engine> makeJitEngine(const KernelContext& ctx, const JitOptions& opts) {
  return std::make_unique<JitEngine>(ctx, opts);
}

uint64_t jitCompileCount() { return Compiler::get().compiles(); }

JitCacheStats jitCacheStats() { return Compiler::get().stats(); }

double jitCompileSeconds() { return Compiler::get().seconds(); }

void setJitCompileObserver(JitCompileObserver o) { observer() = std::move(o); }

double jitThreadReadySeconds() { return double(threadReadyNanos) * 1e-9; }
uint64_t& jitThreadReadyNanos() { return threadReadyNanos; }
JitWorkspace& jitThreadWorkspace() { return threadWorkspace; }
JitWorkspace::~JitWorkspace() { std::free(p); }

void jitCompile(const ir::Function& f, const JitOptions& opts) { Compiler::get().lookup(f, opts); }

void jitCompileAhead(const ir::Function& f, const JitOptions& opts) { Compiler::get().ahead(f, opts); }

void jitWritePerfMap(bool on, std::vector<std::string> sourceFiles) {
  {
    PerfNames& p = perfNames();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.sourceFiles = std::move(sourceFiles);
  }
  perfMapOn = on;
}

size_t jitPeakBytes(const ir::Function& f, const JitOptions& opts) {
  return Compiler::get().lookup(f, opts)->peakBytes;
}

size_t jitPlannedPeakBytes(const ir::Function& f, const JitOptions& opts) {
  return jit::planSummary(f, resolve(opts)).peakBytes;
}

std::vector<DonorInput> jitPlannedDonors(const ir::Function& f, const JitOptions& opts) {
  std::vector<DonorInput> donors;
  for (const ResultSource& r : jit::planSummary(f, resolve(opts)).results) donors.push_back(r.donor);
  return donors;
}

std::string jitEmitLLVM(const ir::Function& f, bool optimized, const JitOptions& opts) {
  return Compiler::get().emit(f, optimized, opts);
}

}  // namespace gsl::backend
