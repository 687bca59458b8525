// The pieces of `specula bench` that are pure logic: medians, the expected speedup from measured
// costs, the floor of a forward from the two roofs, the in-cache probe's shape, option validation,
// and the synthetic-checkpoint cache (written once, reused while valid, rewritten when damaged) on
// a tiny preset.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "specula/bench/bench_suite.h"
#include "specula/bench/compute_roof.h"
#include "specula/bench/synthetic_models.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/speculative/controlled_acceptance.h"
#include "specula/util/error.h"
#include "specula/util/memory_bandwidth.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

TEST(BenchSuite, Median) {
  EXPECT_DOUBLE_EQ(bench::median({3.0}), 3.0);
  EXPECT_DOUBLE_EQ(bench::median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_DOUBLE_EQ(bench::median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_THROW(bench::median({}), Error);
}

TEST(BenchSuite, ForwardFloorFromTwoRoofs) {
  // 100 bytes, read bandwidth 50 B/s (2 s = 2000 ms); in-cache rates 100, 60, 70 (noise: clipped
  // to 60), 20 B/s.
  const auto f = bench::forward_floor_ms({{1, 100.0}, {2, 60.0}, {3, 70.0}, {4, 20.0}}, 50.0, 100.0);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_DOUBLE_EQ(f.at(1), 2000.0);  // memory-bound
  EXPECT_DOUBLE_EQ(f.at(2), 2000.0);
  EXPECT_DOUBLE_EQ(f.at(3), 2000.0);
  EXPECT_DOUBLE_EQ(f.at(4), 5000.0);  // compute-bound: 100 bytes at 20 B/s
  // Compute-bound from one row on.
  const auto g = bench::forward_floor_ms({{1, 10.0}, {2, 5.0}}, 50.0, 100.0);
  EXPECT_DOUBLE_EQ(g.at(1), 10000.0);
  EXPECT_DOUBLE_EQ(g.at(2), 20000.0);
  EXPECT_TRUE(bench::forward_floor_ms({{2, 5.0}}, 50.0, 1.0).empty());
  EXPECT_TRUE(bench::forward_floor_ms({{1, 5.0}}, 0.0, 1.0).empty());
}

// Under int8 a quarter of the bytes (say) go at the int16 kernels' rate: the time per byte is the
// shares' weighted sum of the two rates' times.
TEST(BenchSuite, BlendedRatesAddTheSharesTimes) {
  const std::map<int64_t, double> int8 = {{1, 100.0}, {2, 60.0}}, int16 = {{1, 50.0}, {2, 60.0}, {3, 10.0}};
  const auto r = bench::blend_rates(int8, int16, 0.25);
  ASSERT_EQ(r.size(), 2u) << "only the widths both have";
  EXPECT_DOUBLE_EQ(r.at(1), 80.0);  // 1 / (0.75 / 100 + 0.25 / 50)
  EXPECT_DOUBLE_EQ(r.at(2), 60.0);
  EXPECT_DOUBLE_EQ(bench::blend_rates(int8, int16, 0.0).at(1), 100.0);
  EXPECT_DOUBLE_EQ(bench::blend_rates(int8, int16, 1.0).at(1), 50.0);
  EXPECT_TRUE(bench::blend_rates({{1, 0.0}}, int16, 0.5).empty());
  EXPECT_THROW(bench::blend_rates(int8, int16, 1.5), Error);
}

TEST(BenchSuite, PrefillRoofIsTheRateTimesTheRowsOverTheBytes) {
  EXPECT_DOUBLE_EQ(bench::prefill_roof_tok_per_s(60.0, 128, 30.0), 256.0);
  EXPECT_DOUBLE_EQ(bench::prefill_roof_tok_per_s(60.0, 128, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(bench::prefill_roof_tok_per_s(0.0, 128, 30.0), 0.0);
  EXPECT_DOUBLE_EQ(bench::prefill_roof_tok_per_s(60.0, 0, 30.0), 0.0);
}

TEST(BenchSuite, ComputeRoofRatesEveryWidth) {
  WeightMatrix like;
  like.format = WeightFormat::Affine;  // only the format and K matter: the probe sizes its own matrix
  like.cols = 256;
  like.bits = 4;
  like.group_size = 64;
  ThreadPool pool(2);
  for (Precision p : {Precision::Exact, Precision::Fast}) {
    const auto roof = bench::measure_compute_roof(like, 3, p, pool);
    ASSERT_EQ(roof.size(), 3u);
    for (const auto& [rows, rate] : roof) EXPECT_GT(rate, 0.0) << rows;
  }
  EXPECT_THROW(bench::measure_compute_roof(like, 0, Precision::Fast, pool), Error);
}

TEST(BenchSuite, ExpectedSpeedupFromCosts) {
  // Free verification and drafting: the ideal speedup.
  EXPECT_DOUBLE_EQ(expected_speedup(0.5, 1, 0.0, 1.0), ideal_speedup(0.5, 1));
  // p = 0.7, gamma 2: (1 - 0.7^3) / 0.3 = 2.19 tokens per round costing 2 x 0.02 + 1.1.
  EXPECT_NEAR(expected_speedup(0.7, 2, 0.02, 1.1), (1 - 0.343) / 0.3 / 1.14, 1e-12);
  // Verification as expensive as gamma + 1 decode steps makes speculation lose.
  EXPECT_LT(expected_speedup(0.7, 3, 0.0, 4.0), 1.0);
  EXPECT_DOUBLE_EQ(expected_speedup(0.9, 0, 0.1, 1.0), 1.0);
  EXPECT_THROW(expected_speedup(0.5, 2, 0.1, 0.0), Error);
  EXPECT_THROW(expected_speedup(0.5, -1, 0.1, 1.0), Error);
}

TEST(BenchSuite, OptionValidation) {
  bench::SuiteOptions o;
  EXPECT_NO_THROW(o.validate());
  EXPECT_NO_THROW(bench::SuiteOptions::quick().validate());
  o.gammas = {"9"};  // needs verify width 10, measured up to 9
  EXPECT_THROW(o.validate(), Error);
  o = bench::SuiteOptions{};
  o.acceptance = {1.5};
  EXPECT_THROW(o.validate(), Error);
  o = bench::SuiteOptions{};
  o.threads = {};
  EXPECT_THROW(o.validate(), Error);
  o = bench::SuiteOptions{};
  o.auto_max_gamma = 9;
  EXPECT_THROW(o.validate(), Error);
}

TEST(BenchSuite, PeakRssIsReported) {
  EXPECT_GT(peak_rss_bytes(), 0u);
  reset_peak_rss();  // may be unsupported; must not throw or break the next read
  EXPECT_GT(peak_rss_bytes(), 0u);
}

// The probe bench --contexts samples between its rounds: one pass per sample, each a rate.
TEST(BenchSuite, ReadBandwidthProbeSamplesOnePassAtATime) {
  ThreadPool pool(2);
  ReadBandwidthProbe probe(pool, 8ull << 20);
  for (int i = 0; i < 3; ++i) {
    const double gbs = probe.sample_gbs();
    EXPECT_TRUE(std::isfinite(gbs) && gbs > 0.0) << gbs;
  }
}

TEST(BenchSyntheticModels, WrittenOnceReusedAndRewrittenWhenDamaged) {
  const fs::path cache = fs::temp_directory_path() / ("specula-bench-cache-test-" + std::to_string(::getpid()));
  fs::remove_all(cache);
  bench::SyntheticModelSpec spec;
  spec.preset = "tiny-e4b";
  spec.with_drafter = true;
  std::vector<std::string> log;
  auto logger = [&](const std::string& s) { log.push_back(s); };

  const bench::SyntheticModel first = bench::ensure_synthetic_model(cache.string(), spec, logger);
  EXPECT_TRUE(first.written);
  EXPECT_EQ(first.model_dir, (cache / "tiny-e4b-q4g64" / "model").string());
  auto model = TargetModel::load(first.model_dir);
  EXPECT_NO_THROW(Drafter::load(first.drafter_dir, *model));
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.front().find("writing synthetic tiny-e4b-q4g64"), std::string::npos) << log.front();

  const bench::SyntheticModel second = bench::ensure_synthetic_model(cache.string(), spec, logger);
  EXPECT_FALSE(second.written);
  EXPECT_NE(log.back().find("reusing"), std::string::npos) << log.back();

  // Another quantization is another checkpoint, not a reuse.
  bench::SyntheticModelSpec other = spec;
  other.bits = 8;
  EXPECT_FALSE(bench::synthetic_model_valid((cache / "tiny-e4b-q4g64").string(), other));

  // A truncated weight file is detected and the checkpoint written again.
  const fs::path weights = fs::path(first.model_dir) / "model.safetensors";
  ASSERT_TRUE(fs::exists(weights));
  fs::resize_file(weights, fs::file_size(weights) / 2);
  std::string why;
  EXPECT_FALSE(bench::synthetic_model_valid((cache / "tiny-e4b-q4g64").string(), spec, &why));
  EXPECT_NE(why.find("model.safetensors"), std::string::npos) << why;
  const bench::SyntheticModel third = bench::ensure_synthetic_model(cache.string(), spec, logger);
  EXPECT_TRUE(third.written);
  EXPECT_NO_THROW(TargetModel::load(third.model_dir));
  // No partial directories are left behind.
  for (const auto& e : fs::directory_iterator(cache))
    EXPECT_EQ(e.path().filename().string().find(".tiny"), std::string::npos);
  fs::remove_all(cache);
}

TEST(BenchSyntheticModels, UnwritableCacheIsAnError) {
  bench::SyntheticModelSpec spec;
  spec.preset = "tiny-e4b";
  EXPECT_THROW(bench::ensure_synthetic_model("/proc/specula-no-such-dir", spec, [](const std::string&) {}), Error);
}

}  // namespace
}  // namespace specula
