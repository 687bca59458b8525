// `specula serve` under more raw TCP connections than --max-connections (bounded
// connection counts): idle and half-sent connections beyond the bound are refused at once with a
// 503 in OpenAI's shape, so the server's open descriptors stay bounded; a normal request is
// answered (503 while the bound is full, 200 once the held connections time out); /metrics shows
// the connections; and SIGTERM exits 0 at once even while every held connection waits for the
// rest of its request (the read timeout is 30 s there).
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "prometheus_metric.h"
#include "server_process.h"
#include "shared_checkpoint.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using specula::test::metric;
using specula::test::ServerProcess;

constexpr int kMaxConnections = 12;
constexpr int kFlood = 40;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Open descriptors of process `pid` (/proc/PID/fd), or -1.
int open_fds(pid_t pid) {
  DIR* dir = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

// A raw loopback connection to `port` (blocking), or -1.
int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// What the server sent on `fd` until it closed the connection, or until `timeout` passes without
// an end (then `closed` is false).
std::string read_until_closed(int fd, std::chrono::milliseconds timeout, bool& closed) {
  std::string text;
  closed = false;
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 1))) <= 0) continue;
    char buf[1024];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {  // end of file, or a reset after the answer
      closed = true;
      break;
    }
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

// The start of a request whose body never comes (the server waits for the rest).
const std::string kHalfRequest =
    "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    "Content-Length: 200\r\n\r\n{\"prompt\": \"Hel";

// Opens `n` connections; odd ones send half a request, even ones nothing.
std::vector<int> flood(int port, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = connect_to(port);
    if (fd < 0) break;
    if (i % 2 == 1) (void)send(fd, kHalfRequest.data(), kHalfRequest.size(), MSG_NOSIGNAL);
    fds.push_back(fd);
  }
  return fds;
}

void close_all(std::vector<int>& fds) {
  for (const int fd : fds) close(fd);
  fds.clear();
}

class ServerConnections : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);  // a write to a refused connection must fail, not end the test
    std::string tmpl = (fs::temp_directory_path() / "specula-conn-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string model() { return specula::test::shared_text_pair().model; }
  static std::vector<std::string> args(const std::string& read_timeout_s) {
    return {"--model",          model(),       "--threads",         "1",
            "--max-queue",      "4",           "--max-connections", std::to_string(kMaxConnections),
            "--read-timeout-s", read_timeout_s};
  }
  static std::string dir_;
};

std::string ServerConnections::dir_;

const std::string kSmallCompletion = json{{"prompt", "Hi"}, {"max_tokens", 2}}.dump();

TEST_F(ServerConnections, IdleAndHalfSentConnectionsBeyondTheBoundAreRefusedAndFdsStayBounded) {
  ServerProcess s(args("1"));
  ASSERT_TRUE(s.wait_ready());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the readiness probe's connection ends
  const int fds_before = open_fds(s.pid());
  ASSERT_GT(fds_before, 0);

  std::vector<int> clients = flood(s.port(), kFlood);
  ASSERT_EQ(static_cast<int>(clients.size()), kFlood);

  // (a) The server holds at most the bound: every connection beyond it got the 503 and was closed.
  int refused = 0;
  int held = 0;
  std::string refusal;
  for (const int fd : clients) {
    bool closed = false;
    const std::string text = read_until_closed(fd, std::chrono::milliseconds(100), closed);
    if (closed && text.rfind("HTTP/1.1 503", 0) == 0) {
      ++refused;
      refusal = text;
    } else if (!closed && text.empty()) {
      ++held;
    }
  }
  const int fds_full = open_fds(s.pid());
  EXPECT_LE(held, kMaxConnections);
  EXPECT_GE(refused, kFlood - kMaxConnections);
  // The held connections, plus refused ones the server keeps for up to 1 s so that their 503 is
  // not lost to a reset (at most as many again).
  EXPECT_LE(fds_full - fds_before, 2 * kMaxConnections) << "before " << fds_before << ", full " << fds_full;
  ASSERT_FALSE(refusal.empty());
  EXPECT_NE(refusal.find("Connection: close"), std::string::npos) << refusal;
  const json error = json::parse(refusal.substr(refusal.find("\r\n\r\n") + 4));
  EXPECT_EQ(error["error"]["type"], "server_error");
  EXPECT_EQ(error["error"]["code"], "too_many_connections");

  // (b) A normal request while the bound is full: a clean 503 at once.
  const auto t0 = Clock::now();
  auto c = s.client(10);
  auto busy = c.Post("/v1/completions", kSmallCompletion, "application/json");
  const double busy_s = seconds_since(t0);
  ASSERT_TRUE(busy) << "error " << static_cast<int>(busy.error());
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(json::parse(busy->body)["error"]["code"], "too_many_connections");
  EXPECT_LT(busy_s, 1.0);

  // The held connections end at the 1 s read timeout or 2 s keep-alive timeout; then it is served.
  int status = 0;
  const auto t1 = Clock::now();
  while (status != 200 && seconds_since(t1) < 10) {
    auto r = s.client(10).Post("/v1/completions", kSmallCompletion, "application/json");
    status = r ? r->status : -1;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 200);
  EXPECT_LT(seconds_since(t1), 5.0);

  // The gauge falls back to the probe itself (and perhaps the last request's connection).
  std::string text;
  double open = -1;
  for (int i = 0; i < 50; ++i) {
    auto m = s.client(5).Get("/metrics");
    text = m ? m->body : std::string();
    open = metric(text, "specula_http_connections");
    if (open >= 1 && open <= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(open, 1.0) << text;
  EXPECT_LE(open, 2.0) << text;
  EXPECT_GE(metric(text, "specula_http_connections_refused_total"), kFlood - kMaxConnections + 1.0) << text;
  close_all(clients);
  // Back to (about) where it started once the probes' keep-alive ends.
  int fds_after = open_fds(s.pid());
  for (int i = 0; i < 50 && fds_after > fds_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fds_after = open_fds(s.pid());
  }
  EXPECT_LE(fds_after, fds_before);
}

TEST_F(ServerConnections, SigtermExitsAtOnceWhileEveryConnectionWaitsForItsRequest) {
  ServerProcess s(args("30"));
  ASSERT_TRUE(s.wait_ready());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int fds_before = open_fds(s.pid());
  std::vector<int> clients = flood(s.port(), kFlood);
  ASSERT_EQ(static_cast<int>(clients.size()), kFlood);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LE(open_fds(s.pid()) - fds_before, 2 * kMaxConnections);

  const auto t0 = Clock::now();
  EXPECT_EQ(s.signal_and_wait(SIGTERM, std::chrono::seconds(20)), 0);
  EXPECT_LT(seconds_since(t0), 1.5);  // not the 30 s read timeout, nor the 2 s keep-alive one
  close_all(clients);
}

// Checked before the model loads: a value outside the flag's own range is a usage error (exit 2),
// a connection limit too small for the queue an error of the server's setup (exit 1); both name
// the flag and the limit.
TEST_F(ServerConnections, ConnectionLimitAndReadTimeoutOutOfRangeAreErrors) {
  const std::string err = dir_ + "/serve.err";
  auto serve = [&](const std::string& flags) {
    const std::string cmd = std::string(SPECULA_BINARY) + " serve --model " + model() + " --host 127.0.0.1 --port 0 " +
                            flags + " > /dev/null 2> " + err;
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  auto message = [&] {
    std::ifstream in(err);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(serve("--max-queue 16 --max-connections 23"), 1);
  EXPECT_NE(message().find("--max-connections 23 is too small for --max-queue 16 and --parallel 4: it must be at "
                           "least 24"),
            std::string::npos)
      << message();
  EXPECT_EQ(serve("--max-queue 16 --parallel 1 --max-connections 21 --read-timeout-s 0"), 2)
      << "21 connections are enough for one running and 16 waiting requests (and 4 probes)";
  EXPECT_NE(message().find("--read-timeout-s: 0 is not in [1, 3600]"), std::string::npos) << message();
  EXPECT_EQ(serve("--max-connections 5000"), 2);
  EXPECT_NE(message().find("--max-connections: 5000 is not in [1, 4096]"), std::string::npos) << message();
}

}  // namespace
