// runtime/MpiLaunch: the mpirun command line of `gsl run --mpi` (hosts,
// transport, environment, pass-through options) and its option parsing.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/MpiLaunch.h"

using namespace gsl::runtime;

namespace {

bool has(const std::vector<std::string>& cmd, const std::vector<std::string>& seq) {
  return std::search(cmd.begin(), cmd.end(), seq.begin(), seq.end()) != cmd.end();
}

}  // namespace

TEST_CASE("mpirun command: one host is shared memory only") {
  MpiLaunchOptions o;
  o.np = 4;
  auto cmd = mpirunCommand("/bin/gsl", {"run", "a.gsl", "-np", "4"}, o, {});
  CHECK(cmd[0] == "mpirun");
  CHECK(has(cmd, {"-np", "4", "--oversubscribe"}));
  CHECK(has(cmd, {"--mca", "btl", "self,vader"}));
  CHECK(has(cmd, {"--mca", "pml", "ob1"}));
  CHECK(has(cmd, {"-x", "GSL_MPI_LAUNCHER=1"}));
  CHECK(!has(cmd, {"--hostfile"}));
  // The program and its arguments come last, in order.
  CHECK(std::vector<std::string>(cmd.end() - 5, cmd.end()) ==
        std::vector<std::string>{"/bin/gsl", "run", "a.gsl", "-np", "4"});
}

TEST_CASE("mpirun command: with hosts the transport is left to OpenMPI") {
  MpiLaunchOptions o;
  o.np = 8;
  o.hostfile = "hosts.txt";
  auto cmd = mpirunCommand("gsl", {"run", "a.gsl"}, o, {});
  CHECK(has(cmd, {"--hostfile", "hosts.txt"}));
  CHECK(!has(cmd, {"btl"}));
  CHECK(!has(cmd, {"btl_vader_single_copy_mechanism"}));
  CHECK(!has(cmd, {"pml"}));

  MpiLaunchOptions h;
  h.np = 8;
  h.hosts = "a:4,b:4";
  cmd = mpirunCommand("gsl", {"run", "a.gsl"}, h, {});
  CHECK(has(cmd, {"--host", "a:4,b:4"}));
  CHECK(!has(cmd, {"btl"}));
}

TEST_CASE("mpirun command: pass-through options follow gsl's own; a btl of the user's replaces the default") {
  MpiLaunchOptions o;
  o.np = 2;
  o.mpirunArgs = {"--mca", "btl", "self,tcp", "--bind-to", "core"};
  auto cmd = mpirunCommand("gsl", {"run", "a.gsl"}, o, {});
  CHECK(!has(cmd, {"self,vader"}));
  CHECK(!has(cmd, {"pml"}));
  CHECK(has(cmd, {"--mca", "btl", "self,tcp", "--bind-to", "core", "gsl", "run", "a.gsl"}));
  // A pml of the user's replaces ob1; the btl stays the default.
  o.mpirunArgs = {"--mca", "pml", "ucx"};
  cmd = mpirunCommand("gsl", {"run", "a.gsl"}, o, {});
  CHECK(has(cmd, {"--mca", "btl", "self,vader"}));
  CHECK(!has(cmd, {"ob1"}));
  CHECK(has(cmd, {"--mca", "pml", "ucx"}));
}

TEST_CASE("mpirun command: GSL_* variables reach the ranks on every host") {
  MpiLaunchOptions o;
  auto cmd = mpirunCommand("gsl", {}, o, {"HOME=/root", "GSL_TEST_FAULT=mismatch", "GSL_MPI_LAUNCHER=1", "PATH=/bin"});
  CHECK(has(cmd, {"-x", "GSL_TEST_FAULT"}));
  CHECK(std::count(cmd.begin(), cmd.end(), "GSL_MPI_LAUNCHER=1") == 1);
  CHECK(!has(cmd, {"-x", "GSL_MPI_LAUNCHER"}));
  CHECK(!has(cmd, {"-x", "HOME"}));
}

TEST_CASE("--host slot counts") {
  CHECK(hostListSlots("a:4,b:4") == 8);
  CHECK(hostListSlots("a,b,c") == 3);
  CHECK(hostListSlots("node1:2") == 2);
  CHECK(!hostListSlots(""));
  CHECK(!hostListSlots("a:4,"));
  CHECK(!hostListSlots("a:0"));
  CHECK(!hostListSlots("a:x"));
  CHECK(!hostListSlots(":4"));
}

TEST_CASE("--mpirun-args words") {
  using V = std::vector<std::string>;
  CHECK(splitMpirunArgs("") == V{});
  CHECK(splitMpirunArgs("  --mca btl_tcp_if_include eth0 ") == V{"--mca", "btl_tcp_if_include", "eth0"});
  CHECK(splitMpirunArgs("--map-by 'ppr:2:node' -x \"A=b c\"") == V{"--map-by", "ppr:2:node", "-x", "A=b c"});
  CHECK(splitMpirunArgs("a\\ b c") == V{"a b", "c"});
  CHECK(splitMpirunArgs("''") == V{""});
  CHECK(!splitMpirunArgs("--mca 'x"));
  CHECK(!splitMpirunArgs("\"x"));
}
