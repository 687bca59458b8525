#pragma once
// The Gemma 4 "-assistant" drafter (docs/gemma4.md §7): a 4-layer, Q-only decoder that reads the
// target's last sliding and last full donor KV caches (frozen for a round), fed with the target's
// scaled embedding of the token being extended and a backbone-width hidden state, chaining its own
// post_projection output from step to step.
//
// Conventions (the only two differences between them; the target verifies every draft, so both
// give the same output and differ only in acceptance):
//  * Ollama (default, the trained model's semantics): attention scale 1.0, query position
//    offset-1 for every step of the round;
//  * MlxBun (compatibility with mlx-bun v0.0.4): scale D_k^-0.5 with the layer's own head dim,
//    query position offset-1+k for step k.
// Both attend to the newest min(offset, W) sliding keys and all offset full keys, without a mask.
//
// Heads: the centroid head (top-K clusters -> candidate ids through token_ordering -> scores over
// the drafter's own embedding rows; greedy token = best score, lowest vocab id on ties; never a
// vocabulary-wide logits row) or the dense tied head (logits over the whole vocabulary).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "specula/io/checkpoint.h"
#include "specula/kernels/affine_copy.h"
#include "specula/kernels/packed_affine.h"
#include "specula/kernels/rope.h"
#include "specula/kernels/weight_matrix.h"
#include "specula/model/target_cache.h"
#include "specula/model/target_model.h"
#include "specula/util/thread_pool.h"

namespace specula {

enum class DrafterConvention { Ollama, MlxBun };
const char* drafter_convention_name(DrafterConvention c);  // "ollama" / "mlx-bun"
// Throws specula::Error naming the value and the accepted names.
DrafterConvention parse_drafter_convention(const std::string& name);

// Whether the drafter's dense (16- or 32-bit) matrices are replaced at load by 4- or 8-bit affine
// copies (kernels/affine_copy.h). It changes what a draft step costs and which drafts it proposes,
// never the output: the target verifies every draft.
//  * Auto (default): 4-bit copies when the head is dense and the precision is fast or int8 (the
//    dense tied head of the larger assistants is 262144 x 1024 bf16, read whole every draft step);
//    the stored weights otherwise, and always in exact precision;
//  * None: the stored weights;
//  * Q4 / Q8: 4-bit / 8-bit copies of every dense matrix, whatever the head and precision.
enum class DrafterQuant { Auto, None, Q4, Q8 };
const char* drafter_quant_name(DrafterQuant q);  // "auto" / "none" / "q4" / "q8"
// Throws specula::Error naming the value and the accepted names.
DrafterQuant parse_drafter_quant(const std::string& name);
// The copies' bits (4 or 8), or 0 for the stored weights.
int drafter_quant_bits(DrafterQuant q, bool centroid_head, Precision precision);

// Which head scores a dense-head drafter's drafts. Like DrafterQuant it changes what a draft step
// costs and which drafts it proposes, never the output.
//  * Stored (default): the dense tied head, every vocabulary row each step;
//  * Clusters: a candidate head built at load (model/token_clusters.h): the step scores 2048
//    cluster centroids, then the tokens of the best 32 clusters (4096 of 262144 rows).
// A drafter with its own centroid head (E2B/E4B) always uses it.
enum class DrafterHead { Stored, Clusters };
const char* drafter_head_name(DrafterHead h);  // "stored" / "clusters"
// Throws specula::Error naming the value and the accepted names.
DrafterHead parse_drafter_head(const std::string& name);

struct DraftCandidate {
  int32_t id = 0;
  float score = 0.0f;
};

// The outputs of one draft step.
struct DraftStep {
  int32_t token = 0;                   // greedy choice: best score, lowest id on ties
  int64_t position = 0;                // the query (RoPE) position used
  std::vector<float> post_projection;  // [H_b]: the next step's hidden input
  // Every scored token (centroid head: the K*V/C candidates in cluster order; dense head: the
  // whole vocabulary in id order) with its score — the support of the drafter's q.
  std::vector<int32_t> candidate_ids;
  std::vector<float> candidate_scores;

  // The n best candidates by (score desc, id asc).
  std::vector<DraftCandidate> top(size_t n) const;
};

// One sequence's draft step in a batched drafter call.
struct DraftRow {
  int32_t token = 0;              // the token being extended
  const float* hidden = nullptr;  // [H_b]: the backbone hidden input of this step
  const TargetCache* cache = nullptr;
  int64_t k = 0;  // the step's index within its round
};

struct Linear;  // model/layer_ops.h

class Drafter {
 public:
  // Loads the drafter checkpoint and checks it against the target (docs/gemma4.md §7); throws
  // specula::Error listing every incompatibility with both values.
  static std::unique_ptr<Drafter> load(const std::string& dir, const TargetModel& target,
                                       DrafterConvention convention = DrafterConvention::Ollama,
                                       DrafterQuant quant = DrafterQuant::Auto, DrafterHead head = DrafterHead::Stored);
  Drafter(std::unique_ptr<DrafterCheckpoint> checkpoint, const TargetModel& target, DrafterConvention convention,
          DrafterQuant quant = DrafterQuant::Auto, DrafterHead head = DrafterHead::Stored);
  ~Drafter();

  const DrafterCheckpoint& checkpoint() const { return *checkpoint_; }
  DrafterConvention convention() const { return convention_; }
  bool centroid_head() const { return checkpoint_->centroid_head; }
  // Whether a step scores candidates (a centroid head, stored or built at load) rather than the
  // whole vocabulary.
  bool candidate_head() const { return clusters_ > 0; }
  bool built_head() const { return !built_centroids_.empty(); }
  int64_t clusters() const { return clusters_; }              // 0 for the dense head
  int64_t hidden_size() const { return hidden_; }             // h
  int64_t backbone_hidden_size() const { return backbone_; }  // H_b (= the target's H)
  int64_t vocab_size() const { return vocab_; }
  // Bits of the affine copies made at load (0: the stored weights), and how many matrices have one.
  int copy_bits() const { return copy_bits_; }
  int copied_matrices() const { return static_cast<int>(copies_.size()); }

  // One draft step k (0-based within the round) extending `token` with backbone hidden `g`
  // ([H_b]: the target's final-norm hidden for k = 0, the previous step's post_projection after),
  // over the target's caches as they stand (nothing is written to them). Needs cache.offset() >= 1.
  // Uses an internal workspace: one caller at a time per Drafter.
  DraftStep step(int32_t token, const float* g, const TargetCache& cache, int64_t k, ThreadPool& pool) const;
  // The draft steps of several sequences in one pass: every matmul runs once over all rows (the
  // weights stream once), attention reads each row's own caches. Row i's results are the bytes
  // step() gives it alone. Uses the internal workspace: one caller at a time per Drafter.
  std::vector<DraftStep> step_batch(std::span<const DraftRow> rows, ThreadPool& pool) const;

 private:
  struct Layer;
  struct Workspace;
  void embed(std::span<const DraftRow> rows, Workspace& ws, const Linear& linear) const;
  void attention_block(const Layer& L, std::span<const DraftRow> rows, Workspace& ws, const Linear& linear) const;
  void mlp_block(const Layer& L, int64_t n, Workspace& ws, const Linear& linear) const;
  void head(int64_t n, std::vector<DraftStep>& out, const Linear& linear) const;
  void centroid_candidates(const float* x, const float* cluster_scores, DraftStep& out, const Linear& linear) const;
  WeightMatrix packed_cluster_rows(Workspace& ws) const;
  static int32_t best_candidate(const DraftStep& out);
  std::vector<WeightMatrix*> matrices();  // every matrix a step reads
  void map_pages_in();
  void copy_dense_matrices(int bits, ThreadPool& pool);
  void use_stored_centroid_head();
  void build_candidate_head(ThreadPool& pool);

  std::unique_ptr<DrafterCheckpoint> checkpoint_;
  const TargetModel& target_;
  DrafterConvention convention_;
  int64_t hidden_ = 0;
  int64_t backbone_ = 0;
  int64_t vocab_ = 0;
  float eps_ = 1e-6f;
  int sliding_donor_ = -1;
  int full_donor_ = -1;
  WeightMatrix pre_projection_, post_projection_, embed_tokens_, centroids_;
  std::vector<AffineCopy> copies_;  // DrafterQuant: the affine copies the matrices point at
  int copy_bits_ = 0;
  PackedBuffer packed_;  // fast precision: quantized matrices in the fast kernels' layout
  std::vector<float> final_norm_;
  std::vector<int32_t> token_ordering_;                                  // centroid head: [C * P]
  std::vector<float> built_centroids_;                                   // DrafterHead::Clusters: the centroids' values
  std::vector<uint8_t> ordered_rows_, ordered_scales_, ordered_biases_;  // and the table in cluster order
  int64_t clusters_ = 0, cluster_size_ = 0, top_clusters_ = 0;
  std::vector<Layer> layers_;
  std::unique_ptr<Workspace> ws_;
};

// "4-bit copies of 23 matrices" when the drafter runs affine copies (DrafterQuant), else "".
std::string drafter_copies_note(const Drafter& drafter);
// "centroid head", "dense head", or "candidate head of 2048 clusters built at load".
std::string drafter_head_note(const Drafter& drafter);
// What the drafter built at load: its copies' note, then a built head's; "" when nothing.
std::string drafter_built_note(const Drafter& drafter);

}  // namespace specula
