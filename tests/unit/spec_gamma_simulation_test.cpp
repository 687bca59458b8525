// `--gamma auto` against every fixed gamma on a simulated machine: rounds are timed from a verify
// cost curve shaped like the measured CPU one, with the noise this VM shows (a few percent on every
// step, an occasional step ~1.6x slow, a slow first step after the prefill), and drafts are
// accepted independently with probability p. The policy must come close to the best fixed gamma
// it does not know, never fall clearly below plain decoding, and follow an acceptance that changes
// during the reply. Everything is seeded: the same numbers on every run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <random>
#include <vector>

#include "specula/speculative/gamma_policy.h"

namespace specula {
namespace {

struct Machine {
  std::vector<double> verify_ratio;  // by width (index 1 = one row); cost of a width / one row
  double step_ms = 80.0;             // one plain decode step
  double draft_ratio = 0.02;         // one drafter step / one plain step
  // The machine's speed as a random walk: each round multiplies every cost by exp(drift * N(0, 1)),
  // kept within [0.7, 1.5] (a shared VM whose memory bandwidth moves with its neighbours' load).
  double drift = 0.0;
};

// Verify ratios as `specula bench` measured them on the 2-core Zen 5 VM (E4B 4-bit, 2 threads):
// flat up to 3 rows, then ~0.3 of a step per extra row.
Machine cpu_machine() { return {{0.0, 1.0, 1.0, 1.05, 1.25, 1.5, 1.8, 2.1, 2.45, 2.7}}; }
// As `specula bench` measured them on that VM another day (one run's medians):
// verify ratios 1.09, 1.10, 1.18, 1.20, 1.53, 1.58, 1.88, 2.20 for 2-9 rows, the drafter step 0.019,
// while the one-row step moved between ~44 and ~68 ms from one second to the next.
Machine drifting_cpu_machine() {
  return {{0.0, 1.0, 1.09, 1.10, 1.18, 1.20, 1.53, 1.58, 1.88, 2.20}, 60.0, 0.019, 0.03};
}
// Rows almost free (a memory-bound accelerator): long drafts pay.
Machine flat_machine() { return {{0.0, 1.0, 1.02, 1.04, 1.06, 1.08, 1.1, 1.12, 1.14, 1.16}}; }

class Noise {
 public:
  explicit Noise(uint64_t seed) : rng_(seed) {}
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  double normal() {
    const double u1 = std::max(uniform(), 1e-12), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  // Multiplicative timing noise: ~4 % jitter, and one step in ten ~1.6x slow (another process).
  double factor() { return std::exp(0.04 * normal()) * (uniform() < 0.1 ? 1.6 : 1.0); }

 private:
  std::mt19937_64 rng_;
};

constexpr int64_t kMaxGamma = 8;
constexpr int64_t kAuto = -1;
constexpr int64_t kOracle = -2;  // the best gamma for the acceptance of the moment, from the curve

// The acceptance probability once `produced` tokens are out: constant, or alternating between
// two values every `phase` tokens (a reply that moves between text the drafter predicts well and
// text it does not).
struct Acceptance {
  double first = 0.0;
  double second = 0.0;
  int64_t phase = 0;  // 0: always `first`
  double at(int64_t produced) const { return phase > 0 && (produced / phase) % 2 == 1 ? second : first; }
};

int64_t best_gamma_for(const Machine& m, double p) {
  int64_t best = 0;
  double best_rate = -1.0;
  for (int64_t g = 0; g <= kMaxGamma; ++g) {
    const double tokens =
        p >= 1.0 ? static_cast<double>(g + 1) : (1.0 - std::pow(p, static_cast<double>(g + 1))) / (1.0 - p);
    const double rate = tokens / (static_cast<double>(g) * m.draft_ratio + m.verify_ratio[static_cast<size_t>(g + 1)]);
    if (rate > best_rate) {
      best_rate = rate;
      best = g;
    }
  }
  return best;
}

// Milliseconds to produce `tokens` tokens with a fixed gamma, kAuto or kOracle.
double simulate(const Machine& m, const Acceptance& acceptance, int64_t gamma, int64_t tokens, uint64_t seed) {
  Noise noise(seed);
  AutoGamma policy(kMaxGamma);
  double total = 0.0;
  bool first = true;
  double speed = 1.0;  // the drift's factor on every cost
  for (int64_t produced = 0; produced < tokens;) {
    if (m.drift > 0.0) speed = std::clamp(speed * std::exp(m.drift * noise.normal()), 0.7, 1.5);
    const double p = acceptance.at(produced);
    const int64_t want = gamma == kAuto ? policy.choose() : gamma == kOracle ? best_gamma_for(m, p) : gamma;
    const int64_t g = std::min(want, tokens - produced - 1);
    int64_t accepted = 0;
    while (accepted < g && noise.uniform() < p) ++accepted;
    for (int64_t k = accepted + 1; k < g; ++k) noise.uniform();  // same draws whatever the prefix
    const double draft_ms = static_cast<double>(g) * m.draft_ratio * m.step_ms * noise.factor() * speed;
    const double verify_ms =
        m.verify_ratio[static_cast<size_t>(g + 1)] * m.step_ms * noise.factor() * (first ? 1.4 : 1.0) * speed;
    first = false;
    if (gamma == kAuto) policy.record(g, accepted, draft_ms, verify_ms);
    total += draft_ms + verify_ms;
    produced += accepted + 1;
  }
  return total;
}

struct Outcome {
  double auto_rate = 0.0;        // tokens per ms, mean over seeds
  double best_fixed_rate = 0.0;  // the best fixed gamma's (0 = plain decoding)
  int64_t best_fixed = 0;
  double plain_rate = 0.0;
};

constexpr int kSeeds = 200;

// Tokens per ms, mean over the seeds.
double mean_rate(const Machine& m, const Acceptance& acceptance, int64_t gamma, int64_t tokens) {
  double sum = 0.0;
  for (int s = 0; s < kSeeds; ++s)
    sum += static_cast<double>(tokens) /
           simulate(m, acceptance, gamma, tokens, 1000003ULL * static_cast<uint64_t>(s) + 17);
  return sum / kSeeds;
}

Outcome compare(const Machine& m, double p, int64_t tokens) {
  auto rate = [&](int64_t gamma) { return mean_rate(m, Acceptance{p}, gamma, tokens); };
  Outcome o;
  o.auto_rate = rate(kAuto);
  o.plain_rate = rate(0);
  for (int64_t g = 0; g <= kMaxGamma; ++g) {
    const double r = rate(g);
    if (r > o.best_fixed_rate) {
      o.best_fixed_rate = r;
      o.best_fixed = g;
    }
  }
  return o;
}

// Auto must reach `min_fraction` of the best fixed gamma and `min_vs_plain` of plain decoding at
// every p (at p = 0 the best is plain itself; short runs pay for measuring the drafter once).
void expect_near_best(const Machine& m, const char* name, int64_t tokens, double min_fraction, double min_vs_plain) {
  for (double p : {0.0, 0.1, 0.3, 0.5, 0.7, 0.9}) {
    const Outcome o = compare(m, p, tokens);
    const double fraction = o.auto_rate / o.best_fixed_rate;
    std::printf("%s, %lld tokens, p %.1f: auto %.3f of best fixed gamma %lld, %.2fx plain (best fixed %.2fx)\n", name,
                static_cast<long long>(tokens), p, fraction, static_cast<long long>(o.best_fixed),
                o.auto_rate / o.plain_rate, o.best_fixed_rate / o.plain_rate);
    EXPECT_GE(fraction, min_fraction) << name << ", " << tokens << " tokens, p " << p;
    EXPECT_GE(o.auto_rate, min_vs_plain * o.plain_rate) << name << ", " << tokens << " tokens, p " << p;
  }
}

// The policy before it tried one width past the widest measured at a time (and took every slow
// verify at face value) reached 0.898-0.946 of the best fixed gamma here at 32 tokens: a line
// through the flat first widths priced wide verifies as free. At p = 0 it stayed at 0.94x plain
// over 256 tokens: the slow first step made plain decoding look dearer than a 3-row verify.
TEST(SpecGammaSimulation, AutoComesCloseToTheBestFixedGammaOnTheCpuCurve) {
  expect_near_best(cpu_machine(), "cpu", 256, 0.93, 0.98);
  expect_near_best(cpu_machine(), "cpu", 32, 0.93, 0.95);
}

// The same with the machine's speed wandering during the reply (±~20 % over a 128-token reply, as
// `specula bench`'s plain runs minutes apart moved by up to 1.6x): a width's cost is then measured
// at one speed and compared with another's measured at another.
TEST(SpecGammaSimulation, AutoComesCloseToTheBestFixedGammaWhileTheMachineDrifts) {
  expect_near_best(drifting_cpu_machine(), "drifting cpu", 128, 0.93, 0.98);
}

// Where extra rows are almost free the best gamma is the largest, and climbing to it one width a
// round costs short runs (0.7 of the best fixed gamma at p = 0.9 and 32 tokens, against 0.8 when
// auto jumped to wide verifies at once); the CPU curve above is the one specula runs on.
TEST(SpecGammaSimulation, AutoStillClimbsWhenRowsAreAlmostFree) {
  expect_near_best(flat_machine(), "flat", 256, 0.8, 0.98);
  expect_near_best(flat_machine(), "flat", 32, 0.65, 0.95);
}

// Acceptance that changes during a reply: auto is compared with an oracle that knows the
// acceptance of the moment and picks its best gamma. The policy that counted every round since
// the start alike (and waited up to 64 plain rounds between probes) reached 0.868 of the oracle
// when a drafter that never agreed started agreeing 80 % of the time every 128 tokens, and
// 0.914-0.924 in the other cases here.
TEST(SpecGammaSimulation, AutoFollowsAcceptanceThatChangesDuringTheReply) {
  const Machine m = cpu_machine();
  for (const Acceptance a : {Acceptance{0.9, 0.1, 32}, Acceptance{0.9, 0.1, 128}, Acceptance{0.8, 0.0, 32},
                             Acceptance{0.8, 0.0, 128}, Acceptance{0.0, 0.8, 32}, Acceptance{0.0, 0.8, 128}}) {
    const double auto_rate = mean_rate(m, a, kAuto, 512);
    const double oracle_rate = mean_rate(m, a, kOracle, 512);
    const double plain_rate = mean_rate(m, a, 0, 512);
    std::printf("cpu, 512 tokens, p %.1f / %.1f every %lld tokens: auto %.3f of the oracle, %.2fx plain\n", a.first,
                a.second, static_cast<long long>(a.phase), auto_rate / oracle_rate, auto_rate / plain_rate);
    EXPECT_GE(auto_rate, 0.9 * oracle_rate) << a.first << " / " << a.second << " every " << a.phase;
  }
}

}  // namespace
}  // namespace specula
