// `specula bench` driven through the real binary on a tiny synthetic model and its drafter:
// --quick --json carries every figure of the suite, with sane values; without --json the
// markdown tables are printed; bad flags are usage errors (exit 2), bad paths runtime errors (1).
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "cli_runner.h"
#include "spec_golden_util.h"

namespace specula {
namespace {

using Result = specula::test::CliResult;
using spec_test::kE4bLikeQ4Case;
using specula::test::run_cli;

const std::string kModelArgs = "--model " + kE4bLikeQ4Case + "/model --draft " + kE4bLikeQ4Case + "/drafter";

bool positive_finite(const nlohmann::json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0.0;
}

// The per-thread-count figures every model reports.
void expect_thread_figures(const nlohmann::json& t, const std::string& where) {
  for (const char* key : {"decode_tok_per_s", "prefill_tok_per_s", "time_to_first_token_ms", "decode_ms_per_token",
                          "decode_cpu_ms_per_token", "read_bandwidth_gb_per_s", "achieved_gb_per_s",
                          "roofline_fraction", "decode_step_ms", "draft_step_ms", "draft_step_ratio"})
    EXPECT_TRUE(positive_finite(t.value(key, nlohmann::json())))
        << where << " " << key << " = " << t.value(key, nlohmann::json());
  const nlohmann::json& verify = t.at("verify_cost_ratio");
  for (int w = 2; w <= 8; ++w)
    EXPECT_TRUE(positive_finite(verify.value(std::to_string(w), nlohmann::json()))) << where << " verify " << w;
  // The two roofs' floor: one per row count from 1, exactly 1 for one row, never below it.
  EXPECT_TRUE(positive_finite(t.at("prefill_roof_tok_per_s"))) << where;
  EXPECT_TRUE(positive_finite(t.at("prefill_roof_fraction"))) << where;
  const nlohmann::json& roof = t.at("compute_roof_gb_per_s");
  const nlohmann::json& floor = t.at("verify_floor_ratio");
  const nlohmann::json& floor_ms = t.at("forward_floor_ms");
  EXPECT_EQ(floor.value("1", 0.0), 1.0) << where;
  for (int w = 1; w <= 8; ++w) {
    const std::string key = std::to_string(w);
    EXPECT_TRUE(positive_finite(roof.value(key, nlohmann::json()))) << where << " roof " << w;
    EXPECT_TRUE(positive_finite(floor_ms.value(key, nlohmann::json()))) << where << " floor ms " << w;
    EXPECT_GE(floor.value(key, 0.0), 1.0) << where << " floor " << w;
  }
  for (const char* table : {"spec_speedup", "expected_speedup"})
    for (const char* p : {"0", "0.3", "0.5", "0.7", "0.9"})
      for (const char* g : {"1", "2", "3", "4", "auto"})
        EXPECT_TRUE(positive_finite(t.at(table).at(p).value(g, nlohmann::json())))
            << where << " " << table << "[" << p << "][" << g << "]";
  ASSERT_EQ(t.at("spec").size(), 25u) << where;
  for (const nlohmann::json& s : t.at("spec")) {
    EXPECT_TRUE(positive_finite(s.at("plain_tok_per_s"))) << where;
    EXPECT_TRUE(positive_finite(s.at("ideal_speedup"))) << where;
    const double a = s.at("acceptance_rate").get<double>();
    EXPECT_TRUE(a >= 0.0 && a <= 1.0) << where << " acceptance " << a;
  }
}

// The machine's other load over the run (util/machine_load.h): fractions of the CPU time.
void expect_machine_load(const nlohmann::json& report) {
  const nlohmann::json& load = report.at("machine_load");
  ASSERT_TRUE(load.is_object()) << load;  // every CI machine is Linux, with /proc
  for (const char* key : {"other_processes_fraction", "steal_fraction"}) {
    const double v = load.at(key).get<double>();
    EXPECT_TRUE(v >= 0.0 && v <= 1.0) << key << " " << v;
  }
  EXPECT_TRUE(load.at("busy").is_boolean());
}

TEST(BenchCli, QuickJsonHasEveryFigure) {
  const Result r = run_cli("bench " + kModelArgs + " --quick --json --threads 1,2");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // exactly one JSON object on stdout
  ASSERT_TRUE(j.is_object());
  for (const char* key :
       {"decode_tok_per_s", "prefill_tok_per_s", "time_to_first_token_ms", "bytes_per_token", "read_bandwidth_gb_per_s",
        "roofline_fraction", "draft_step_ratio", "load_ms", "peak_rss_bytes"})
    EXPECT_TRUE(positive_finite(j.value(key, nlohmann::json()))) << key << " = " << j.value(key, nlohmann::json());
  EXPECT_EQ(j.at("threads").get<int>(), 2);  // the headline is the largest thread count
  EXPECT_EQ(j.at("precision").get<std::string>(), "fast");
  EXPECT_EQ(j.at("counts").at("runs").get<int>(), 1);
  ASSERT_TRUE(j.at("verify_cost_ratio").is_object());
  EXPECT_TRUE(positive_finite(j.at("verify_cost_ratio").value("4", nlohmann::json())));
  EXPECT_TRUE(positive_finite(j.at("spec_speedup").at("0.7").value("auto", nlohmann::json())));
  EXPECT_TRUE(positive_finite(j.at("spec_speedup").at("0.7").value("2", nlohmann::json())));

  ASSERT_EQ(j.at("models").size(), 1u);
  const nlohmann::json& m = j.at("models")[0];
  EXPECT_EQ(m.at("bytes_per_token"), j.at("bytes_per_token"));
  EXPECT_LE(m.at("bytes_per_token").get<uint64_t>(), m.at("bytes_on_disk").get<uint64_t>());
  EXPECT_GT(m.at("drafter_bytes_on_disk").get<uint64_t>(), 0u);
  EXPECT_GT(m.at("kv_bytes").get<uint64_t>(), 0u);
  for (const char* t : {"1", "2"}) {
    ASSERT_TRUE(m.at("threads").contains(t)) << t;
    expect_thread_figures(m.at("threads").at(t), std::string("threads ") + t);
  }
  const nlohmann::json& bw = j.at("read_bandwidth_gb_per_s_by_threads");
  EXPECT_TRUE(positive_finite(bw.value("1", nlohmann::json())));
  EXPECT_TRUE(positive_finite(bw.value("2", nlohmann::json())));
  expect_machine_load(j);
}

TEST(BenchCli, MarkdownWithoutJson) {
  const Result r = run_cli("bench " + kModelArgs + " --quick --threads 1 --precision exact --spec-tokens 6");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(nlohmann::json::accept(r.out));
  for (const char* text :
       {"precision exact", "| model | threads | load ms | TTFT ms | prefill tok/s | decode tok/s",
        "| threads | decode step ms | drafter step | verify 2 |", "verify 8 |", "| 1 | measured ms |",
        "| 1 | floor ms |", "| 1 | floor ratio | 1.00 |", "| 1 | in-cache GB/s |",
        "speculative decoding at controlled acceptance", "| threads | p | plain tok/s | gamma 1 |", "| 1 | 0.7 |",
        "| auto | auto / best fixed |", "of the matmul kernels' roof for it", "Read bandwidth measured by this run",
        "6 tokens each", "Machine load during this run: other processes "})
    EXPECT_NE(r.out.find(text), std::string::npos) << "missing: " << text << "\n" << r.out;
}

TEST(BenchCli, TargetOnlyHasNoSpeculativeFigures) {
  const Result r = run_cli("bench --model " + kE4bLikeQ4Case + "/model --quick --json --threads 1");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(positive_finite(j.at("decode_tok_per_s")));
  EXPECT_TRUE(positive_finite(j.at("verify_cost_ratio").value("2", nlohmann::json())));
  EXPECT_TRUE(j.at("draft_step_ratio").is_null());
  EXPECT_TRUE(j.at("spec_speedup").empty());
}

// The full layer's cache grows in blocks of one huge page (4096 f32 or 8192 bf16 rows of this
// model), so bf16 holds half the bytes at 8192 positions and no more than f32 at 16.
TEST(BenchCli, LongContextsReportEveryContextAtHalfTheKvBytesInBf16) {
  const std::string m = "bench --model " + kE4bLikeQ4Case + "/model --quick --json --threads 1 --contexts 8192,16";
  const Result f32 = run_cli(m);
  const Result bf16 = run_cli(m + " --kv-type bf16");
  ASSERT_EQ(f32.code, 0) << f32.out;
  ASSERT_EQ(bf16.code, 0) << bf16.out;
  const nlohmann::json a = nlohmann::json::parse(f32.out), b = nlohmann::json::parse(bf16.out);
  EXPECT_EQ(a.at("kv_type"), "f32");
  EXPECT_EQ(b.at("kv_type"), "bf16");
  ASSERT_EQ(a.at("contexts").size(), 2u);
  ASSERT_EQ(b.at("contexts").size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const nlohmann::json& fa = a.at("contexts")[i];
    const nlohmann::json& fb = b.at("contexts")[i];
    EXPECT_EQ(fa.at("context").get<int64_t>(), i == 0 ? 16 : 8192) << "ascending";
    for (const char* key : {"decode_tok_per_s", "decode_ms", "verify_ms", "verify_ratio", "decode_vs_shortest"})
      EXPECT_TRUE(positive_finite(fb.at(key))) << key;
    EXPECT_GT(fb.at("kv_bytes").get<uint64_t>(), 0u);
    EXPECT_LE(fb.at("kv_bytes").get<uint64_t>(), fa.at("kv_bytes").get<uint64_t>());
  }
  EXPECT_EQ(a.at("contexts")[1].at("kv_bytes").get<uint64_t>(), 2 * b.at("contexts")[1].at("kv_bytes").get<uint64_t>());
  // The bound: 1 at the shortest context, below at the longer one, whose step reads more K/V
  // bytes (twice as many in f32 as in bf16; the weights' bytes are the same in both runs).
  const auto read = [](const nlohmann::json& j, size_t i) {
    return j.at("contexts")[i].at("step_read_bytes").get<uint64_t>();
  };
  EXPECT_DOUBLE_EQ(a.at("contexts")[0].at("bound_vs_shortest").get<double>(), 1.0);
  EXPECT_LT(a.at("contexts")[1].at("bound_vs_shortest").get<double>(), 1.0);
  EXPECT_LT(a.at("contexts")[1].at("bound_vs_shortest").get<double>(),
            b.at("contexts")[1].at("bound_vs_shortest").get<double>());
  ASSERT_GT(read(b, 1), read(b, 0));
  EXPECT_EQ(read(a, 1) - read(a, 0), 2 * (read(b, 1) - read(b, 0)));
  EXPECT_GT(a.at("contexts")[1].at("kv_bytes").get<uint64_t>(), a.at("contexts")[0].at("kv_bytes").get<uint64_t>());
  // The rate the added K/V bytes were read at: the bytes beyond the shortest context's over the
  // extra decode time (none at the shortest context), beside the plain read's samples.
  for (const nlohmann::json* j : {&a, &b}) {
    const nlohmann::json& c = j->at("contexts");
    EXPECT_EQ(c[0].at("kv_read_gb_per_s").get<double>(), 0.0);
    EXPECT_EQ(c[0].at("decode_vs_shortest_paired").get<double>(), 1.0) << "each round's step over itself";
    // One round (--quick): the paired ratio is that round's, which is also the ratio of the medians.
    EXPECT_NEAR(c[1].at("decode_vs_shortest_paired").get<double>(),
                c[0].at("decode_ms").get<double>() / c[1].at("decode_ms").get<double>(), 1e-9);
    const double extra_ms = c[1].at("decode_ms").get<double>() - c[0].at("decode_ms").get<double>();
    const double extra_bytes = static_cast<double>(read(*j, 1) - read(*j, 0));
    EXPECT_NEAR(c[1].at("kv_read_gb_per_s").get<double>(), extra_ms > 0 ? extra_bytes / extra_ms / 1e6 : 0.0, 1e-9);
    const double median = j->at("read_bandwidth_gb_per_s_median").get<double>();
    EXPECT_TRUE(positive_finite(j->at("read_bandwidth_gb_per_s_min")));
    EXPECT_LE(j->at("read_bandwidth_gb_per_s_min").get<double>(), median);
    EXPECT_GE(j->at("read_bandwidth_gb_per_s").get<double>(), median) << "the best pass";
  }
  expect_machine_load(a);
  const Result too_long = run_cli("bench --model " + kE4bLikeQ4Case + "/model --quick --contexts 500000", true);
  EXPECT_EQ(too_long.code, 1);
  EXPECT_NE(too_long.out.find("context 500000"), std::string::npos) << too_long.out;
  EXPECT_EQ(run_cli("bench --model " + kE4bLikeQ4Case + "/model --quick --contexts 16 --concurrency 1").code, 2);
}

TEST(BenchCli, ConcurrencyPairsPlainAndSpeculativeRuns) {
  const Result r = run_cli("bench " + kModelArgs + " --quick --json --threads 1 --concurrency 1,2 --runs 3", true);
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t open = r.out.find('{');
  ASSERT_NE(open, std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(open));
  EXPECT_EQ(j.at("runs").get<int>(), 3);
  expect_machine_load(j);
  const nlohmann::json& figures = j.at("concurrency");
  ASSERT_EQ(figures.size(), 4u) << "plain and speculative at 1 and 2 streams";
  for (const nlohmann::json& f : figures) {
    const bool speculative = f.at("mode") == "speculative";
    EXPECT_TRUE(positive_finite(f.at("aggregate_tok_per_s")));
    // On a model this tiny a stream can end before another has started (no window in which all
    // decode), so the decode figures may be 0; never negative or undefined.
    for (const char* key : {"decode_aggregate_tok_per_s", "decode_aggregate_vs_plain"})
      EXPECT_TRUE(f.at(key).is_number() && f.at(key).get<double>() >= 0.0) << key;
    if (speculative) {
      EXPECT_TRUE(positive_finite(f.at("aggregate_vs_plain")));
    } else {
      EXPECT_EQ(f.at("aggregate_vs_plain").get<double>(), 0.0);
    }
  }
  // Every run measured plain and then speculative streams (the log, on stderr), and the ratio
  // against plain is the median of those pairs.
  size_t plain_runs = 0, spec_runs = 0;
  for (size_t at = r.out.find("concurrency 2 plain:"); at != std::string::npos;
       at = r.out.find("concurrency 2 plain:", at + 1))
    ++plain_runs;
  for (size_t at = r.out.find("concurrency 2 speculative:"); at != std::string::npos;
       at = r.out.find("concurrency 2 speculative:", at + 1))
    ++spec_runs;
  EXPECT_EQ(plain_runs, 3u) << r.out;
  EXPECT_EQ(spec_runs, 3u) << r.out;
  // One stream alone before each run of two (plain "x one stream" is the median of those pairs),
  // besides the three runs at concurrency 1 itself.
  size_t one_stream_runs = 0;
  for (size_t at = r.out.find("concurrency 1 plain:"); at != std::string::npos;
       at = r.out.find("concurrency 1 plain:", at + 1))
    ++one_stream_runs;
  EXPECT_EQ(one_stream_runs, 6u) << r.out;
  for (const nlohmann::json& f : figures) {
    if (f.at("mode") == "plain" && f.at("concurrency") == 2) {
      EXPECT_TRUE(positive_finite(f.at("aggregate_vs_one_stream")));
    }
  }
  EXPECT_NE(r.out.find("concurrency 2: speculative / plain, median of 3 back-to-back pairs"), std::string::npos)
      << r.out;
}

TEST(BenchCli, BadFlagsAreUsageErrors) {
  const std::string m = "bench " + kModelArgs + " --quick ";
  EXPECT_EQ(run_cli(m + "--precision medium").code, 2);
  EXPECT_EQ(run_cli(m + "--threads 0").code, 2);
  EXPECT_EQ(run_cli(m + "--threads 1,x").code, 2);
  EXPECT_EQ(run_cli(m + "--runs 0").code, 2);
  EXPECT_EQ(run_cli(m + "--prompt-tokens -3").code, 2);
  EXPECT_EQ(run_cli(m + "--no-such-flag").code, 2);
  EXPECT_EQ(run_cli(m + "--preset e4b").code, 2);  // synthetic presets exclude --model
  EXPECT_EQ(run_cli("bench --preset e9b --quick").code, 2);
  const Result draft_alone = run_cli("bench --draft " + kE4bLikeQ4Case + "/drafter --quick", true);
  EXPECT_EQ(draft_alone.code, 2);
  EXPECT_NE(draft_alone.out.find("--model"), std::string::npos) << draft_alone.out;
}

TEST(BenchCli, RuntimeErrorsNameThePath) {
  const Result missing = run_cli("bench --model /nonexistent/specula-model --quick", true);
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("/nonexistent/specula-model"), std::string::npos) << missing.out;
  const Result too_long = run_cli("bench --model " + kE4bLikeQ4Case + "/model --quick --prompt-tokens 1000000", true);
  EXPECT_EQ(too_long.code, 1);
  EXPECT_NE(too_long.out.find("context"), std::string::npos) << too_long.out;
  const Result no_drafter =
      run_cli("bench --model " + kE4bLikeQ4Case + "/model --draft /nonexistent/specula-drafter --quick", true);
  EXPECT_EQ(no_drafter.code, 1);
  EXPECT_NE(no_drafter.out.find("/nonexistent/specula-drafter"), std::string::npos) << no_drafter.out;
}

}  // namespace
}  // namespace specula
