// `specula chat` through the real binary on a synthetic checkpoint carrying the Gemma 4 test
// tokenizer: two turns on a pipe (the second turn reuses the KV cache: fewer tokens prefilled than
// its prompt holds), the commands, and sessions on a pseudo-terminal: Ctrl-C stops an answer in
// progress, the chat goes on to the next prompt, and Ctrl-D ends it with exit 0; a line edited
// with the cursor keys and recalled with Up is sent as edited.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.h"
#include "read_file.h"
#include "shared_checkpoint.h"

namespace {

namespace fs = std::filesystem;

using Result = specula::test::CliResult;
using specula::test::read_file;
using specula::test::run_shell;

struct TurnStats {
  long prefilled = 0, total = 0, cached = 0;
};

// Every "prefilled P of T (C cached)" in the statistics lines.
std::vector<TurnStats> parse_stats(const std::string& err) {
  std::vector<TurnStats> turns;
  const std::string key = "prefilled ";
  for (size_t at = err.find(key); at != std::string::npos; at = err.find(key, at + 1)) {
    TurnStats t;
    if (std::sscanf(err.c_str() + at, "prefilled %ld of %ld (%ld cached)", &t.prefilled, &t.total, &t.cached) == 3)
      turns.push_back(t);
  }
  return turns;
}

class ChatCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "specula-chat-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string model() { return specula::test::shared_text_pair().model; }
  static std::string drafter() { return specula::test::shared_text_pair().drafter; }

  // Runs `specula chat` with `input` on a pipe; stderr lands in err.
  static Result chat_pipe(const std::string& input, const std::string& flags, std::string& err) {
    const std::string in_file = dir_ + "/input.txt";
    const std::string err_file = dir_ + "/stderr.txt";
    std::ofstream(in_file, std::ios::binary) << input;
    const Result r = run_shell(std::string(SPECULA_BINARY) + " chat --model " + model() + " " + flags + " < " +
                               in_file + " 2> " + err_file);
    err = read_file(err_file);
    return r;
  }

  static std::string dir_;
};

std::string ChatCli::dir_;

TEST_F(ChatCli, SecondTurnReusesTheCache) {
  std::string err;
  const Result r = chat_pipe("Hello there\nAnd what about tomorrow?\n",
                             "--max-tokens 8 --temperature 0 --threads 1 --system 'Be brief.'", err);
  ASSERT_EQ(r.code, 0) << err;
  const std::vector<TurnStats> turns = parse_stats(err);
  ASSERT_EQ(turns.size(), 2u) << err;
  EXPECT_EQ(turns[0].cached, 0);
  EXPECT_EQ(turns[0].prefilled, turns[0].total);
  // Gemma 4's template renders the generation prompt with an empty thought channel that the
  // history omits, so the shared prefix ends at the first turn's "<|turn>model\n".
  EXPECT_GT(turns[1].cached, 0) << err;
  EXPECT_LT(turns[1].cached, turns[0].total) << err;
  EXPECT_LT(turns[1].prefilled, turns[1].total);
  EXPECT_EQ(turns[1].prefilled + turns[1].cached, turns[1].total);
  EXPECT_NE(err.find("[8 tokens"), std::string::npos) << err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n') >= 2, true) << r.out;  // one line per answer at least
}

TEST_F(ChatCli, SpeculativeChatShowsAcceptanceAndCommandsWork) {
  std::string err;
  const Result r = chat_pipe("/help\nHi\n/reset\nHi\n/exit\nnever read\n",
                             "--draft " + drafter() + " --gamma 2 --max-tokens 6 --temperature 0 --threads 1", err);
  ASSERT_EQ(r.code, 0) << err;
  EXPECT_NE(r.out.find("/reset"), std::string::npos) << r.out;  // the help text
  EXPECT_NE(err.find("(new conversation)"), std::string::npos) << err;
  const std::vector<TurnStats> turns = parse_stats(err);
  ASSERT_EQ(turns.size(), 2u) << err;  // /exit stopped before the last line
  EXPECT_NE(err.find("acceptance"), std::string::npos) << err;
  // The new conversation has the same first prompt: all of it but the last token comes from the
  // cache (which still holds that prompt and the answer).
  EXPECT_EQ(turns[1].total, turns[0].total);
  EXPECT_EQ(turns[1].cached, turns[1].total - 1) << err;
}

TEST_F(ChatCli, MissingTokenizerIsAClearError) {
  const std::string bare = dir_ + "/bare";
  ASSERT_EQ(
      run_shell(std::string(SPECULA_BINARY) + " synth --preset tiny-dense --out " + bare + " >/dev/null 2>&1").code, 0);
  const Result r = run_shell("echo hi | " + std::string(SPECULA_BINARY) + " chat --model " + bare + " 2>&1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("tokenizer.json"), std::string::npos) << r.out;
}

// ---- pseudo-terminal ----

class Pty {
 public:
  // Runs `argv` on a new terminal of type `term` (the line editor reads its key sequences from terminfo).
  bool start(const std::vector<std::string>& argv, const std::string& term = "xterm") {
    master_ = posix_openpt(O_RDWR | O_NOCTTY);
    if (master_ < 0 || grantpt(master_) != 0 || unlockpt(master_) != 0) return false;
    const std::string slave_name = ptsname(master_);
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      setenv("TERM", term.c_str(), 1);
      setsid();  // a new session whose controlling terminal is the pty: ^C reaches it as SIGINT
      const int slave = open(slave_name.c_str(), O_RDWR);
      if (slave < 0) _exit(126);
      ioctl(slave, TIOCSCTTY, 0);
      dup2(slave, 0);
      dup2(slave, 1);
      dup2(slave, 2);
      if (slave > 2) close(slave);
      close(master_);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    return true;
  }
  ~Pty() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }

  void send(const std::string& s) { ASSERT_EQ(write(master_, s.data(), s.size()), static_cast<ssize_t>(s.size())); }

  // Reads until `done(output since `from`)` holds or the deadline passes.
  template <typename Pred>
  bool read_until(size_t from, Pred done, int seconds = 120) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!done(out_.substr(std::min(from, out_.size())))) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{master_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(master_, buf, sizeof buf);
      if (n <= 0) return done(out_.substr(std::min(from, out_.size())));  // the child closed the terminal
      out_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  // Exit code after the child ends (drains the terminal meanwhile), -1 on timeout or a signal.
  int wait_exit(int seconds = 60) {
    read_until(
        out_.size(), [](const std::string&) { return false; }, seconds);
    int status = 0;
    for (int i = 0; i < seconds * 10; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      usleep(100000);
    }
    return -1;
  }

  const std::string& output() const { return out_; }

 private:
  int master_ = -1;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string out_;
};

TEST_F(ChatCli, CtrlCStopsTheAnswerAndTheChatGoesOn) {
  Pty pty;
  ASSERT_TRUE(pty.start(
      {SPECULA_BINARY, "chat", "--model", model(), "--max-tokens", "1000000", "--temperature", "0", "--threads", "1"}));
  auto has = [](const std::string& what) {
    return [what](const std::string& s) { return s.find(what) != std::string::npos; };
  };
  ASSERT_TRUE(pty.read_until(0, has("> "))) << pty.output();
  size_t mark = pty.output().size();
  pty.send("Tell me everything\n");
  // The echo of the line, then the answer streams: interrupt once it is well under way.
  ASSERT_TRUE(pty.read_until(mark, [](const std::string& s) {
    const size_t echo = s.find("everything");
    return echo != std::string::npos && s.size() > echo + 200;
  })) << pty.output();
  mark = pty.output().size();
  pty.send("\x03");  // the terminal's VINTR: SIGINT to the chat
  ASSERT_TRUE(pty.read_until(mark, [](const std::string& s) {
    const size_t stats = s.find("interrupted]");
    return stats != std::string::npos && s.find("> ", stats) != std::string::npos;
  })) << pty.output().substr(mark);
  pty.send("\x04");  // Ctrl-D at the prompt: end of input
  EXPECT_EQ(pty.wait_exit(), 0) << pty.output().substr(mark);
}

TEST_F(ChatCli, CtrlCAtThePromptExits) {
  Pty pty;
  ASSERT_TRUE(pty.start({SPECULA_BINARY, "chat", "--model", model(), "--threads", "1"}));
  ASSERT_TRUE(pty.read_until(0, [](const std::string& s) { return s.find("> ") != std::string::npos; }))
      << pty.output();
  pty.send("\x03");
  EXPECT_EQ(pty.wait_exit(), 0) << pty.output();
}

// The text of the answers: the pty output without the carriage returns the terminal adds.
std::string without_cr(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '\r'), s.end());
  return s;
}

TEST_F(ChatCli, TerminalLinesAreEditedAndRecalled) {
  const std::string flags = "--max-tokens 4 --temperature 0 --threads 1";
  // What the chat does with "hello" sent twice, and its first answer.
  std::string err;
  ASSERT_EQ(chat_pipe("hello\nhello\n", flags, err).code, 0) << err;
  const std::vector<TurnStats> expected = parse_stats(err);
  ASSERT_EQ(expected.size(), 2u) << err;
  const Result first = chat_pipe("hello\n", flags, err);
  ASSERT_EQ(first.code, 0) << err;
  const std::string first_answer = first.out.substr(0, first.out.find_last_not_of('\n') + 1);
  ASSERT_FALSE(first_answer.empty()) << first.out;

  Pty pty;
  ASSERT_TRUE(pty.start(
      {SPECULA_BINARY, "chat", "--model", model(), "--max-tokens", "4", "--temperature", "0", "--threads", "1"}));
  auto answered = [](const std::string& s) {
    const size_t stats = s.find("length limit]");
    return stats != std::string::npos && s.find("> ", stats) != std::string::npos;
  };
  ASSERT_TRUE(pty.read_until(0, [](const std::string& s) { return s.find("> ") != std::string::npos; }))
      << pty.output();
  size_t mark = pty.output().size();
  pty.send("helo\x1b[Dl\r");  // "helo", Left, "l", Enter
  ASSERT_TRUE(pty.read_until(mark, answered)) << pty.output().substr(mark);
  mark = pty.output().size();
  pty.send("\x1b[A\r");  // Up, Enter
  ASSERT_TRUE(pty.read_until(mark, answered)) << pty.output().substr(mark);
  pty.send("\x04");
  EXPECT_EQ(pty.wait_exit(), 0) << pty.output();

  const std::vector<TurnStats> turns = parse_stats(pty.output());
  ASSERT_EQ(turns.size(), 2u) << pty.output();
  for (size_t i = 0; i < turns.size(); ++i) {
    EXPECT_EQ(turns[i].total, expected[i].total) << "turn " << i << ": " << pty.output();
    EXPECT_EQ(turns[i].cached, expected[i].cached) << "turn " << i << ": " << pty.output();
  }
  EXPECT_NE(without_cr(pty.output()).find(first_answer), std::string::npos) << first_answer << "\n" << pty.output();
}

}  // namespace
