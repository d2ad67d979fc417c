// Robustness helpers (docs/robustness.md): --max-memory sizes, the memory
// estimate of a run, and interrupts (support/Interrupt.h) abandoning a
// checkpoint write.
#include <doctest/doctest.h>

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "passes/Pipeline.h"
#include "runtime/Checkpoint.h"
#include "runtime/Host.h"
#include "runtime/Memory.h"
#include "support/Interrupt.h"

using namespace gsl;
using namespace gsl::runtime;

namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> listDir(const std::string& d) {
  std::vector<std::string> r;
  if (DIR* dir = opendir(d.c_str())) {
    while (dirent* e = readdir(dir))
      if (e->d_name[0] != '.') r.push_back(e->d_name);
    closedir(dir);
  }
  return r;
}

}  // namespace

TEST_CASE("--max-memory sizes: suffixes, fractions, overflow") {
  CHECK(parseByteSize("1000") == 1000u);
  CHECK(parseByteSize("512K") == 512u << 10);
  CHECK(parseByteSize("512M") == 512u << 20);
  CHECK(parseByteSize("8G") == 8ull << 30);
  CHECK(parseByteSize("8g") == 8ull << 30);
  CHECK(parseByteSize("8GB") == 8ull << 30);
  CHECK(parseByteSize("8GiB") == 8ull << 30);
  CHECK(parseByteSize("2T") == 2ull << 40);
  CHECK(parseByteSize("1.5G") == 3ull << 29);
  CHECK(parseByteSize("0") == 0u);
  CHECK(parseByteSize("17179869184T") == std::nullopt);  // 2^64 bytes
  CHECK(parseByteSize("99999999999999999999") == std::nullopt);
  for (const char* bad : {"", "G", "8x", "-1", "1.5", "1..5G", "8 G", "8iB", "0x10"})
    CHECK_MESSAGE(parseByteSize(bad) == std::nullopt, bad);
}

TEST_CASE("--max-memory sizes: printed in binary units") {
  CHECK(formatBytes(0) == "0 B");
  CHECK(formatBytes(1023) == "1023 B");
  CHECK(formatBytes(1024) == "1.0 KiB");
  CHECK(formatBytes(1536) == "1.5 KiB");
  CHECK(formatBytes(1048575) == "1.0 MiB");
  CHECK(formatBytes(80000000000ull) == "74.5 GiB");
  CHECK(formatBytes(UINT64_MAX) == "16.0 EiB");
}

TEST_CASE("available memory: read from /proc/meminfo") {
  auto m = availableMemory();
  REQUIRE(m.has_value());
  CHECK(*m > (16u << 20));
}

TEST_CASE("memory estimate: params, optimizer states and the largest computation, per rank") {
  const std::string src =
      "mesh m = [data: NP]\n"
      "param w: f32[1024, 256] @shard(m, [data, _]) = zeros\n"  // 1 MiB, 256 KiB per rank at NP 4
      "optimizer opt = adam(lr=0.1)\n"                          // two states per param element
      "fn loss(x: f32[256]) -> f32 { return sum(w @ x) }\n"
      "fn main() {\n"
      "  let x = broadcast(1.0, [256])\n"
      "  let big = broadcast(2.0, [4096, 4096])\n"  // 64 MiB, replicated
      "  print(opt.minimize(loss, x), sum(big + big))\n"
      "}\n";
  SourceManager sm;
  Diagnostics diags(sm);
  frontend::Options o;
  o.np = 4;
  auto prog = frontend::compileSource("est.gsl", src, o, sm, diags);
  REQUIRE_MESSAGE(prog, [&] {
    std::ostringstream ss;
    diags.print(ss);
    return ss.str();
  }());
  passes::runGlobalPipeline(*prog->module);
  RunOptions ro;
  ro.engine = Engine::Interp;  // as before the default became the JIT
  MemoryEstimate est = estimateMemory(*prog, ro);
  CHECK(est.paramBytes == 256u << 10);
  CHECK(est.stateBytes == 512u << 10);
  // The largest: sum(big + big) reads big (64 MiB); the addition is fused
  // into the sum, so nothing else is materialised.
  CHECK(est.activationBytes >= 64u << 20);
  CHECK(est.activationBytes < 65u << 20);
  CHECK(est.where.line == 8);
  CHECK(est.total() == est.paramBytes + est.stateBytes + est.activationBytes);

  // Over a limit: refused with both figures; under it: fine.
  ro.maxMemory = 60u << 20;
  ro.maxMemorySource = "--max-memory 60M";
  Diagnostics d2(sm);
  CHECK_FALSE(checkMemory(est, ro, d2));
  REQUIRE(d2.all().size() == 2);
  CHECK(d2.all()[0].message.find("more than the limit of 60.0 MiB per rank (--max-memory 60M)") !=
        std::string::npos);
  CHECK(d2.all()[1].message.find("optimizer states 512.0 KiB") != std::string::npos);
  ro.maxMemory = 1u << 30;
  Diagnostics d3(sm);
  CHECK(checkMemory(est, ro, d3));
  CHECK(d3.all().empty());
}

TEST_CASE("memory estimate: a training step's updated params and states take no memory of their own") {
  // minimize donates the params and states; the planner writes w', u', and
  // the Adam states into their buffers. On several threads the ranks share
  // a param whose block is the whole param (u) until their first step,
  // which writes a new one: its result is counted then.
  const std::string src =
      "mesh m = [data: NP]\n"
      "param w: f32[1024, 256] @shard(m, [data, _]) = zeros\n"
      "param u: f32[256] = zeros\n"
      "optimizer opt = adam(lr=0.1)\n"
      "fn loss(x: f32[256]) -> f32 { return sum(w @ (x + u)) }\n"
      "fn main() {\n"
      "  let x = broadcast(1.0, [256])\n"
      "  print(opt.minimize(loss, x))\n"
      "}\n";
  for (int np : {1, 2}) {
    INFO("np " << np);
    SourceManager sm;
    Diagnostics diags(sm);
    frontend::Options o;
    o.np = np;
    auto prog = frontend::compileSource("est.gsl", src, o, sm, diags);
    REQUIRE(prog);
    passes::runGlobalPipeline(*prog->module);
    MemoryEstimate est = estimateMemory(*prog, RunOptions{});
    CHECK(est.where.line == 8);
    CHECK(est.paramBytes == (1024u << 10) / np + 1024);
    CHECK(est.stateBytes == 2 * est.paramBytes);
    CHECK(est.resultBytes == (np == 1 ? 4u : 4u + 1024u));  // the loss (and u' at np 2)
  }
}

TEST_CASE("interrupt: a checkpoint write is abandoned, its temp file removed, the old file kept") {
  char tmpl[] = "/tmp/gsl_interrupt_test.XXXXXX";
  REQUIRE(mkdtemp(tmpl));
  const std::string dir = tmpl, p = dir + "/ck.safetensors";
  writeSafetensors(p, {{"w", backend::Tensor::fromF32({2}, {1.5f, 2.5f})}}, {});
  const std::string before = slurp(p);
  requestInterrupt();
  CHECK_THROWS_AS(writeSafetensors(p, {{"w", backend::Tensor::fromF32({2}, {7, 8})}}, {}), Interrupted);
  clearInterrupt();
  CHECK(slurp(p) == before);
  CHECK(listDir(dir) == std::vector<std::string>{"ck.safetensors"});
  // Without the interrupt, the same write goes through.
  writeSafetensors(p, {{"w", backend::Tensor::fromF32({2}, {7, 8})}}, {});
  CHECK(slurp(p) != before);
  unlink(p.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("interrupt: a run stops at its next statement and runMain throws Interrupted") {
  // Every step makes collectives (two all_reduces over `data`) on 4 thread ranks.
  const std::string src =
      "mesh m = [data: NP]\n"
      "param w: f32[64] @shard(m, [data]) = ones\n"
      "fn main() {\n"
      "  for i in 0..1000000000 {\n"
      "    print(sum(w) + sum(w * w))\n"
      "  }\n"
      "}\n";
  SourceManager sm;
  Diagnostics diags(sm);
  frontend::Options o;
  o.np = 4;
  auto prog = frontend::compileSource("loop.gsl", src, o, sm, diags);
  REQUIRE(prog);
  passes::runGlobalPipeline(*prog->module);
  // The output stream requests the interrupt after 100 lines, as a Ctrl-C would.
  struct Counting : std::stringbuf {
    int lines = 0;
    int sync() override { return 0; }
    std::streamsize xsputn(const char* s, std::streamsize n) override {
      for (std::streamsize i = 0; i < n; ++i)
        if (s[i] == '\n' && ++lines == 100) requestInterrupt();
      return n;
    }
    int overflow(int c) override {
      if (c == '\n' && ++lines == 100) requestInterrupt();
      return c;
    }
  } buf;
  std::ostream out(&buf);
  RunOptions ro;
  ro.engine = Engine::Interp;  // as before the default became the JIT
  ro.out = &out;
  Diagnostics rd(sm);
  CHECK_THROWS_AS(runMain(*prog, ro, rd), Interrupted);
  clearInterrupt();
  CHECK(buf.lines >= 100);
  CHECK(buf.lines < 110);
  CHECK(rd.all().empty());
}
