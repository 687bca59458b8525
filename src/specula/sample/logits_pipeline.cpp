#include "specula/sample/logits_pipeline.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "specula/util/error.h"

namespace specula {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

void check_history(const TokenHistory& history, int64_t vocab_size) {
  if (history.prompt_length > history.tokens.size())
    fail("sampling: prompt_length {} exceeds the history of {} tokens", history.prompt_length, history.tokens.size());
  for (size_t i = 0; i < history.tokens.size(); ++i) {
    const int32_t id = history.tokens[i];
    if (id < 0 || id >= vocab_size)
      fail("sampling: history token {} (position {}) is outside the vocabulary (allowed: 0 to {})", id, i,
           vocab_size - 1);
  }
}

// Keeps the first `keep` ranked candidates and builds the distribution from their weights:
// sparse when they are at most half the vocabulary, else dense.
TokenDistribution from_ranked(int64_t vocab_size, std::span<const int32_t> ranked, std::span<const double> weight_of,
                              bool weights_by_id, size_t keep) {
  if (static_cast<int64_t>(keep) * 2 <= vocab_size) {
    std::vector<TokenProb> w(keep);
    for (size_t i = 0; i < keep; ++i) {
      const int32_t id = ranked[i];
      w[i] = {id, weights_by_id ? weight_of[static_cast<size_t>(id)] : weight_of[i]};
    }
    return TokenDistribution::from_sparse_weights(vocab_size, std::move(w));
  }
  std::vector<double> dense(static_cast<size_t>(vocab_size), 0.0);
  for (size_t i = 0; i < keep; ++i) {
    const int32_t id = ranked[i];
    dense[static_cast<size_t>(id)] = weights_by_id ? weight_of[static_cast<size_t>(id)] : weight_of[i];
  }
  return TokenDistribution::from_dense_weights(std::move(dense));
}

// Length of the shortest prefix of `w` (sorted descending) whose sum reaches top_p * total; the
// whole range if rounding keeps it from getting there. `cumulative` carries over between chunks.
size_t top_p_cut(std::span<const double> w, double threshold, double& cumulative, bool& reached) {
  for (size_t i = 0; i < w.size(); ++i) {
    cumulative += w[i];
    if (cumulative >= threshold) {
      reached = true;
      return i + 1;
    }
  }
  return w.size();
}

// Length of the prefix of `w` (sorted descending, w[0] the max) with w >= min_p * w[0].
size_t min_p_cut(std::span<const double> w, double min_p) {
  if (min_p <= 0.0 || w.empty()) return w.size();
  const double threshold = min_p * w[0];
  size_t n = 1;  // the max always survives
  while (n < w.size() && w[n] >= threshold) ++n;
  return n;
}

// Ascending order of the key = (logit descending, id ascending); finite logits only. The float's
// bits are mapped to an unsigned integer that orders like the float (-0 folded into +0 first).
uint64_t rank_key(float logit, int32_t id) {
  const uint32_t bits = std::bit_cast<uint32_t>(logit + 0.0f);
  const uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(~ascending) << 32) | static_cast<uint32_t>(id);
}

// Per-thread scratch buffers reused across calls: at V = 262144 a fresh 1-2 MB allocation per
// token costs more in page faults than the work itself. Results never depend on their contents.
struct Scratch {
  std::vector<float> logits;
  std::vector<double> weights;
  std::vector<uint64_t> keys;
  std::vector<int32_t> ranked;
  std::vector<double> ranked_weights;
  std::vector<uint8_t> seen;     // all zero between calls
  std::vector<uint32_t> counts;  // all zero between calls
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Tokens outside the constraint's mask can never be chosen. Whole zero words skip 64 tokens at once.
void mask_disallowed(AllowedTokens allowed, std::vector<float>& out) {
  const size_t n = out.size();
  for (size_t w = 0; w < allowed.size(); ++w) {
    const uint64_t bits = allowed[w];
    if (bits == ~uint64_t{0}) continue;
    const size_t end = std::min(n, (w + 1) * 64);
    for (size_t i = w * 64; i < end; ++i)
      if (!((bits >> (i & 63)) & 1)) out[i] = kNegInf;
  }
}

}  // namespace

LogitsIssues process_logits(std::span<const float> logits, const TokenHistory& history, const SamplingParams& params,
                            std::vector<float>& out, AllowedTokens allowed) {
  const int64_t V = static_cast<int64_t>(logits.size());
  validate_for_vocab(params, V);
  check_history(history, V);
  if (!allowed.empty() && allowed.size() != static_cast<size_t>((V + 63) / 64))
    fail("sampling: the allowed-token mask has {} words, the vocabulary of {} needs {}", allowed.size(), V,
         (V + 63) / 64);
  LogitsIssues issues;
  out.assign(logits.begin(), logits.end());
  for (float& x : out) {
    if (std::isnan(x)) {
      x = kNegInf;
      ++issues.nan_logits;
    } else if (x == kPosInf) {
      ++issues.pos_inf_logits;
    }
  }
  for (const auto& [id, bias] : params.logit_bias) {
    float& x = out[static_cast<size_t>(id)];
    // A -inf bias bans the token outright (+inf + -inf would be NaN).
    x = (bias == -std::numeric_limits<double>::infinity()) ? kNegInf : static_cast<float>(x + bias);
  }
  for (const int32_t id : params.suppress_tokens) out[static_cast<size_t>(id)] = kNegInf;
  if (!allowed.empty()) mask_disallowed(allowed, out);

  if (params.repetition_penalty != 1.0) {
    // Mark-on-first-sight over a per-vocabulary bitmap: each distinct token is penalized once.
    const float penalty = static_cast<float>(params.repetition_penalty);
    std::vector<uint8_t>& seen = scratch().seen;
    if (seen.size() < static_cast<size_t>(V)) seen.resize(static_cast<size_t>(V), 0);
    for (const int32_t id : history.tokens) {
      if (seen[static_cast<size_t>(id)]) continue;
      seen[static_cast<size_t>(id)] = 1;
      float& x = out[static_cast<size_t>(id)];
      x = x > 0.0f ? x / penalty : x * penalty;
    }
    for (const int32_t id : history.tokens) seen[static_cast<size_t>(id)] = 0;
  }

  if (params.presence_penalty != 0.0 || params.frequency_penalty != 0.0) {
    const auto generated = history.tokens.subspan(history.prompt_length);
    std::vector<uint32_t>& count = scratch().counts;
    if (count.size() < static_cast<size_t>(V)) count.resize(static_cast<size_t>(V), 0);
    for (const int32_t id : generated) ++count[static_cast<size_t>(id)];
    for (const int32_t id : generated) {
      uint32_t& c = count[static_cast<size_t>(id)];
      if (c == 0) continue;  // already applied
      float& x = out[static_cast<size_t>(id)];
      x = static_cast<float>(x - (params.frequency_penalty * c + params.presence_penalty));
      c = 0;  // also restores the all-zero scratch
    }
  }
  return issues;
}

int32_t argmax_lowest_id(std::span<const float> values) {
  int32_t best = -1;
  float best_value = kNegInf;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] > best_value) {  // strict: NaN and -inf never win, the lowest id keeps ties
      best_value = values[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

ProcessedDistribution build_distribution(std::span<const float> logits, const TokenHistory& history,
                                         const SamplingParams& params, AllowedTokens allowed) {
  const int64_t V = static_cast<int64_t>(logits.size());
  if (V == 0) fail("sampling: empty logits (vocabulary size 0)");
  if (V > std::numeric_limits<int32_t>::max()) fail("sampling: vocabulary size {} exceeds the int32 token id range", V);
  ProcessedDistribution result;
  std::vector<float>& x = scratch().logits;
  result.issues = process_logits(logits, history, params, x, allowed);

  const int32_t best = argmax_lowest_id(x);
  if (best < 0) {
    result.issues.all_masked = true;
    result.p = TokenDistribution::point_mass(V, 0);
    return result;
  }
  if (params.greedy()) {
    result.p = TokenDistribution::point_mass(V, best);
    return result;
  }
  if (x[static_cast<size_t>(best)] == kPosInf) {
    // The softmax's limit: the +inf tokens share the mass equally, everything else gets none.
    for (float& v : x) v = (v == kPosInf) ? 0.0f : kNegInf;
  }

  const double max_logit = x[static_cast<size_t>(best)];
  const double T = params.temperature;
  auto weight = [&](float logit) { return std::exp((static_cast<double>(logit) - max_logit) / T); };
  // Ranking by logit equals ranking by probability; the id breaks ties deterministically.
  auto better = [&](int32_t a, int32_t b) {
    const float xa = x[static_cast<size_t>(a)], xb = x[static_cast<size_t>(b)];
    return xa > xb || (xa == xb && a < b);
  };

  int64_t finite = 0;
  for (const float v : x) finite += v > kNegInf;
  const bool use_top_k = params.top_k > 0 && params.top_k < finite;
  const bool use_top_p = params.top_p < 1.0;
  const bool use_min_p = params.min_p > 0.0;

  if (use_top_k) {
    // Bounded heap with the worst kept candidate on top: O(V log k), no sort of the vocabulary.
    const size_t k = static_cast<size_t>(params.top_k);
    std::vector<int32_t> ranked;
    ranked.reserve(k);
    for (int32_t i = 0; i < static_cast<int32_t>(V); ++i) {
      if (!(x[static_cast<size_t>(i)] > kNegInf)) continue;
      if (ranked.size() < k) {
        ranked.push_back(i);
        std::push_heap(ranked.begin(), ranked.end(), better);
      } else if (better(i, ranked.front())) {
        std::pop_heap(ranked.begin(), ranked.end(), better);
        ranked.back() = i;
        std::push_heap(ranked.begin(), ranked.end(), better);
      }
    }
    std::sort(ranked.begin(), ranked.end(), better);
    std::vector<double> w(ranked.size());
    double total = 0.0;
    for (size_t i = 0; i < ranked.size(); ++i) total += (w[i] = weight(x[static_cast<size_t>(ranked[i])]));
    size_t keep = ranked.size();
    if (use_top_p) {
      double cumulative = 0.0;
      bool reached = false;
      keep = top_p_cut(w, params.top_p * total, cumulative, reached);
    }
    keep = min_p_cut(std::span<const double>(w).first(keep), params.min_p);
    result.p = from_ranked(V, ranked, w, false, keep);
    return result;
  }

  // Dense weights (0 for -inf) for every remaining path.
  std::vector<double>& w = scratch().weights;  // moved out when it becomes the dense result
  w.resize(static_cast<size_t>(V));
  double total = 0.0;
  for (size_t i = 0; i < w.size(); ++i) total += (w[i] = x[i] > kNegInf ? weight(x[i]) : 0.0);

  if (use_top_p) {
    // Rank by one integer key per token, (logit desc, id asc) as an ascending uint64: sorting
    // plain integers avoids an indirect comparator over the whole vocabulary.
    std::vector<uint64_t>& keys = scratch().keys;
    keys.clear();
    for (int32_t i = 0; i < static_cast<int32_t>(V); ++i) {
      const float v = x[static_cast<size_t>(i)];
      if (v > kNegInf) keys.push_back(rank_key(v, i));
    }
    // Grow the sorted prefix in chunks until the nucleus is covered.
    const double threshold = params.top_p * total;
    double cumulative = 0.0;
    bool reached = false;
    size_t sorted = 0, keep = keys.size();
    std::vector<int32_t>& ranked = scratch().ranked;
    std::vector<double>& ranked_w = scratch().ranked_weights;
    ranked.clear();
    ranked_w.clear();
    for (size_t chunk = 256; sorted < keys.size() && !reached; chunk *= 4) {
      const size_t end = std::min(keys.size(), sorted + chunk);
      const auto first = keys.begin() + static_cast<std::ptrdiff_t>(sorted);
      const auto middle = keys.begin() + static_cast<std::ptrdiff_t>(end);
      // Select the next `chunk` best (linear), then sort only them.
      if (middle != keys.end()) std::nth_element(first, middle, keys.end());
      std::sort(first, middle);
      for (size_t i = sorted; i < end; ++i) {
        ranked.push_back(static_cast<int32_t>(keys[i] & 0xffffffffu));
        ranked_w.push_back(w[static_cast<size_t>(ranked.back())]);
      }
      const size_t n = top_p_cut(std::span<const double>(ranked_w).subspan(sorted), threshold, cumulative, reached);
      if (reached) keep = sorted + n;
      sorted = end;
    }
    keep = min_p_cut(std::span<const double>(ranked_w).first(keep), params.min_p);
    result.p = from_ranked(V, ranked, w, true, keep);
    return result;
  }

  if (use_min_p) {
    // w of the max token is exp(0) = 1, so the threshold is min_p itself.
    int64_t survivors = 0;
    for (double& v : w) {
      if (v < params.min_p) v = 0.0;
      survivors += v > 0.0;
    }
    if (survivors * 2 <= V) {
      std::vector<TokenProb> sparse;
      sparse.reserve(static_cast<size_t>(survivors));
      for (size_t i = 0; i < w.size(); ++i)
        if (w[i] > 0.0) sparse.push_back({static_cast<int32_t>(i), w[i]});
      result.p = TokenDistribution::from_sparse_weights(V, std::move(sparse));
      return result;
    }
  } else if (finite * 2 <= V) {
    // Most of the vocabulary was masked by the processors: the sparse form is smaller.
    std::vector<TokenProb> sparse;
    sparse.reserve(static_cast<size_t>(finite));
    for (size_t i = 0; i < w.size(); ++i)
      if (w[i] > 0.0) sparse.push_back({static_cast<int32_t>(i), w[i]});
    result.p = TokenDistribution::from_sparse_weights(V, std::move(sparse));
    return result;
  }
  result.p = TokenDistribution::from_dense_weights(std::move(w));
  return result;
}

}  // namespace specula
