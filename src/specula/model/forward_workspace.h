#pragma once
// The target's forward step as its blocks see it (model/target_model.cpp, target_blocks.cpp):
// which rows of which sequences it runs, and the activations of those rows.
#include <cstdint>
#include <span>
#include <vector>

#include "specula/model/attention_block.h"
#include "specula/model/layer_ops.h"
#include "specula/model/target_model.h"

namespace specula {

// The rows of one forward step: the fed tokens of every sequence, back to back.
struct ForwardStep {
  struct Sequence {
    TargetCache* cache = nullptr;
    int64_t first_row = 0;  // its rows are [first_row, first_row + rows) of the step
    int64_t rows = 0;
    int64_t position = 0;  // context position of its first row (cache->offset() before the step)
  };
  std::vector<int32_t> tokens;     // [rows]
  std::vector<int64_t> positions;  // [rows]: the context position of every row
  std::vector<Sequence> sequences;

  int64_t rows() const { return static_cast<int64_t>(tokens.size()); }
  void clear() {
    tokens.clear();
    positions.clear();
    sequences.clear();
  }
  void add(TargetCache& cache, std::span<const int32_t> fed) {
    const auto first = rows();
    sequences.push_back(Sequence{&cache, first, static_cast<int64_t>(fed.size()), cache.offset()});
    tokens.insert(tokens.end(), fed.begin(), fed.end());
    for (int64_t r = 0; r < static_cast<int64_t>(fed.size()); ++r) positions.push_back(cache.offset() + r);
  }
};

// Activations of every row of a step ([rows][width] each), grown by ensure() and reused.
struct ForwardWorkspace {
  std::vector<float> x;                         // residual stream [n][H]
  std::vector<float> normed;                    // [n][H]
  std::vector<float> q, k, v;                   // projections
  std::vector<float> qkv;                       // [n][q | k | v] of a fused projection
  std::vector<float> attn;                      // [n][nH*D]
  std::vector<float> branch;                    // [n][H] block outputs
  std::vector<float> branch2;                   // [n][H]
  std::vector<float> gate, up;                  // MLP intermediates
  std::vector<float> ple;                       // per-layer inputs [n][NL*W]
  std::vector<float> ple_tok;                   // [n][NL*W]
  std::vector<int32_t> ple_ids;                 // [n]
  AttentionBuffers attention;                   // the attention block's own activations
  std::vector<AttentionRows> attention_rows;    // a layer's sequences
  std::vector<float> rope_cos[2], rope_sin[2];  // per layer type [n][pairs]
  bool rope_ready[2] = {false, false};
  // MoE
  std::vector<float> router_in, router_scores, expert_in, expert_out, moe_out, route_weights;
  std::vector<int64_t> route_experts;
  std::vector<int64_t> expert_rows;
  // Outputs: final-norm rows, the LM head's input rows, logits of a step of several sequences.
  std::vector<float> hidden, head_in, logits;
  ForwardStep step;  // forward()'s chunk, reused
};

}  // namespace specula
