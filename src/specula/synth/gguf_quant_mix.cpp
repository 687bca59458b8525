#include "specula/synth/gguf_quant_mix.h"

#include <algorithm>
#include <cstdlib>

namespace specula::synth {

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool is_attn_v(const std::string& name) { return contains(name, "attn_v.weight"); }
bool is_ffn_down(const std::string& name) { return contains(name, "ffn_down"); }
bool is_embedding(const std::string& name) {
  return name == "token_embd.weight" || name == "per_layer_token_embd.weight";
}

// The block index in "blk.N.…" (-1 for other names).
int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

// llama.cpp's use_more_bits: the first and last eighth of n, and every third one between.
bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// Whether each tensor of `group` (one kind, in layer order) gets the larger type: the index is the
// tensor's position in the group, or its block index for expert models' ffn_down.
void mark(std::vector<std::string> group, bool index_is_layer, std::map<std::string, bool>& out) {
  std::stable_sort(group.begin(), group.end(),
                   [](const std::string& a, const std::string& b) { return layer_of(a) < layer_of(b); });
  const int n = static_cast<int>(group.size());
  for (int i = 0; i < n; ++i) out[group[i]] = more_bits(index_is_layer ? layer_of(group[i]) : i, n);
}

}  // namespace

KQuantMix::KQuantMix(const std::vector<std::string>& names, bool experts, GgmlType base) : base_(base) {
  std::vector<std::string> attn_v, ffn_down;
  for (const std::string& name : names) {
    if (is_attn_v(name)) attn_v.push_back(name);
    if (is_ffn_down(name)) ffn_down.push_back(name);
  }
  mark(attn_v, false, more_bits_);
  mark(ffn_down, experts, more_bits_);
}

GgmlType KQuantMix::type_of(const std::string& name, int64_t cols) const {
  const auto it = more_bits_.find(name);
  const bool large = is_embedding(name) || (it != more_bits_.end() && it->second);
  if (cols % 256 == 0) return large ? GgmlType::Q6_K : base_;
  const GgmlType base_fallback = base_ == GgmlType::Q5_K ? GgmlType::Q5_1 : GgmlType::Q5_0;
  if (cols % 32 == 0) return large ? GgmlType::Q8_0 : base_fallback;
  return GgmlType::F32;
}

}  // namespace specula::synth
