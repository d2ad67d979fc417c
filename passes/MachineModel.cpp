#include "passes/MachineModel.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gsl::passes {

namespace {

const char* kClassKeys[kGemmClasses] = {"large", "skinny", "small"};

std::string rate(double perS, double unit, const char* name) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f %s", perS / unit, name);
  return buf;
}

}  // namespace

const char* gemmClassName(GemmClass c) { return kClassKeys[(int)c]; }

GemmClass gemmClassOf(int64_t m, int64_t n, int64_t k) {
  const int64_t least = std::min({m, n, k});
  if (least >= 256) return GemmClass::Large;
  if (least >= 32) return GemmClass::Skinny;
  return GemmClass::Small;
}

const LinkModel& MachineModel::link(ir::OpKind k) const {
  auto it = collectives.find(k);
  return it == collectives.end() ? defaultLink : it->second;
}

double MachineModel::collectiveSeconds(ir::OpKind k, uint64_t calls, uint64_t bytes) const {
  const LinkModel& l = link(k);
  return (double)calls * l.latencyS + (double)bytes / l.bytesPerS;
}

std::string MachineModel::describe() const {
  if (!calibrated())
    return "machine model: " + std::to_string((int)(gemmFlopsPerS[0] / 1e9)) + " GFLOP/s per rank, " +
           std::to_string((int)(defaultLink.bytesPerS / 1e9)) + " GB/s per link, " +
           std::to_string((int)(defaultLink.latencyS * 1e6)) + " us latency per collective call\n";
  std::ostringstream os;
  os << "machine model: calibrated " << date << (cpu.empty() ? "" : " on " + cpu) << ": GEMM "
     << rate(gemmFlopsPerS[0], 1e9, "") << "/" << rate(gemmFlopsPerS[1], 1e9, "") << "/"
     << rate(gemmFlopsPerS[2], 1e9, "GFLOP/s") << " (large/skinny/small), memory "
     << rate(memoryBytesPerS, 1e9, "GB/s") << ", collectives on " << transport;
  if (auto it = collectives.find(ir::OpKind::AllReduce); it != collectives.end()) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " (all_reduce %.1f us + %.1f GB/s)", it->second.latencyS * 1e6,
                  it->second.bytesPerS / 1e9);
    os << buf;
  }
  os << "\n";
  return os.str();
}

const MachineModel& defaultMachineModel() {
  static const MachineModel m;
  return m;
}

std::string machineModelPath(const std::string& dir) { return dir + "/machine.json"; }

std::string machineModelDir(const std::string& cacheDir) {
  if (const char* d = std::getenv("GSL_MACHINE_DIR")) return d;
  return cacheDir;
}

MachineModel loadMachineModel(const std::string& dir, const std::string& transport, std::string* error) {
  MachineModel m;
  m.transport = transport;
  if (dir.empty()) return m;
  const std::string path = machineModelPath(dir);
  std::ifstream in(path);
  if (!in) return m;
  auto fail = [&](const std::string& why) {
    if (error) *error = path + ": " + why;
    MachineModel d;
    d.transport = transport;
    return d;
  };
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not a machine file written by gsl calibrate (not JSON)");
  try {
    MachineModel c;
    c.source = "calibrated";
    c.transport = transport;
    c.cpu = j.value("cpu", "");
    c.date = j.value("date", "");
    const auto& g = j.at("gemm_flops_per_s");
    for (int i = 0; i < kGemmClasses; ++i) c.gemmFlopsPerS[i] = g.at(kClassKeys[i]).get<double>();
    c.elementwiseFlopsPerS = j.at("elementwise_flops_per_s").get<double>();
    c.memoryBytesPerS = j.at("memory_bytes_per_s").get<double>();
    c.cacheBytesPerS = j.at("cache_bytes_per_s").get<double>();
    c.opOverheadS = j.at("op_overhead_s").get<double>();
    c.callOverheadS = j.at("call_overhead_s").get<double>();
    for (double r : c.gemmFlopsPerS)
      if (!(r > 0)) return fail("a GEMM rate is not positive");
    if (!(c.elementwiseFlopsPerS > 0) || !(c.memoryBytesPerS > 0) || !(c.cacheBytesPerS > 0) || !(c.opOverheadS >= 0) ||
        !(c.callOverheadS >= 0))
      return fail("a rate is not positive");
    const auto& ts = j.at("transports");
    if (!ts.contains(transport)) {
      if (error) *error = path + ": no collectives measured on " + transport + " (gsl calibrate" +
                          (transport == "mpi" ? " --mpi" : "") + " measures them); the default link model is used";
      return c;
    }
    const auto& t = ts.at(transport);
    c.ranks = t.value("ranks", (int64_t)0);
    for (const auto& [name, v] : t.at("collectives").items()) {
      const ir::OpInfo* info = ir::lookupMnemonic(name);
      if (!info || info->cls != ir::OpClass::Collective) return fail("'" + name + "' is not a collective");
      LinkModel l{v.at("latency_s").get<double>(), v.at("bytes_per_s").get<double>()};
      if (!(l.latencyS >= 0) || !(l.bytesPerS > 0)) return fail("a link rate of " + name + " is not positive");
      c.collectives[info->kind] = l;
    }
    return c;
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("missing or malformed field (") + e.what() + ")");
  }
}

nlohmann::ordered_json machineModelJson(const MachineModel& m, nlohmann::ordered_json into) {
  nlohmann::ordered_json transports = nlohmann::ordered_json::object();
  if (into.is_object() && into.contains("transports") && into["transports"].is_object())
    transports = into["transports"];
  nlohmann::ordered_json g = nlohmann::ordered_json::object();
  for (int i = 0; i < kGemmClasses; ++i) g[kClassKeys[i]] = m.gemmFlopsPerS[i];
  nlohmann::ordered_json links = nlohmann::ordered_json::object();
  for (const auto& [k, l] : m.collectives)
    links[ir::opName(k)] = {{"latency_s", l.latencyS}, {"bytes_per_s", l.bytesPerS}};
  transports[m.transport] = {{"ranks", m.ranks}, {"collectives", std::move(links)}};
  return {{"cpu", m.cpu},
          {"date", m.date},
          {"gemm_flops_per_s", std::move(g)},
          {"elementwise_flops_per_s", m.elementwiseFlopsPerS},
          {"memory_bytes_per_s", m.memoryBytesPerS},
          {"cache_bytes_per_s", m.cacheBytesPerS},
          {"op_overhead_s", m.opOverheadS},
          {"call_overhead_s", m.callOverheadS},
          {"transports", std::move(transports)}};
}

std::string saveMachineModelJson(const std::string& dir, const nlohmann::ordered_json& j) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create " + dir + ": " + ec.message();
  const std::string path = machineModelPath(dir);
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out.flush()) {
      std::filesystem::remove(tmp, ec);
      return "cannot write " + tmp;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return "cannot write " + path + ": " + ec.message();
  }
  return "";
}

}  // namespace gsl::passes
