// The server's pieces that need no model: response JSON and SSE framing, Prometheus metrics, the
// bounded generation queue (FIFO, 429 capacity, cancellation of waiting and running jobs), the
// access-log line and the CORS origin rule.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "specula/server/access_log.h"
#include "specula/server/cors.h"
#include "specula/server/generation_queue.h"
#include "specula/server/metrics.h"
#include "specula/server/openai_response.h"

namespace {

using namespace specula::server;
using namespace std::chrono_literals;

TEST(ServerResponse, ErrorShape) {
  const ojson e = error_json(invalid_request("'n' must be 1", "n"));
  EXPECT_EQ(e["error"]["message"], "'n' must be 1");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "n");
  EXPECT_TRUE(e["error"]["code"].is_null());
}

TEST(ServerResponse, ChatCompletionWithToolCallsAndUsage) {
  const ResponseHeader h{"chatcmpl-x", 123, "m"};
  const Usage u{10, 4, 6, 8, 5, 77};
  const ojson body = chat_completion_json(h, "", {{"call_a", "f", R"({"x":1})"}}, "tool_calls", nullptr, u);
  EXPECT_EQ(body["object"], "chat.completion");
  const ojson& msg = body["choices"][0]["message"];
  EXPECT_TRUE(msg["content"].is_null());
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], R"({"x":1})");
  EXPECT_FALSE(msg["tool_calls"][0].contains("index"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(body["usage"]["total_tokens"], 14);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 6);
  EXPECT_EQ(body["usage"]["specula"]["drafted_tokens"], 8);
  EXPECT_EQ(body["usage"]["specula"]["accepted_tokens"], 5);
  EXPECT_EQ(body["usage"]["specula"]["seed"], 77);
}

TEST(ServerResponse, LogprobsShapes) {
  specula::TokenLogprobs t;
  t.chosen = {5, "hé", -0.5};
  t.top = {{5, "hé", -0.5}, {6, "x", -1.5}, {7, "y", -std::numeric_limits<double>::infinity()}};
  const ojson chat = chat_logprobs_json({t, t}, 2);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], "hé");
  EXPECT_EQ(chat["content"][0]["bytes"].size(), 3u);  // UTF-8 bytes
  EXPECT_EQ(chat["content"][0]["top_logprobs"].size(), 2u);
  const ojson legacy = completion_logprobs_json({t, t}, 3, 0);
  EXPECT_EQ(legacy["text_offset"][1], 3);
  EXPECT_EQ(legacy["top_logprobs"][0]["y"], -9999.0);  // JSON has no -inf
}

TEST(ServerResponse, SseFramingAndInvalidUtf8) {
  const ResponseHeader h{"id", 1, "m"};
  const std::string event = sse_event(completion_chunk_json(h, std::string("a\xff"), std::nullopt));
  EXPECT_EQ(event.rfind("data: {", 0), 0u);
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n");
  EXPECT_NE(event.find("\xEF\xBF\xBD"), std::string::npos);  // replaced, not thrown
}

TEST(ServerMetrics, PrometheusTextWithHistograms) {
  Metrics m;
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 429);
  m.add_tokens(10, 4, 6, 8, 5);
  m.count_cancelled();
  m.set_queue_depth(3);
  m.observe_time_to_first_token(0.03);
  m.observe_time_to_first_token(100);
  m.observe_time_per_output_token(0.002);
  const std::string text = m.render();
  EXPECT_NE(text.find("specula_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("specula_requests_total{endpoint=\"/v1/completions\",status=\"429\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("specula_cached_prompt_tokens_total 4\n"), std::string::npos);
  EXPECT_NE(text.find("specula_requests_cancelled_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("specula_queue_depth 3\n"), std::string::npos);
  EXPECT_NE(text.find("specula_time_to_first_token_seconds_bucket{le=\"0.025\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("specula_time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("specula_time_to_first_token_seconds_bucket{le=\"60\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("specula_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("specula_time_to_first_token_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE specula_time_per_output_token_seconds histogram\n"), std::string::npos);
}

TEST(ServerQueue, RunsInFifoOrderAndRefusesWhenFull) {
  GenerationQueue q(1);
  std::atomic<bool> release{false};
  std::vector<int> order;
  std::mutex order_mutex;
  auto running = q.submit([&](const std::atomic<bool>&) {
    while (!release) std::this_thread::sleep_for(1ms);
    std::lock_guard lock(order_mutex);
    order.push_back(1);
  });
  ASSERT_NE(running, nullptr);
  while (!running->started()) std::this_thread::sleep_for(1ms);
  auto waiting = q.submit([&](const std::atomic<bool>&) {
    std::lock_guard lock(order_mutex);
    order.push_back(2);
  });
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(q.waiting(), 1u);
  EXPECT_EQ(q.submit([](const std::atomic<bool>&) {}), nullptr);  // full: the 429 case
  release = true;
  EXPECT_TRUE(running->wait());
  EXPECT_TRUE(waiting->wait());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(ServerQueue, ZeroWaitingAcceptsOnlyWhenIdle) {
  GenerationQueue q(0);
  std::atomic<bool> release{false};
  auto running = q.submit([&](const std::atomic<bool>&) {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(q.submit([](const std::atomic<bool>&) {}), nullptr);
  release = true;
  running->wait();
  auto next = q.submit([](const std::atomic<bool>&) {});
  ASSERT_NE(next, nullptr);
  EXPECT_TRUE(next->wait());
}

TEST(ServerQueue, SeveralWorkersRunJobsAtOnceAndTheQueueCountsBeyondThem) {
  GenerationQueue q(1, 3);
  std::atomic<bool> release{false};
  std::atomic<int> running_now{0};
  std::vector<std::shared_ptr<GenerationQueue::Job>> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(q.submit([&](const std::atomic<bool>&) {
      ++running_now;
      while (!release) std::this_thread::sleep_for(1ms);
    }));
    ASSERT_NE(jobs.back(), nullptr) << "job " << i;
  }
  while (running_now < 3) std::this_thread::sleep_for(1ms);  // all three at once
  EXPECT_EQ(q.running(), 3u);
  auto waiting = q.submit([](const std::atomic<bool>&) {});
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(q.waiting(), 1u);
  EXPECT_EQ(q.submit([](const std::atomic<bool>&) {}), nullptr) << "3 running + 1 waiting: full";
  release = true;
  for (auto& j : jobs) EXPECT_TRUE(j->wait());
  EXPECT_TRUE(waiting->wait());
  EXPECT_EQ(q.running(), 0u);
}

TEST(ServerQueue, CancelDropsWaitingAndSignalsRunning) {
  GenerationQueue q(4);
  std::atomic<bool> saw_cancel{false};
  auto running = q.submit([&](const std::atomic<bool>& cancelled) {
    while (!cancelled) std::this_thread::sleep_for(1ms);
    saw_cancel = true;
  });
  while (!running->started()) std::this_thread::sleep_for(1ms);
  std::atomic<bool> waiting_ran{false};
  auto waiting = q.submit([&](const std::atomic<bool>&) { waiting_ran = true; });
  q.cancel(waiting);
  EXPECT_EQ(waiting->wait_for(1s), std::optional<bool>(false));  // dropped without running
  EXPECT_EQ(q.waiting(), 0u);
  q.cancel(running);
  EXPECT_TRUE(running->wait());
  EXPECT_TRUE(saw_cancel);
  EXPECT_FALSE(waiting_ran);
}

TEST(ServerQueue, ShutdownCancelsEverythingAndRefusesNewWork) {
  GenerationQueue q(4);
  auto running = q.submit([&](const std::atomic<bool>& cancelled) {
    while (!cancelled) std::this_thread::sleep_for(1ms);
  });
  while (!running->started()) std::this_thread::sleep_for(1ms);
  auto waiting = q.submit([](const std::atomic<bool>&) {});
  q.shutdown();
  EXPECT_TRUE(running->wait());
  EXPECT_FALSE(waiting->wait());
  EXPECT_EQ(q.submit([](const std::atomic<bool>&) {}), nullptr);
}

TEST(ServerQueue, AThrowingJobDoesNotStopTheWorker) {
  GenerationQueue q(2);
  auto bad = q.submit([](const std::atomic<bool>&) { throw std::runtime_error("boom"); });
  EXPECT_TRUE(bad->wait());
  EXPECT_EQ(bad->error(), "boom");
  auto good = q.submit([](const std::atomic<bool>&) {});
  EXPECT_TRUE(good->wait());
  EXPECT_TRUE(good->error().empty());
}

TEST(ServerAccessLog, OneLineWithTheCostsAndNoForgedLines) {
  AccessRecord r;
  r.remote_addr = "127.0.0.1";
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.status = 200;
  r.prompt_tokens = 15;
  r.completion_tokens = 8;
  r.time_to_first_token_ms = 12.34;
  r.duration_ms = 45.66;
  EXPECT_EQ(access_log_line(r, 1796300000),
            "2026-12-03T12:13:20Z 127.0.0.1 \"POST /v1/chat/completions\" 200 in=15 out=8 ttft_ms=12.3 ms=45.7");

  AccessRecord get;
  get.method = "GET";
  get.path = "/a\nfake 200 line\"";
  get.status = 404;
  const std::string line = access_log_line(get, 0);
  EXPECT_EQ(line, "1970-01-01T00:00:00Z - \"GET /a?fake 200 line?\" 404 in=- out=- ttft_ms=- ms=0.0");
}

TEST(ServerCors, OnlyListedOriginsOrAnyWithAStar) {
  const std::vector<std::string> listed = {"http://app.example", "https://b.example"};
  EXPECT_EQ(allowed_origin(listed, "http://app.example"), "http://app.example");
  EXPECT_EQ(allowed_origin(listed, "https://b.example"), "https://b.example");
  EXPECT_EQ(allowed_origin(listed, "http://evil.example"), "");
  EXPECT_EQ(allowed_origin(listed, ""), "");
  EXPECT_EQ(allowed_origin({}, "http://app.example"), "");
  EXPECT_EQ(allowed_origin({"*"}, "http://any.example"), "*");
  EXPECT_EQ(allowed_origin({"*"}, ""), "");
}

}  // namespace
