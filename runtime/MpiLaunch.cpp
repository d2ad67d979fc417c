#include "runtime/MpiLaunch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <regex>
#include <set>

namespace gsl::runtime {

namespace {

std::atomic<pid_t> g_child{0};
std::atomic<int> g_interrupts{0};

void onInterrupt(int) {
  int n = g_interrupts.fetch_add(1) + 1;
  pid_t c = g_child.load();
  if (c <= 0) return;
  if (n <= 2) ::kill(c, SIGUSR1);  // mpirun forwards it to every rank
  else ::kill(-c, SIGKILL);        // mpirun's process group
}

void writeErr(const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(2, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    off += (size_t)n;
  }
}

}  // namespace

bool underGslLauncher() { return std::getenv("GSL_MPI_LAUNCHER") != nullptr; }

std::optional<int64_t> hostListSlots(const std::string& hosts) {
  int64_t total = 0;
  size_t pos = 0;
  while (true) {
    size_t comma = hosts.find(',', pos);
    std::string item = hosts.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t colon = item.find(':');
    std::string name = item.substr(0, colon);
    if (name.empty()) return std::nullopt;
    int64_t slots = 1;
    if (colon != std::string::npos) {
      std::string n = item.substr(colon + 1);
      if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
      slots = std::stoll(n);
      if (slots < 1) return std::nullopt;
    }
    total += slots;
    if (comma == std::string::npos) return total;
    pos = comma + 1;
  }
}

std::optional<std::vector<std::string>> splitMpirunArgs(const std::string& text) {
  std::vector<std::string> words;
  std::string cur;
  bool inWord = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (inWord) words.push_back(cur);
      cur.clear();
      inWord = false;
    } else if (c == '\'' || c == '"') {
      size_t end = text.find(c, i + 1);
      if (end == std::string::npos) return std::nullopt;
      cur += text.substr(i + 1, end - i - 1);
      inWord = true;
      i = end;
    } else if (c == '\\' && i + 1 < text.size()) {
      cur += text[++i];
      inWord = true;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (inWord) words.push_back(cur);
  return words;
}

std::vector<std::string> mpirunCommand(const std::string& gslExe, const std::vector<std::string>& args,
                                       const MpiLaunchOptions& o, const std::vector<std::string>& environment) {
  std::vector<std::string> cmd = {"mpirun", "-np", std::to_string(o.np), "--oversubscribe"};
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  if (!o.hostfile.empty()) {
    cmd.push_back("--hostfile");
    cmd.push_back(o.hostfile);
  }
  if (!o.hosts.empty()) {
    cmd.push_back("--host");
    cmd.push_back(o.hosts);
  }
  // One host: shared memory and loopback only (works offline and in
  // containers), unless the user's mpirun options choose the btl; and the
  // ob1 messaging layer over it, unless they choose the pml (left alone,
  // OpenMPI probes UCX first: 0.2 s more of every rank's MPI_Init).
  auto userSets = [&](const char* component) {
    for (size_t i = 0; i + 1 < o.mpirunArgs.size(); ++i)
      if ((o.mpirunArgs[i] == "--mca" || o.mpirunArgs[i] == "-mca") && o.mpirunArgs[i + 1] == component) return true;
    return false;
  };
  if (o.hostfile.empty() && o.hosts.empty() && !userSets("btl")) {
    for (const char* a : {"--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none"})
      cmd.push_back(a);
    if (!userSets("pml"))
      for (const char* a : {"--mca", "pml", "ob1"}) cmd.push_back(a);
  }
  // The ranks on other hosts get only the variables named with -x.
  cmd.push_back("-x");
  cmd.push_back("GSL_MPI_LAUNCHER=1");
  for (const auto& e : environment) {
    size_t eq = e.find('=');
    if (e.rfind("GSL_", 0) == 0 && eq != std::string::npos && e.compare(0, eq, "GSL_MPI_LAUNCHER") != 0) {
      cmd.push_back("-x");
      cmd.push_back(e.substr(0, eq));
    }
  }
  for (const auto& a : o.mpirunArgs) cmd.push_back(a);
  cmd.push_back(gslExe);
  for (const auto& a : args) cmd.push_back(a);
  return cmd;
}

int launchUnderMpirun(const std::string& gslExe, const std::vector<std::string>& args, const MpiLaunchOptions& o) {
  std::vector<std::string> environment;
  for (char** e = environ; *e; ++e) environment.push_back(*e);
  std::vector<std::string> cmd = mpirunCommand(gslExe, args, o, environment);
  std::vector<char*> argv;
  for (auto& c : cmd) argv.push_back(c.data());
  argv.push_back(nullptr);

  // The ranks' environment: this one plus GSL_MPI_LAUNCHER=1 (built before
  // the fork: the child only execs).
  std::vector<std::string> envStore;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "GSL_MPI_LAUNCHER=", 17) != 0) envStore.push_back(*e);
  envStore.push_back("GSL_MPI_LAUNCHER=1");
  std::vector<char*> env;
  for (auto& e : envStore) env.push_back(e.data());
  env.push_back(nullptr);

  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) {
    std::cerr << "gsl: error: cannot start mpirun: " << std::strerror(errno) << "\n";
    return 1;
  }
  // Signals are handled from before the fork, so none is lost in between.
  struct sigaction sa, oldInt, oldTerm, oldHup;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &oldInt);
  sigaction(SIGTERM, &sa, &oldTerm);
  sigaction(SIGHUP, &sa, &oldHup);
  std::cout.flush();
  std::cerr.flush();
  const pid_t parent = ::getpid();
  pid_t child = ::fork();
  if (child < 0) {
    std::cerr << "gsl: error: cannot start mpirun: " << std::strerror(errno) << "\n";
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
    sigaction(SIGHUP, &oldHup, nullptr);
    ::close(err[0]);
    ::close(err[1]);
    return 1;
  }
  if (child == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);  // the parent died already
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGINT, &dfl, nullptr);
    sigaction(SIGTERM, &dfl, nullptr);
    sigaction(SIGHUP, &dfl, nullptr);
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(err[1], 2);
    ::execvpe("mpirun", argv.data(), env.data());
    // No allocation between fork and exec: only write(2).
    const char* why = std::strerror(errno);
    const char* msg = "gsl: error: cannot start mpirun (install openmpi-bin): ";
    ssize_t ignored = ::write(2, msg, std::strlen(msg));
    ignored = ::write(2, why, std::strlen(why));
    ignored = ::write(2, "\n", 1);
    (void)ignored;
    ::_exit(1);
  }
  ::setpgid(child, child);  // also here: no race with a signal sent to the group
  g_child.store(child);
  ::close(err[1]);
  if (g_interrupts.load() > 0) ::kill(child, SIGUSR1);

  // mpirun's stderr, line by line, until it exits.
  static const std::regex killed(
      R"(mpirun noticed that process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+) \(([^)]*)\))");
  std::string deadRank, deadHost, deadSignal, deadName;
  bool sawInterrupted = false;
  std::string pending;
  // Every rank reports a run-time error that every rank hits (a missing
  // file, a bad value): the user sees it once. A repeated error line is
  // dropped with the source line, caret and notes that follow it, and so is
  // a second "gsl: rank N failed:" line with the same reason.
  std::set<std::string> errorsShown, failuresShown;  // error lines; the why of "gsl: rank N failed: why"
  bool droppingRepeat = false;
  auto handleLine = [&](const std::string& line) {
    if (line.rfind("mpirun: Forwarding signal", 0) == 0) return;
    if (line == "gsl: interrupted") sawInterrupted = true;
    static const std::regex rankFailed(R"(^gsl: rank \d+ failed: (.*)$)");
    std::smatch f;
    if (std::regex_match(line, f, rankFailed) && !failuresShown.insert(f[1]).second) return;
    if (line.find("error: ") != std::string::npos) {
      droppingRepeat = !errorsShown.insert(line).second;
      if (droppingRepeat) return;
    } else if (droppingRepeat && (line.rfind(" ", 0) == 0 || line.find(": note: ") != std::string::npos)) {
      return;
    } else {
      droppingRepeat = false;
    }
    std::smatch m;
    if (deadRank.empty() && std::regex_search(line, m, killed)) {
      deadRank = m[1];
      deadHost = m[2];
      deadSignal = m[3];
      deadName = m[4];
    }
    writeErr(line + "\n");
  };
  int status = 0;
  bool exited = false;
  bool open = true;
  while (open) {
    struct pollfd p = {err[0], POLLIN, 0};
    int r = ::poll(&p, 1, 200);
    if (r < 0 && errno != EINTR) break;
    if (r > 0) {
      char buf[4096];
      ssize_t n = ::read(err[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        open = false;
      } else {
        pending.append(buf, (size_t)n);
        for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
          handleLine(pending.substr(0, nl));
          pending.erase(0, nl + 1);
        }
      }
    }
    // Something mpirun started might keep the pipe open: stop reading
    // once mpirun itself is gone and the pipe is drained.
    if (!exited && ::waitpid(child, &status, WNOHANG) == child) exited = true;
    if (exited && r == 0) break;
  }
  if (!pending.empty()) handleLine(pending);
  if (!exited) {
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }
  g_child.store(0);
  ::close(err[0]);
  sigaction(SIGINT, &oldInt, nullptr);
  sigaction(SIGTERM, &oldTerm, nullptr);
  sigaction(SIGHUP, &oldHup, nullptr);

  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (g_interrupts.load() > 0 || sawInterrupted) {
    if (!sawInterrupted) writeErr("gsl: interrupted\n");
    return 130;
  }
  if (!deadRank.empty()) {
    writeErr("gsl: error: rank " + deadRank + " on host " + deadHost + " was killed by signal " + deadSignal + " (" + deadName +
             "); the other ranks were stopped\n");
    return rc ? rc : 1;
  }
  return rc;
}

}  // namespace gsl::runtime
