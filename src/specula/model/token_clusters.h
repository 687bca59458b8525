#pragma once
// Balanced clusters of a token table, built at load so that a drafter with a dense tied head can
// score a few thousand candidate tokens per draft step instead of the whole vocabulary, as the
// E2B/E4B assistants' trained centroid head does (docs/gemma4.md §7).
//
// The table's rows are split in halves again and again, each part at the median of its rows'
// projections on the part's principal direction (a few power iterations), until every part holds
// cluster_size rows. Tables wider than 128 inputs are split in a random projection of 128 (one
// matmul; the halvings then read 128 floats a row). A cluster's centroid is the mean of its rows
// in the table itself, so a query's score against a centroid is its mean score over the cluster's
// tokens. The same table gives the same clusters at any thread count: every sum runs over fixed
// chunks of rows, added in a fixed order.
#include <cstdint>
#include <vector>

#include "specula/kernels/weight_matrix.h"
#include "specula/util/thread_pool.h"

namespace specula {

struct TokenClusters {
  int64_t clusters = 0;
  int64_t cluster_size = 0;
  int64_t top_clusters = 0;             // how many clusters a draft step scores the tokens of
  std::vector<float> centroids;         // [clusters * table.cols]
  std::vector<int32_t> token_ordering;  // cluster c's token ids at [c * cluster_size, ...), ascending
};

// How many clusters a table of `rows` tokens is split into: the largest power of two up to 2048
// that divides rows into clusters of at least 128 tokens; 0 when rows has no such split (fewer
// than 256 rows, or not a multiple of 256).
int64_t token_cluster_count(int64_t rows);

// Throws specula::Error naming the table's rows when token_cluster_count(table.rows) is 0.
TokenClusters build_token_clusters(const WeightMatrix& table, ThreadPool& pool);

}  // namespace specula
