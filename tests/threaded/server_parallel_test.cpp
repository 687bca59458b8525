// `specula serve --parallel N` on loopback: N streams started together all get tokens before any
// of them finishes; with N running and --max-queue Q waiting, the next request gets 429; the load
// gauges (running, waiting, KV-cache utilization) follow; and concurrent greedy requests get
// exactly the text each gets alone.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "prometheus_metric.h"
#include "server_process.h"
#include "shared_checkpoint.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using specula::test::metric;
using specula::test::run_cli;
using specula::test::ServerProcess;

class ServerParallel : public ::testing::Test {
 protected:
  static std::string model() { return specula::test::shared_text_pair().model; }
  static std::string drafter() { return specula::test::shared_text_pair().drafter; }
};

// A streaming completion on its own connection; records when its first token and its end came.
struct Stream {
  std::atomic<int> chunks{0};
  std::atomic<bool> hang_up{false};
  Clock::time_point first, end;
  std::thread thread;

  void start(const ServerProcess& s, const json& body) {
    thread = std::thread([this, &s, body] {
      auto c = s.client();
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.set_header("Content-Type", "application/json");
      req.body = body.dump();
      req.content_receiver = [this](const char* data, size_t n, uint64_t, uint64_t) {
        if (std::string(data, n).find("\"text\"") != std::string::npos && chunks++ == 0) first = Clock::now();
        return !hang_up.load();
      };
      c.send(req);
      end = Clock::now();
    });
  }
};

bool wait_for(const std::function<bool()>& done, std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto t0 = Clock::now();
  while (!done()) {
    if (Clock::now() - t0 > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST_F(ServerParallel, StreamsRunTogetherTheNextWaitsAndThenOneGets429) {
  ServerProcess s({"--model", model(), "--draft", drafter(), "--threads", "1", "--parallel", "3", "--max-queue", "1"});
  ASSERT_TRUE(s.wait_ready());
  const json endless = {{"prompt", "Hello there"}, {"max_tokens", 1000000}, {"ignore_eos", true}, {"stream", true}};
  std::vector<Stream> running(3);
  for (Stream& r : running) r.start(s, endless);
  ASSERT_TRUE(wait_for([&] {
    for (Stream& r : running)
      if (r.chunks < 3) return false;
    return true;
  })) << "every one of the 3 parallel streams gets tokens while the others run";

  Stream queued;
  queued.start(s, endless);
  auto c = s.client(10);
  ASSERT_TRUE(wait_for([&] {
    auto m = c.Get("/metrics");
    return m && metric(m->body, "specula_num_requests_waiting") == 1.0;
  })) << "the fourth request waits for a slot";
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(metric(m->body, "specula_num_requests_running"), 3.0) << m->body;
  EXPECT_GT(metric(m->body, "specula_kv_cache_utilization"), 0.0);
  EXPECT_LE(metric(m->body, "specula_kv_cache_utilization"), 1.0);
  EXPECT_EQ(queued.chunks.load(), 0);

  auto refused = c.Post("/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 2}}.dump(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 429) << "3 running + 1 waiting: the fifth is refused";

  // One running stream hangs up: the waiting one gets its slot.
  running[0].hang_up = true;
  running[0].thread.join();
  EXPECT_TRUE(wait_for([&] { return queued.chunks >= 3; }));
  for (size_t i = 1; i < running.size(); ++i) running[i].hang_up = true;
  queued.hang_up = true;
  for (size_t i = 1; i < running.size(); ++i) running[i].thread.join();
  queued.thread.join();
}

TEST_F(ServerParallel, StreamsStartedTogetherAllGetAFirstTokenBeforeAnyFinishes) {
  ServerProcess s({"--model", model(), "--threads", "1", "--parallel", "4"});
  ASSERT_TRUE(s.wait_ready());
  std::vector<Stream> streams(4);
  for (size_t i = 0; i < streams.size(); ++i)
    streams[i].start(s, json{{"prompt", "Story number " + std::to_string(i)},
                             {"max_tokens", 40},
                             {"ignore_eos", true},
                             {"stream", true}});
  for (Stream& st : streams) st.thread.join();
  Clock::time_point last_first = streams[0].first, first_end = streams[0].end;
  for (const Stream& st : streams) {
    ASSERT_GT(st.chunks.load(), 0);
    last_first = std::max(last_first, st.first);
    first_end = std::min(first_end, st.end);
  }
  EXPECT_LT(last_first, first_end);
}

TEST_F(ServerParallel, ConcurrentGreedyRequestsGetTheirAloneText) {
  ServerProcess s({"--model", model(), "--draft", drafter(), "--threads", "2", "--parallel", "3", "--no-prompt-cache"});
  ASSERT_TRUE(s.wait_ready());
  std::vector<json> bodies;
  for (int i = 0; i < 5; ++i)
    bodies.push_back({{"prompt", std::string(static_cast<size_t>(1 + 7 * i), 'a') + " and then " + std::to_string(i)},
                      {"max_tokens", 12 + 3 * i},
                      {"temperature", 0},
                      {"ignore_eos", true}});
  bodies[3]["temperature"] = 0.8;  // seeded sampling reproduces too
  bodies[3]["seed"] = 42;
  auto text_of = [&](const json& body) {
    auto c = s.client();
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return std::string();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body)["choices"][0]["text"].get<std::string>();
  };
  std::vector<std::string> alone;
  for (const json& b : bodies) alone.push_back(text_of(b));
  std::vector<std::string> together(bodies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i) threads.emplace_back([&, i] { together[i] = text_of(bodies[i]); });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "request " << i;
}

TEST_F(ServerParallel, ParallelOutOfRangeIsAUsageError) {
  EXPECT_EQ(run_cli("serve --model " + model() + " --parallel 0").code, 2);
  EXPECT_EQ(run_cli("serve --model " + model() + " --parallel 100000").code, 2);
}

}  // namespace
