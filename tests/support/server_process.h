#pragma once
// A `specula serve` child process for tests: started on a free loopback port (--port 0, the port
// read from its first stdout line), killed and reaped when the object goes away.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

namespace specula::test {

class ServerProcess {
 public:
  // `args` follow "specula serve"; "--host 127.0.0.1 --port 0" are added.
  explicit ServerProcess(std::vector<std::string> args, const std::string& stderr_path = "/dev/null") {
    args.insert(args.begin(), {SPECULA_BINARY, "serve", "--host", "127.0.0.1", "--port", "0"});
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) dup2(err, STDERR_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
    read_port();
  }
  ~ServerProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  httplib::Client client(int read_timeout_s = 60) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(read_timeout_s, 0);
    c.set_connection_timeout(5, 0);
    return c;
  }

  // Polls GET /health until it answers 200.
  bool wait_ready(std::chrono::seconds timeout = std::chrono::seconds(60)) const {
    if (port_ <= 0) return false;
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      auto c = client(5);
      if (auto r = c.Get("/health"); r && r->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Sends `sig` and waits for the exit; the exit code, or -1 (timeout or killed by a signal).
  int signal_and_wait(int sig, std::chrono::seconds timeout) {
    kill(pid_, sig);
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  void read_port() {
    std::string text;
    const std::string marker = "listening on http://127.0.0.1:";
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[256];
      const ssize_t n = read(out_, buf, sizeof buf);
      if (n <= 0) return;
      text.append(buf, static_cast<size_t>(n));
      const size_t at = text.find(marker);
      if (at != std::string::npos && text.find(' ', at + marker.size()) != std::string::npos) {
        port_ = std::stoi(text.substr(at + marker.size()));
        return;
      }
    }
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = -1;
  bool reaped_ = false;
};

}  // namespace specula::test
