// The read loop of `gsl repl`: libedit on a terminal, plain lines otherwise.
#include "repl/Repl.h"

#include <histedit.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "repl/Session.h"
#include "repl/Text.h"

namespace gsl::repl {

namespace {

const char* kPrompt = "gsl> ";
const char* kContinue = "...> ";

enum class Read { Line, Eof, Cancel };

class Reader {
 public:
  virtual ~Reader() = default;
  virtual Read read(bool continuation, std::string& line) = 0;
};

// Pipes and files: one line at a time, no prompts (unless echoing).
class PlainReader : public Reader {
 public:
  PlainReader(std::istream& in, std::ostream& out, bool echo) : in_(in), out_(out), echo_(echo) {}
  Read read(bool continuation, std::string& line) override {
    if (!std::getline(in_, line)) return Read::Eof;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (echo_) out_ << (continuation ? kContinue : kPrompt) << line << "\n";
    return Read::Line;
  }

 private:
  std::istream& in_;
  std::ostream& out_;
  bool echo_;
};

// ------------------------------------------------------------------ libedit

Session* g_session = nullptr;
const char* g_prompt = kPrompt;
bool g_cancelled = false;

char* promptFn(EditLine*) { return const_cast<char*>(g_prompt); }

int terminalColumns() {
  struct winsize w;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

// Tab: completes the word before the cursor as far as it is unique; a
// second Tab with several candidates lists them.
unsigned char completeFn(EditLine* el, int) {
  const LineInfo* li = el_line(el);
  std::string before(li->buffer, li->cursor - li->buffer);
  size_t start = before.size();
  auto cands = g_session->complete(before, start);
  if (cands.empty()) return CC_REFRESH_BEEP;
  std::string word = before.substr(start);
  std::string lcp = cands[0];
  for (const auto& c : cands) {
    size_t i = 0;
    while (i < lcp.size() && i < c.size() && lcp[i] == c[i]) ++i;
    lcp.resize(i);
  }
  bool command = !word.empty() && word[0] == ':';
  if (lcp.size() > word.size() || (cands.size() == 1 && command)) {
    std::string ins = lcp.substr(word.size());
    if (cands.size() == 1 && command) ins += " ";
    el_insertstr(el, ins.c_str());
    return CC_REFRESH;
  }
  if (cands.size() == 1) return CC_REFRESH;
  size_t w = 0;
  for (const auto& c : cands) w = std::max(w, c.size());
  w += 2;
  size_t perLine = std::max<size_t>(1, (size_t)terminalColumns() / w);
  std::string list = "\n";
  for (size_t i = 0; i < cands.size(); ++i) {
    list += cands[i];
    if ((i + 1) % perLine == 0 || i + 1 == cands.size()) list += "\n";
    else list += std::string(w - cands[i].size(), ' ');
  }
  std::fputs(list.c_str(), stdout);
  std::fflush(stdout);
  return CC_REDISPLAY;
}

// Ctrl-C: abandon the line (and an unfinished multi-line input).
unsigned char cancelFn(EditLine* el, int) {
  const LineInfo* li = el_line(el);
  el_cursor(el, (int)(li->lastchar - li->cursor));
  el_insertstr(el, "^C");
  g_cancelled = true;
  el_push(el, "\n");  // ends the line the usual way (cursor to a new line)
  return CC_REFRESH;
}

// Ctrl-C while an input is being evaluated: the work cannot be interrupted
// safely (rank threads), so say so instead of ending the session.
void onSigint(int) {
  const char msg[] = "\n(busy: an evaluation cannot be interrupted; Ctrl-\\ ends gsl)\n";
  ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)n;
}

class EditReader : public Reader {
 public:
  explicit EditReader(Session& s) {
    g_session = &s;
    hist_ = history_init();
    HistEvent ev;
    history(hist_, &ev, H_SETSIZE, 1000);
    history(hist_, &ev, H_SETUNIQUE, 1);
    if (const char* home = std::getenv("HOME"); home && *home) {
      path_ = std::string(home) + "/.gsl_history";
      history(hist_, &ev, H_LOAD, path_.c_str());
    }
    el_ = el_init("gsl", stdin, stdout, stderr);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_PROMPT, promptFn);
    el_set(el_, EL_HIST, history, hist_);
    el_set(el_, EL_ADDFN, "gsl-complete", "complete a command, name or builtin", completeFn);
    el_set(el_, EL_BIND, "^I", "gsl-complete", nullptr);
    el_set(el_, EL_ADDFN, "gsl-cancel", "cancel the current line", cancelFn);
    el_set(el_, EL_BIND, "^C", "gsl-cancel", nullptr);
    // ^C reaches the editor as a key while a line is edited (not SIGINT).
    el_set(el_, EL_SETTY, "-d", "-isig", nullptr);
    el_source(el_, nullptr);  // ~/.editrc, as other libedit programs
    struct sigaction sa {};
    sa.sa_handler = onSigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &oldInt_);
  }
  ~EditReader() override {
    sigaction(SIGINT, &oldInt_, nullptr);
    el_end(el_);
    history_end(hist_);
    g_session = nullptr;
  }

  Read read(bool continuation, std::string& line) override {
    std::cout.flush();
    g_prompt = continuation ? kContinue : kPrompt;
    g_cancelled = false;
    int count = 0;
    const char* s = el_gets(el_, &count);
    if (g_cancelled) return Read::Cancel;
    if (!s) {
      if (count == -1 && errno == EINTR) return Read::Cancel;
      std::fputs("\n", stdout);
      return Read::Eof;
    }
    line = s;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (!trim(line).empty()) {
      HistEvent ev;
      history(hist_, &ev, H_ENTER, line.c_str());
      if (!path_.empty()) history(hist_, &ev, H_SAVE, path_.c_str());
    }
    return Read::Line;
  }

 private:
  EditLine* el_ = nullptr;
  History* hist_ = nullptr;
  std::string path_;
  struct sigaction oldInt_ {};
};

}  // namespace

int runRepl(const ReplOptions& opts) {
  bool edit = !opts.in && isatty(STDIN_FILENO);
  std::istream& in = opts.in ? *opts.in : std::cin;
  std::ostream& out = opts.out ? *opts.out : std::cout;
  const char* term = std::getenv("TERM");
  bool color = opts.color ? *opts.color
                          : edit && !opts.out && isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR") &&
                                !(term && std::strcmp(term, "dumb") == 0);
  Session session(out, color, opts.np, opts.defines);
  if (edit)
    out << "gsl repl (np = " << opts.np << "): :help lists the commands, Tab completes, Ctrl-D leaves\n";
  if (!opts.file.empty()) session.load(opts.file);
  out.flush();

  std::unique_ptr<Reader> reader;
  if (edit) reader = std::make_unique<EditReader>(session);
  else reader = std::make_unique<PlainReader>(in, out, opts.echo);

  while (!session.quitRequested()) {
    std::string entry, line;
    Read r = reader->read(false, line);
    if (r == Read::Eof) break;
    if (r == Read::Cancel) continue;
    entry = line;
    bool cancelled = false, eof = false;
    while (openBrackets(entry) > 0) {
      r = reader->read(true, line);
      if (r == Read::Eof) {
        eof = true;
        break;
      }
      if (r == Read::Cancel) {
        cancelled = true;
        break;
      }
      entry += "\n" + line;
    }
    if (cancelled) continue;
    session.handle(entry);
    out.flush();
    if (eof) break;
  }
  out.flush();
  return 0;
}

}  // namespace gsl::repl
