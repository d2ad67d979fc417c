// The cost model's seconds (passes/CostModel) on a machine model
// (passes/MachineModel): the default model's figures, a calibrated
// model's per-class GEMM rates, bytes moved, overheads and links, and the
// machine file's round trip and errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "ir/IRParser.h"
#include "passes/CostModel.h"
#include "passes/MachineModel.h"

using namespace gsl;

namespace {

std::unique_ptr<ir::Module> parse(const std::string& text) {
  ir::IRParseResult parsed = ir::parseModule(text);
  REQUIRE_MESSAGE(parsed.module != nullptr, parsed.error);
  return std::move(parsed.module);
}

// A per-rank function: a 512^3 matmul (large), a 64 x 512 x 512 one
// (skinny), an add of 64 x 512 floats and an all_reduce of them.
const char* kProgram =
    "np = 2\nmesh @m = [x: 2]\n\n"
    "func @f(%0: f32[512, 512], %1: f32[512, 512], %2: f32[64, 512]) -> (f32[64, 512]) {\n"
    "  %3 = matmul %0, %1 : f32[512, 512]\n"
    "  %4 = matmul %2, %3 : f32[64, 512]\n"
    "  %5 = add %4, %2 : f32[64, 512]\n"
    "  %6 = all_reduce %5 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32[64, 512]\n"
    "  return %6\n}\n";

passes::MachineModel calibrated() {
  passes::MachineModel m;
  m.source = "calibrated";
  m.gemmFlopsPerS = {200e9, 100e9, 50e9};
  m.elementwiseFlopsPerS = 1e9;
  m.memoryBytesPerS = 10e9;
  m.cacheBytesPerS = 10e9;
  m.opOverheadS = 1e-7;
  m.callOverheadS = 2e-6;
  m.collectives[ir::OpKind::AllReduce] = {3e-6, 5e9};
  return m;
}

}  // namespace

TEST_CASE("GEMM shape classes") {
  CHECK(passes::gemmClassOf(512, 512, 512) == passes::GemmClass::Large);
  CHECK(passes::gemmClassOf(64, 512, 512) == passes::GemmClass::Skinny);
  CHECK(passes::gemmClassOf(512, 512, 255) == passes::GemmClass::Skinny);
  CHECK(passes::gemmClassOf(16, 64, 16) == passes::GemmClass::Small);
}

TEST_CASE("the default model: every FLOP at 100 GFLOP/s, collectives 5 us + 10 GB/s") {
  auto m = parse(kProgram);
  const passes::Cost c = passes::estimateCost(*m, *m->functions[0]);
  const double flops = 2.0 * 512 * 512 * 512 + 2.0 * 64 * 512 * 512 + 64 * 512;
  CHECK(c.flops == (uint64_t)flops);
  CHECK(c.computeSeconds() == doctest::Approx(flops / 100e9).epsilon(1e-12));
  const double sent = 2.0 * (2 - 1) * (64 * 512 * 4) / 2;  // all_reduce 2(n-1)/n B
  CHECK(c.collectives.at(ir::OpKind::AllReduce).bytes == (uint64_t)sent);
  CHECK(c.collectiveSeconds == doctest::Approx(5e-6 + sent / 10e9).epsilon(1e-12));
  CHECK(passes::defaultMachineModel().describe() ==
        "machine model: 100 GFLOP/s per rank, 10 GB/s per link, 5 us latency per collective call\n");
}

TEST_CASE("a calibrated model: GEMMs by class, other ops by bytes, overheads, links") {
  auto m = parse(kProgram);
  const passes::MachineModel mm = calibrated();
  const passes::Cost c = passes::estimateCost(*m, *m->functions[0], mm);
  const double large = 2.0 * 512 * 512 * 512 / 200e9 + 1e-7, skinny = 2.0 * 64 * 512 * 512 / 100e9 + 1e-7;
  CHECK(c.gemmSeconds == doctest::Approx(large + skinny).epsilon(1e-12));
  // add: 64 x 512 FLOPs at 1 GFLOP/s (32.8 us) against 3 x 128 KiB at
  // 10 GB/s (39.3 us): the bytes bound it.
  const double add = 3.0 * 64 * 512 * 4 / 10e9 + 1e-7;
  CHECK(c.otherSeconds == doctest::Approx(add).epsilon(1e-12));
  CHECK(c.callSeconds == 2e-6);
  const double sent = 64 * 512 * 4;
  CHECK(c.collectiveSeconds == doctest::Approx(3e-6 + sent / 5e9).epsilon(1e-12));
  CHECK(c.seconds() == doctest::Approx(large + skinny + add + 2e-6 + 3e-6 + sent / 5e9).epsilon(1e-12));
  // A kind the model has no figures for takes the default link.
  CHECK(mm.collectiveSeconds(ir::OpKind::AllGather, 2, 10000) == doctest::Approx(2 * 5e-6 + 10000 / 10e9));
  CHECK(passes::costJson(c)["predicted_seconds"]["total"].get<double>() == doctest::Approx(c.seconds()));
}

TEST_CASE("a loop counts its body's seconds once per iteration, its call overhead never") {
  auto m = parse(
      "np = 1\n\n"
      "func @f(%0: f32[256, 256]) -> (f32[256, 256]) {\n"
      "  %1 = loop %0 {carried = 1, trip = 3} : f32[256, 256] {\n"
      "    body(%2: i32, %3: f32[256, 256]):\n"
      "    %4 = matmul %3, %3 : f32[256, 256]\n"
      "    yield %4\n"
      "  }\n"
      "  return %1\n}\n");
  const passes::MachineModel mm = calibrated();
  const passes::Cost c = passes::estimateCost(*m, *m->functions[0], mm);
  CHECK(c.gemmSeconds == doctest::Approx(3 * (2.0 * 256 * 256 * 256 / 200e9 + 1e-7)).epsilon(1e-12));
  CHECK(c.callSeconds == 2e-6);
}

TEST_CASE("the machine file: written, read back per transport, errors named") {
  const std::string dir = (std::filesystem::temp_directory_path() / ("gsl_mm_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  std::string err;
  // No file: the default model, no error.
  passes::MachineModel none = passes::loadMachineModel(dir, "threads", &err);
  CHECK(!none.calibrated());
  CHECK(err.empty());

  passes::MachineModel t = calibrated();
  t.cpu = "Test CPU";
  t.date = "2026-12-07T00:00:00Z";
  t.ranks = 2;
  REQUIRE(passes::saveMachineModelJson(dir, passes::machineModelJson(t)) == "");
  passes::MachineModel back = passes::loadMachineModel(dir, "threads", &err);
  CHECK(err.empty());
  CHECK(back.calibrated());
  CHECK(back.cpu == "Test CPU");
  CHECK(back.gemmFlopsPerS[1] == 100e9);
  CHECK(back.callOverheadS == 2e-6);
  CHECK(back.link(ir::OpKind::AllReduce).bytesPerS == 5e9);

  // An MPI section added later keeps the threads one.
  passes::MachineModel mpi = t;
  mpi.transport = "mpi";
  mpi.collectives[ir::OpKind::AllReduce] = {20e-6, 2e9};
  nlohmann::ordered_json old;
  {
    std::ifstream in(passes::machineModelPath(dir));
    old = nlohmann::ordered_json::parse(in);
  }
  REQUIRE(passes::saveMachineModelJson(dir, passes::machineModelJson(mpi, old)) == "");
  CHECK(passes::loadMachineModel(dir, "threads").link(ir::OpKind::AllReduce).latencyS == 3e-6);
  CHECK(passes::loadMachineModel(dir, "mpi").link(ir::OpKind::AllReduce).latencyS == 20e-6);

  // A transport never measured: the compute rates, the default links, and a note.
  std::filesystem::remove(passes::machineModelPath(dir));
  REQUIRE(passes::saveMachineModelJson(dir, passes::machineModelJson(t)) == "");
  err.clear();
  passes::MachineModel noMpi = passes::loadMachineModel(dir, "mpi", &err);
  CHECK(noMpi.calibrated());
  CHECK(noMpi.link(ir::OpKind::AllReduce).latencyS == 5e-6);
  CHECK(err.find("gsl calibrate --mpi") != std::string::npos);

  // A broken file: the default model and an error naming the file.
  {
    std::ofstream out(passes::machineModelPath(dir));
    out << "{\"cpu\": \"x\"";
  }
  err.clear();
  CHECK(!passes::loadMachineModel(dir, "threads", &err).calibrated());
  CHECK(err.find("machine.json") != std::string::npos);
  {
    std::ofstream out(passes::machineModelPath(dir));
    out << "{\"cpu\": \"x\", \"gemm_flops_per_s\": {\"large\": 1}}";
  }
  err.clear();
  CHECK(!passes::loadMachineModel(dir, "threads", &err).calibrated());
  CHECK(err.find("missing or malformed") != std::string::npos);
  std::filesystem::remove_all(dir);
}
