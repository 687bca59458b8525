// `specula serve` end to end on loopback (httplib::Client against the real process) with a tiny
// synthetic checkpoint carrying the Gemma 4 test tokenizer: error statuses in OpenAI's shape with
// the server staying up, the context check, speculative == plain at temperature 0, prompt-cache
// reuse across two turns (identical to a cold server), a full queue (429), a client disconnecting
// mid-stream (the worker is free at once, the metrics count the cancellation), the API key,
// SIGTERM during a generation (exit 0), fresh seeds for unseeded requests, the gamma reserve,
// GET /v1/models/{id}, CORS, the access log, a non-streaming client that hangs up, the warning,
// once, about a drafter whose drafts are all rejected, and tool_choice "required" answered with a
// schema-valid tool call.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "prometheus_metric.h"
#include "server_process.h"
#include "shared_checkpoint.h"
#include "specula/speculative/acceptance_check.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using specula::test::metric;
using specula::test::run_cli;
using specula::test::ServerProcess;

const std::string kTokenizerDir = std::string(SPECULA_TEST_DATA) + "/tokenizer-gemma4";

class Server : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "specula-server-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  // The shared server, started on first use (ctest runs each test in its own process): drafter
  // loaded, a small context so "too long" is cheap to reach.
  static ServerProcess& shared() {
    if (server_ == nullptr) {
      server_ = new ServerProcess(
          {"--model", model(), "--draft", drafter(), "--threads", "1", "--ctx", "256", "--max-body-bytes", "100000"});
      EXPECT_TRUE(server_->wait_ready());
    }
    return *server_;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string model() { return specula::test::shared_text_pair().model; }
  static std::string drafter() { return specula::test::shared_text_pair().drafter; }

  static httplib::Result post(const ServerProcess& s, const std::string& path, const std::string& body,
                              const httplib::Headers& headers = {}) {
    auto c = s.client();
    return c.Post(path.c_str(), headers, body, "application/json");
  }
  static json post_ok(const ServerProcess& s, const std::string& path, const json& body) {
    auto r = post(s, path, body.dump());
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }
  static bool healthy(const ServerProcess& s) {
    auto c = s.client(5);
    auto r = c.Get("/health");
    return r && r->status == 200;
  }
  static std::string metrics(const ServerProcess& s) {
    auto c = s.client(5);
    auto r = c.Get("/metrics");
    return r ? r->body : std::string();
  }

  static std::string dir_;
  static ServerProcess* server_;
};

std::string Server::dir_;
ServerProcess* Server::server_ = nullptr;

json chat(const std::string& user, int max_tokens) {
  return {{"messages", json::array({{{"role", "user"}, {"content", user}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

TEST_F(Server, BadRequestsGetOpenAIErrorsAndTheServerStaysUp) {
  struct Case {
    std::string path, body;
    int status;
    std::string param;
  };
  const Case cases[] = {
      {"/v1/chat/completions", "{\"messages\": [", 400, ""},
      {"/v1/chat/completions", "[]", 400, ""},
      {"/v1/chat/completions", R"({"messages": "hello"})", 400, "messages"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "temperature": "warm"})", 400,
       "temperature"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", 400, "n"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": -3})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": [2, 999999]})", 400, "prompt[1]"},
      {"/v1/completions", R"({"prompt": "x", "logit_bias": {"262144": 1}})", 400, "logit_bias.262144"},
      {"/v1/completions", R"({"prompt": "x", "stop": 7})", 400, "stop"},
      {"/v1/completions", std::string(200000, ' '), 413, ""},
      {"/v1/nothing-here", "{}", 404, ""},
  };
  for (const Case& c : cases) {
    auto r = post(shared(), c.path, c.body);
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, c.status) << c.body.substr(0, 80);
    const json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object() && e.contains("error")) << r->body;
    EXPECT_TRUE(e["error"]["message"].is_string());
    if (!c.param.empty()) {
      EXPECT_EQ(e["error"]["param"], c.param) << r->body;
    }
    EXPECT_TRUE(healthy(shared())) << "after " << c.body.substr(0, 80);
  }
  auto c = shared().client();
  auto r = c.Get("/v1/unknown");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(metrics(shared()).find("specula_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"}"),
            std::string::npos);
}

TEST_F(Server, PromptLongerThanTheContextIsRefusedAndMaxTokensIsClipped) {
  std::string words;
  for (int i = 0; i < 300; ++i) words += "word ";
  auto r = post(shared(), "/v1/completions", json{{"prompt", words}, {"max_tokens", 4}}.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "prompt");

  // A prompt that fits with a max_tokens that does not: clipped to the context, finish "length".
  std::string shorter;
  for (int i = 0; i < 240; ++i) shorter += "word ";
  const json doc = post_ok(shared(), "/v1/completions",
                           {{"prompt", shorter}, {"max_tokens", 1000}, {"ignore_eos", true}, {"temperature", 0}});
  const int64_t prompt = doc["usage"]["prompt_tokens"];
  ASSERT_LT(prompt, 256);
  EXPECT_EQ(doc["usage"]["completion_tokens"].get<int64_t>(), 256 - prompt);
  EXPECT_EQ(doc["choices"][0]["finish_reason"], "length");
}

TEST_F(Server, SpeculativeAndPlainGiveTheSameTextAtTemperatureZero) {
  json req = chat("Tell me a story about a fox", 24);
  req["ignore_eos"] = true;
  req["speculative"] = false;
  const json plain = post_ok(shared(), "/v1/chat/completions", req);
  req["speculative"] = true;
  req["gamma"] = 3;
  const json spec = post_ok(shared(), "/v1/chat/completions", req);
  req["gamma"] = "auto";
  const json spec_auto = post_ok(shared(), "/v1/chat/completions", req);
  const std::string text = plain["choices"][0]["message"]["content"];
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(spec["choices"][0]["message"]["content"], text);
  EXPECT_EQ(spec_auto["choices"][0]["message"]["content"], text);
  EXPECT_EQ(plain["usage"]["completion_tokens"], 24);
  EXPECT_EQ(spec["usage"]["completion_tokens"], 24);
  EXPECT_EQ(plain["usage"]["specula"]["drafted_tokens"], 0);
  EXPECT_GT(spec["usage"]["specula"]["drafted_tokens"].get<int>(), 0);
}

TEST_F(Server, PromptCacheReusesTheFirstTurnAndMatchesAColdServer) {
  json turn1 = chat("Hi, who are you?", 8);
  const json a1 = post_ok(shared(), "/v1/chat/completions", turn1);
  json turn2 = turn1;
  turn2["messages"].push_back({{"role", "assistant"}, {"content", a1["choices"][0]["message"]["content"]}});
  turn2["messages"].push_back({{"role", "user"}, {"content", "And what can you do?"}});
  const json a2 = post_ok(shared(), "/v1/chat/completions", turn2);
  const int64_t cached = a2["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(cached, 0);
  EXPECT_LT(cached, a2["usage"]["prompt_tokens"].get<int64_t>());

  ServerProcess cold({"--model", model(), "--draft", drafter(), "--threads", "1", "--ctx", "256", "--no-prompt-cache"});
  ASSERT_TRUE(cold.wait_ready());
  const json c2 = post_ok(cold, "/v1/chat/completions", turn2);
  EXPECT_EQ(c2["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(c2["usage"]["prompt_tokens"], a2["usage"]["prompt_tokens"]);
  EXPECT_EQ(c2["choices"][0]["message"]["content"], a2["choices"][0]["message"]["content"]);
}

TEST_F(Server, QueueFullDisconnectApiKeyAndSigterm) {
  ServerProcess s({"--model", model(), "--threads", "1", "--parallel", "1", "--max-queue", "0", "--api-key", "sekret"});
  ASSERT_TRUE(s.wait_ready());
  const httplib::Headers auth = {{"Authorization", "Bearer sekret"}};
  const std::string small = json{{"prompt", "Hi"}, {"max_tokens", 2}}.dump();

  // The API key: missing or wrong -> 401; /health stays public.
  for (const httplib::Headers& h : {httplib::Headers{}, httplib::Headers{{"Authorization", "Bearer nope"}}}) {
    auto r = post(s, "/v1/completions", small, h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  }
  EXPECT_TRUE(healthy(s));

  // A long stream occupies the worker; with --max-queue 0 the next request gets 429.
  std::atomic<int> chunks{0};
  std::atomic<bool> hang_up{false};
  std::thread streamer([&] {
    auto c = s.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.headers = auth;
    req.set_header("Content-Type", "application/json");
    req.body = json{{"prompt", "Hello"}, {"max_tokens", 1000000}, {"ignore_eos", true}, {"stream", true}}.dump();
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      ++chunks;
      return !hang_up.load();
    };
    c.send(req);
  });
  const auto wait_start = std::chrono::steady_clock::now();
  while (chunks < 3 && std::chrono::steady_clock::now() - wait_start < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(chunks.load(), 3);
  auto busy = post(s, "/v1/completions", small, auth);
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 429);
  EXPECT_EQ(json::parse(busy->body)["error"]["type"], "rate_limit_error");

  // The client hangs up: the generation is cancelled and the next request is served at once.
  hang_up = true;
  streamer.join();
  const auto t0 = std::chrono::steady_clock::now();
  int next_status = 0;
  for (int i = 0; i < 100 && next_status != 200; ++i) {  // allow for the hang-up to be noticed
    auto next = post(s, "/v1/completions", small, auth);
    next_status = next ? next->status : -1;
    if (next_status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(next_status, 200);
  EXPECT_LT(seconds, 3.0);
  auto c = s.client();
  auto m = c.Get("/metrics", auth);
  ASSERT_TRUE(m);
  EXPECT_EQ(metric(m->body, "specula_requests_cancelled_total"), 1.0) << m->body;
  // At least the refusal above (retries while the hang-up was being noticed add more).
  EXPECT_GE(metric(m->body, "specula_requests_total{endpoint=\"/v1/completions\",status=\"429\"}"), 1.0);

  // SIGTERM while a generation runs: it is cancelled, the client gets its answer, exit 0.
  std::atomic<int> long_status{0};
  std::string long_finish;
  std::thread long_request([&] {
    auto r = post(s, "/v1/completions", json{{"prompt", "Hello"}, {"max_tokens", 1000000}, {"ignore_eos", true}}.dump(),
                  auth);
    if (r) {
      long_status = r->status;
      long_finish = json::parse(r->body)["choices"][0]["finish_reason"];
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(s.signal_and_wait(SIGTERM, std::chrono::seconds(20)), 0);
  long_request.join();
  EXPECT_EQ(long_status.load(), 200);
  EXPECT_EQ(long_finish, "cancelled");
}

}  // namespace

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls until `done` holds (at most `seconds`).
template <class Done>
bool eventually(Done done, double seconds = 10.0) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST_F(Server, SeedsGammaReserveModelByIdCorsAccessLogAndAHungUpClient) {
  const std::string log = dir_ + "/access.log";
  ServerProcess s({"--model", model(), "--draft", drafter(), "--gamma", "4", "--threads", "1", "--parallel", "1",
                   "--cors-origin", "http://app.example"},
                  log);
  ASSERT_TRUE(s.wait_ready());
  auto c = s.client();

  // Unseeded sampling draws a fresh seed per request and reports it; that seed reproduces the text.
  json sampled = {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 1.0}, {"ignore_eos", true}};
  const json a = post_ok(s, "/v1/completions", sampled);
  const json b = post_ok(s, "/v1/completions", sampled);
  ASSERT_TRUE(a["usage"]["specula"]["seed"].is_number_unsigned()) << a;
  EXPECT_NE(a["usage"]["specula"]["seed"], b["usage"]["specula"]["seed"]);
  sampled["seed"] = a["usage"]["specula"]["seed"];
  const json again = post_ok(s, "/v1/completions", sampled);
  EXPECT_EQ(again["usage"]["specula"]["seed"], a["usage"]["specula"]["seed"]);
  EXPECT_EQ(again["choices"][0]["text"], a["choices"][0]["text"]);

  // A gamma beyond the caches' rollback reserve (16: the default, larger than --gamma 4) is refused
  // before queueing.
  auto g = post(s, "/v1/completions", json{{"prompt", "x"}, {"gamma", 17}}.dump());
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 400);
  EXPECT_EQ(json::parse(g->body)["error"]["param"], "gamma");
  EXPECT_NE(g->body.find("[0, 16]"), std::string::npos) << g->body;

  // GET /v1/models/{id}.
  auto m = c.Get("/v1/models/model");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(json::parse(m->body)["id"], "model");
  m = c.Get("/v1/models/other-model");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 404);
  EXPECT_EQ(json::parse(m->body)["error"]["code"], "model_not_found");

  // CORS: a preflight from the allowed origin, the header on answers to it, none for others.
  auto pre = c.Options("/v1/chat/completions", {{"Origin", "http://app.example"},
                                                {"Access-Control-Request-Method", "POST"},
                                                {"Access-Control-Request-Headers", "authorization, content-type"}});
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Headers").find("Authorization"), std::string::npos);
  auto allowed = c.Get("/v1/models", {{"Origin", "http://app.example"}});
  ASSERT_TRUE(allowed);
  EXPECT_EQ(allowed->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  auto other = c.Get("/v1/models", {{"Origin", "http://elsewhere.example"}});
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));

  // A non-streaming client that hangs up (its read timeout): the generation is cancelled, not run
  // to max_tokens, and the slot serves the next request.
  {
    auto impatient = s.client(1);
    auto r = impatient.Post("/v1/completions",
                            json{{"prompt", "Hello"}, {"max_tokens", 1000000}, {"ignore_eos", true}}.dump(),
                            "application/json");
    EXPECT_FALSE(r);
  }
  EXPECT_TRUE(eventually([&] {
    auto r = c.Get("/metrics");
    return r && metric(r->body, "specula_requests_cancelled_total") == 1.0 &&
           metric(r->body, "specula_num_requests_running") == 0.0;
  }));
  post_ok(s, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 2}});

  // The access log: a line per request with the costs, the hung-up one as 499, no prompt text.
  EXPECT_TRUE(eventually([&] { return read_text(log).find("\" 499 ") != std::string::npos; })) << read_text(log);
  const std::string text = read_text(log);
  EXPECT_TRUE(std::regex_search(text, std::regex("\"POST /v1/completions\" 200 in=[0-9]+ out=6 ttft_ms=[0-9.]+ ms=")))
      << text;
  EXPECT_NE(text.find("\"GET /v1/models/model\" 200 in=- out=- ttft_ms=- ms="), std::string::npos) << text;
  EXPECT_NE(text.find("\"OPTIONS /v1/chat/completions\" 204"), std::string::npos) << text;
  EXPECT_NE(text.find("\"POST /v1/completions\" 400 in=- out=-"), std::string::npos) << text;
  EXPECT_EQ(text.find("Once upon"), std::string::npos) << text;
}

// The number of times `what` occurs in `text`.
size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The synthetic drafter is random, as one made for another model: at temperature 0 the target
// accepts none of its drafts. Once the requests' drafts add up to kNoAcceptanceWarnDrafts, stderr
// says so, once.
TEST_F(Server, ADrafterWhoseDraftsAreAllRejectedIsReportedOnce) {
  const std::string log = dir_ + "/warnings.log";
  ServerProcess s({"--model", model(), "--draft", drafter(), "--gamma", "4", "--threads", "1", "--parallel", "1",
                   "--no-access-log"},
                  log);
  ASSERT_TRUE(s.wait_ready());
  auto drafts_of_a_request = [&](int max_tokens) {
    const json r =
        post_ok(s, "/v1/completions",
                {{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}});
    EXPECT_EQ(r["usage"]["specula"]["accepted_tokens"], 0) << r;
    return r["usage"]["specula"]["drafted_tokens"].get<int64_t>();
  };
  const std::string warning = "specula serve: warning: none of the ";
  const int64_t first = drafts_of_a_request(3);
  ASSERT_LT(first, specula::kNoAcceptanceWarnDrafts);
  EXPECT_EQ(occurrences(read_text(log), warning), 0u) << read_text(log);
  ASSERT_GE(first + drafts_of_a_request(16), specula::kNoAcceptanceWarnDrafts);
  drafts_of_a_request(16);
  const std::string text = read_text(log);
  EXPECT_EQ(occurrences(text, warning), 1u) << text;
  EXPECT_NE(text.find(drafter()), std::string::npos) << text;
}

TEST_F(Server, ToolChoiceRequiredReturnsToolCalls) {
  const json parameters = json::parse(R"({"type": "object",
    "properties": {"city": {"type": "string", "maxLength": 6}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": false})");
  json req = chat("What is the weather in Paris?", 120);
  req["tools"] =
      json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", parameters}}}}});
  req["tool_choice"] = "required";
  req["parallel_tool_calls"] = false;
  const json doc = post_ok(shared(), "/v1/chat/completions", req);
  const json& choice = doc["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << doc.dump();
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << doc.dump();
  const json& function = choice["message"]["tool_calls"][0]["function"];
  EXPECT_EQ(function["name"], "get_weather");
  const json arguments = json::parse(function["arguments"].get<std::string>());
  ASSERT_TRUE(arguments["city"].is_string()) << arguments;
  const std::string city = arguments["city"];
  const auto characters = std::count_if(city.begin(), city.end(), [](char c) { return (c & 0xC0) != 0x80; });
  EXPECT_LE(characters, 6) << arguments;  // maxLength counts characters
  EXPECT_TRUE(arguments["unit"] == "celsius" || arguments["unit"] == "fahrenheit") << arguments;
  EXPECT_EQ(arguments.size(), 2u) << arguments;
  // A schema the grammar cannot enforce is refused before any generation, naming the tool.
  req["tools"][0]["function"]["parameters"]["properties"]["city"]["pattern"] = "^[A-Z]";
  const auto refused = post(shared(), "/v1/chat/completions", req.dump());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  const json error = json::parse(refused->body)["error"];
  EXPECT_EQ(error["param"], "tools") << refused->body;
  EXPECT_NE(error["message"].get<std::string>().find("tools[0].function.parameters"), std::string::npos)
      << refused->body;
}

TEST_F(Server, ATakenPortIsAnErrorNotASharedListener) {
  const int port = shared().port();
  EXPECT_EQ(run_cli("serve --model " + model() + " --host 127.0.0.1 --port " + std::to_string(port)).code, 1);
  EXPECT_TRUE(healthy(shared()));
}

}  // namespace
