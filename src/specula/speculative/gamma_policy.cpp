#include "specula/speculative/gamma_policy.h"

#include <algorithm>
#include <cmath>

#include "specula/util/cost_estimate.h"
#include "specula/util/error.h"

namespace specula {

namespace {
constexpr double kWidthSlope = 0.1;          // extra verify cost per extra row, relative to one row
constexpr double kVerifyOutlierClip = 1.15;  // a verify counts as at most this times its width's estimate
constexpr double kAcceptanceDecay = 0.98;    // weight of the acceptance evidence per drafting round
constexpr int64_t kProbeAfterZeros = 8;      // gamma-0 rounds before one gamma-1 probe ...
constexpr int64_t kMaxProbeInterval = 16;    // ... doubling after each probe that found nothing
constexpr int64_t kWiderProbeAfter = 8;      // rounds at one gamma >= 1 before one round at gamma + 1
}  // namespace

AutoGamma::AutoGamma(int64_t max_gamma, int64_t initial_gamma)
    : max_gamma_(max_gamma),
      initial_gamma_(std::clamp<int64_t>(initial_gamma, 0, std::max<int64_t>(max_gamma, 0))),
      verify_ms_(static_cast<size_t>(std::max<int64_t>(max_gamma, 0) + 2), -1.0) {
  if (max_gamma < 0) fail("auto gamma: max gamma {} must be >= 0", max_gamma);
}

double AutoGamma::acceptance() const { return successes_ / (successes_ + failures_); }

double AutoGamma::measured_cost(int64_t width) const {
  double v = verify_ms_[static_cast<size_t>(width)];
  if (v < 0) return -1.0;
  // More rows never cost less: a narrow width measured on a slow step (the first step after the
  // prefill often is) is capped by the wider widths measured since. Otherwise plain decoding
  // could look dearer than verifying drafts that are never accepted, and auto would not fall back.
  for (size_t w = static_cast<size_t>(width) + 1; w < verify_ms_.size(); ++w)
    if (verify_ms_[w] >= 0) v = std::min(v, verify_ms_[w]);
  return v;
}

double AutoGamma::verify_cost(int64_t width) const {
  if (const double measured = measured_cost(width); measured >= 0) return measured;
  // The two measured widths nearest to `width`: a line through them (verify cost grows about
  // linearly with the rows once they are compute-bound); with one, the fixed width model.
  int64_t a = -1, b = -1;
  for (int64_t w = 1; w < static_cast<int64_t>(verify_ms_.size()); ++w) {
    if (verify_ms_[static_cast<size_t>(w)] < 0) continue;
    if (a < 0 || std::abs(w - width) < std::abs(a - width)) {
      b = a;
      a = w;
    } else if (b < 0 || std::abs(w - width) < std::abs(b - width)) {
      b = w;
    }
  }
  if (a < 0) return -1.0;
  const double va = measured_cost(a);
  if (b < 0)
    return va * (1.0 + kWidthSlope * static_cast<double>(width - 1)) / (1.0 + kWidthSlope * static_cast<double>(a - 1));
  const double slope = std::max(0.0, (measured_cost(b) - va) / static_cast<double>(b - a));
  return std::max(1e-9, va + slope * static_cast<double>(width - a));
}

double AutoGamma::expected_rate(int64_t gamma) const {
  const double v = verify_cost(gamma + 1);
  if (v < 0 || (gamma > 0 && draft_ms_ < 0)) return 0.0;
  const double a = std::min(acceptance(), 1.0 - 1e-9);
  const double tokens = (1.0 - std::pow(a, static_cast<double>(gamma + 1))) / (1.0 - a);
  const double ms = static_cast<double>(gamma) * std::max(draft_ms_, 0.0) + v;
  return ms > 0 ? tokens / ms : tokens * 1e9;
}

int64_t AutoGamma::choose() {
  // First a plain round (it costs nothing over plain decoding and measures the one-row cost the
  // others are compared with), then a drafting round (gamma 0 would never measure the drafter).
  if (verify_ms_[1] < 0) return 0;
  if (draft_ms_ < 0) return max_gamma_ >= 1 ? std::max<int64_t>(initial_gamma_, 1) : 0;
  if (zero_run_ >= probe_interval_ && max_gamma_ >= 1) {
    zero_run_ = 0;
    probing_ = true;
    return 1;
  }
  // Widths are tried one past the widest measured at a time: verify cost is flat for the first
  // few rows and then climbs (CPU kernels turn compute-bound), so a line through narrow widths
  // prices wide ones far too low.
  int64_t widest = 0;
  for (int64_t g = 0; g <= max_gamma_; ++g)
    if (verify_ms_[static_cast<size_t>(g + 1)] >= 0) widest = g;
  const int64_t top = std::min(max_gamma_, widest + 1);
  int64_t best = 0;
  double best_rate = -1.0;
  for (int64_t g = 0; g <= top; ++g) {
    const double r = expected_rate(g);
    if (r > best_rate) {
      best_rate = r;
      best = g;
    }
  }
  zero_run_ = best == 0 ? zero_run_ + 1 : 0;
  // A width priced out by one slow measurement would never be measured again: after a run of
  // rounds at one gamma, one round one wider re-measures it (a few percent of one round's cost
  // when it is indeed worse).
  same_run_ = best >= 1 && best == last_best_ ? same_run_ + 1 : 0;
  last_best_ = best;
  if (same_run_ >= kWiderProbeAfter && best + 1 <= max_gamma_) {
    same_run_ = 0;
    return best + 1;
  }
  return best;
}

void AutoGamma::record_acceptance(int64_t gamma, int64_t accepted) {
  if (gamma < 0 || gamma > max_gamma_ || accepted < 0 || accepted > gamma)
    fail("auto gamma: invalid round (gamma {}, accepted {}, max gamma {})", gamma, accepted, max_gamma_);
  if (gamma == 0) return;
  // Older rounds count for less (~50 rounds of memory, the prior included), so a change in
  // acceptance partway through a reply (a code block after prose, say) is followed.
  successes_ = kAcceptanceDecay * successes_ + static_cast<double>(accepted);
  failures_ = kAcceptanceDecay * failures_ + (accepted < gamma ? 1.0 : 0.0);
}

void AutoGamma::record(int64_t gamma, int64_t accepted, double draft_ms, double verify_ms) {
  record_acceptance(gamma, accepted);
  // A verify far above its width's estimate is mostly another process taking the cores: clipped,
  // so that one slow step does not price a width out for good (it would never be tried again);
  // a lasting slowdown still gets through, a little each round.
  auto& v = verify_ms_[static_cast<size_t>(gamma + 1)];
  v = update_cost_estimate(v, v >= 0 ? std::min(verify_ms, kVerifyOutlierClip * v) : verify_ms);
  if (probing_) {  // a probe that found nothing waits twice as long before the next one
    probing_ = false;
    probe_interval_ = accepted > 0 ? kProbeAfterZeros : std::min(2 * probe_interval_, kMaxProbeInterval);
  }
  if (gamma > 0) draft_ms_ = update_cost_estimate(draft_ms_, draft_ms / static_cast<double>(gamma));
}

}  // namespace specula
