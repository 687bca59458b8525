#include "specula/engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "specula/text/tokenizer.h"
#include "specula/util/error.h"

namespace specula {

namespace {

double finite_or_neg_inf(float v) {
  return std::isnan(v) ? -std::numeric_limits<double>::infinity() : static_cast<double>(v);
}

std::string token_text(int32_t id, const text::Tokenizer* tokenizer) {
  if (tokenizer == nullptr || id < 0 || static_cast<size_t>(id) >= tokenizer->vocab_size()) return {};
  const int32_t ids[1] = {id};
  return tokenizer->decode(ids, /*skip_special_tokens=*/false);
}

}  // namespace

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int top, const text::Tokenizer* tokenizer) {
  if (chosen < 0 || static_cast<size_t>(chosen) >= logits.size())
    fail("logprobs: token {} outside the logits row of {} entries", chosen, logits.size());
  double max = -std::numeric_limits<double>::infinity();
  for (float v : logits) max = std::max(max, finite_or_neg_inf(v));
  // log Z = max + log(sum exp(x - max)). +inf logits share all the mass (the softmax's limit); a
  // row without any finite or +inf value gives -inf everywhere.
  const double inf = std::numeric_limits<double>::infinity();
  double log_z = -inf;
  int64_t infinite = 0;
  if (max == inf) {
    for (float v : logits) infinite += finite_or_neg_inf(v) == inf ? 1 : 0;
  } else if (max > -inf) {
    double sum = 0.0;
    for (float v : logits) sum += std::exp(finite_or_neg_inf(v) - max);
    log_z = max + std::log(sum);
  }
  auto logprob = [&](int32_t id) {
    const double v = finite_or_neg_inf(logits[static_cast<size_t>(id)]);
    if (infinite > 0) return v == inf ? -std::log(static_cast<double>(infinite)) : -inf;
    if (log_z == -inf) return -inf;
    return v - log_z;
  };

  TokenLogprobs out;
  out.chosen = TokenLogprob{chosen, token_text(chosen, tokenizer), logprob(chosen)};
  if (top <= 0) return out;
  // Bounded selection: keep the `top` best (value desc, id asc) in order; V * top worst case,
  // but a candidate rarely beats the current worst.
  const size_t n = std::min(static_cast<size_t>(top), logits.size());
  std::vector<std::pair<double, int32_t>> best;  // sorted best first
  best.reserve(n + 1);
  auto better = [](const std::pair<double, int32_t>& a, const std::pair<double, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  for (size_t i = 0; i < logits.size(); ++i) {
    const std::pair<double, int32_t> c{finite_or_neg_inf(logits[i]), static_cast<int32_t>(i)};
    if (best.size() == n && !better(c, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), c, better), c);
    if (best.size() > n) best.pop_back();
  }
  out.top.reserve(best.size());
  for (const auto& [value, id] : best) out.top.push_back(TokenLogprob{id, token_text(id, tokenizer), logprob(id)});
  return out;
}

}  // namespace specula
