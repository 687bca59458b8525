// The candidate head's clusters built at load (model/token_clusters.h): their geometry, that every
// token lands in exactly one cluster, that the centroids are the clusters' means, that grouped rows
// come out as their groups, and that the thread count changes no byte.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "error_of.h"
#include "specula/model/token_clusters.h"

namespace specula {
namespace {

WeightMatrix f32_matrix(const std::vector<float>& values, int64_t rows, int64_t cols) {
  WeightMatrix w;
  w.format = WeightFormat::F32;
  w.rows = rows;
  w.cols = cols;
  w.data = values.data();
  return w;
}

// Rows scattered over the table's ids in groups of `size`, each row its group's center plus noise
// of 0.1 per input. Centers: random, or (hypercube, up to 32 groups) the corners of a box with
// sides 16, 8, 4, ...
// along the first inputs, so that each halving has one clear principal direction.
struct GroupedTable {
  std::vector<float> values;
  std::vector<int> group_of;
};

GroupedTable grouped_table(int groups, int size, int cols, uint32_t seed, bool hypercube = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centers(static_cast<size_t>(groups * cols));
  for (int g = 0; g < groups; ++g) {
    for (int j = 0; j < cols; ++j) {
      float& c = centers[static_cast<size_t>(g * cols + j)];
      if (!hypercube)
        c = normal(rng);
      else
        c = j < 5 && (1 << j) < groups ? ((g >> j) & 1 ? 1.0f : -1.0f) * static_cast<float>(16 >> j) : 0.0f;
    }
  }
  GroupedTable t;
  t.group_of.resize(static_cast<size_t>(groups * size));
  for (size_t i = 0; i < t.group_of.size(); ++i) t.group_of[i] = static_cast<int>(i % static_cast<size_t>(groups));
  std::shuffle(t.group_of.begin(), t.group_of.end(), rng);
  t.values.resize(t.group_of.size() * static_cast<size_t>(cols));
  for (size_t r = 0; r < t.group_of.size(); ++r)
    for (int j = 0; j < cols; ++j)
      t.values[r * static_cast<size_t>(cols) + static_cast<size_t>(j)] =
          centers[static_cast<size_t>(t.group_of[r] * cols + j)] + 0.1f * normal(rng);
  return t;
}

// Every cluster holds the rows of one group, and no group is split over two clusters.
void expect_clusters_are_the_groups(const TokenClusters& c, const GroupedTable& t) {
  std::vector<bool> seen(static_cast<size_t>(c.clusters), false);
  for (int64_t k = 0; k < c.clusters; ++k) {
    const int group = t.group_of[static_cast<size_t>(c.token_ordering[static_cast<size_t>(k * c.cluster_size)])];
    EXPECT_FALSE(seen[static_cast<size_t>(group)]) << "group " << group << " split over two clusters";
    seen[static_cast<size_t>(group)] = true;
    for (int64_t i = 0; i < c.cluster_size; ++i)
      EXPECT_EQ(t.group_of[static_cast<size_t>(c.token_ordering[static_cast<size_t>(k * c.cluster_size + i)])], group)
          << "cluster " << k << " row " << i;
  }
}

TEST(TokenClusters, ClusterCountIsThePowerOfTwoThatKeeps128TokensEach) {
  EXPECT_EQ(token_cluster_count(262144), 2048);
  EXPECT_EQ(token_cluster_count(1 << 20), 2048);
  EXPECT_EQ(token_cluster_count(512), 4);
  EXPECT_EQ(token_cluster_count(384), 2);
  EXPECT_EQ(token_cluster_count(256), 2);
  EXPECT_EQ(token_cluster_count(255), 0);
  EXPECT_EQ(token_cluster_count(128), 0);
  EXPECT_EQ(token_cluster_count(262145), 0);
}

TEST(TokenClusters, EveryTokenInOneClusterAndCentroidsAreTheMeans) {
  const int cols = 32;
  const GroupedTable t = grouped_table(5, 205, cols, 7);  // 1025 rows: not a power of two
  std::vector<float> values(t.values.begin(), t.values.begin() + 1024 * cols);
  ThreadPool pool(2);
  const TokenClusters c = build_token_clusters(f32_matrix(values, 1024, cols), pool);
  ASSERT_EQ(c.clusters, 8);
  ASSERT_EQ(c.cluster_size, 128);
  EXPECT_EQ(c.top_clusters, 1);
  ASSERT_EQ(c.token_ordering.size(), 1024u);
  ASSERT_EQ(c.centroids.size(), 8u * cols);
  std::vector<int32_t> sorted = c.token_ordering;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> all(1024);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  for (int64_t k = 0; k < c.clusters; ++k) {
    const auto begin = c.token_ordering.begin() + k * c.cluster_size;
    EXPECT_TRUE(std::is_sorted(begin, begin + c.cluster_size)) << "cluster " << k;
    for (int j = 0; j < cols; ++j) {
      double mean = 0.0;
      for (int64_t i = 0; i < c.cluster_size; ++i) mean += values[static_cast<size_t>(*(begin + i) * cols + j)];
      mean /= static_cast<double>(c.cluster_size);
      EXPECT_NEAR(c.centroids[static_cast<size_t>(k * cols + j)], mean, 1e-5) << "cluster " << k << " input " << j;
    }
  }
}

TEST(TokenClusters, GroupedRowsComeOutAsTheirGroups) {
  const int cols = 64;
  const GroupedTable t = grouped_table(8, 128, cols, 11, true);
  ThreadPool pool(2);
  const TokenClusters c = build_token_clusters(f32_matrix(t.values, 1024, cols), pool);
  ASSERT_EQ(c.clusters, 8);
  expect_clusters_are_the_groups(c, t);
}

// Tables wider than 128 inputs are split in a random projection of 128: the groups still come out
// whole, and the centroids are means over the table's own inputs.
TEST(TokenClusters, WideTablesAreSplitInAProjection) {
  const int cols = 320;
  const GroupedTable t = grouped_table(4, 128, cols, 5, true);
  ThreadPool pool(2);
  const TokenClusters c = build_token_clusters(f32_matrix(t.values, 512, cols), pool);
  ASSERT_EQ(c.clusters, 4);
  ASSERT_EQ(c.centroids.size(), 4u * cols);
  expect_clusters_are_the_groups(c, t);
  for (int64_t k = 0; k < c.clusters; ++k) {
    for (int j : {0, 1, cols - 1}) {
      double mean = 0.0;
      for (int64_t i = 0; i < 128; ++i)
        mean += t.values[static_cast<size_t>(c.token_ordering[static_cast<size_t>(k * 128 + i)] * cols + j)];
      EXPECT_NEAR(c.centroids[static_cast<size_t>(k * cols + j)], mean / 128.0, 1e-5) << "cluster " << k;
    }
  }
}

TEST(TokenClusters, ThreadCountChangesNoByte) {
  for (const int cols : {48, 160}) {                         // split in the table itself, and in a projection
    const GroupedTable t = grouped_table(3, 1024, cols, 3);  // 3072 rows: several chunks per part
    const WeightMatrix w = f32_matrix(t.values, 3072, cols);
    ThreadPool one(1), three(3);
    const TokenClusters a = build_token_clusters(w, one);
    const TokenClusters b = build_token_clusters(w, three);
    EXPECT_EQ(a.token_ordering, b.token_ordering) << cols << " inputs";
    ASSERT_EQ(a.centroids.size(), b.centroids.size());
    EXPECT_EQ(std::memcmp(a.centroids.data(), b.centroids.data(), a.centroids.size() * sizeof(float)), 0)
        << cols << " inputs";
  }
}

TEST(TokenClusters, NaNRowsAndEqualRowsStillSplitEvenly) {
  const int cols = 16;
  std::vector<float> values(512 * cols, 1.0f);
  for (int j = 0; j < cols; ++j) values[static_cast<size_t>(7 * cols + j)] = std::nanf("");
  ThreadPool pool(2);
  const TokenClusters c = build_token_clusters(f32_matrix(values, 512, cols), pool);
  std::vector<int32_t> sorted = c.token_ordering;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 512; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
}

TEST(TokenClusters, ATableWithoutAnEvenSplitIsRefusedNamingItsRows) {
  std::vector<float> values(255 * 8, 0.5f);
  ThreadPool pool(1);
  const std::string e = test::error_of([&] { build_token_clusters(f32_matrix(values, 255, 8), pool); });
  EXPECT_NE(e.find("multiple of 256 rows"), std::string::npos) << e;
  EXPECT_NE(e.find("it has 255"), std::string::npos) << e;
}

}  // namespace
}  // namespace specula
