#include "specula/model/token_clusters.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "specula/kernels/matmul.h"
#include "specula/kernels/quant.h"
#include "specula/util/error.h"

namespace specula {

namespace {

constexpr int64_t kMaxClusters = 2048;
constexpr int64_t kMinClusterSize = 128;
constexpr int64_t kChunkRows = 512;  // rows per partial sum
constexpr int kPowerIterations = 3;
constexpr int64_t kProjectedWidth = 128;

// The rows of one part: ids[begin, begin + size).
struct Part {
  int64_t begin = 0;
  int64_t size = 0;
};

// A part's rows in chunks of kChunkRows, every part's in order: the unit of parallel work, and
// the fixed order partial sums are added in.
struct Chunk {
  int64_t part = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

std::vector<Chunk> chunks_of(const std::vector<Part>& parts) {
  std::vector<Chunk> chunks;
  for (size_t p = 0; p < parts.size(); ++p) {
    for (int64_t b = parts[p].begin; b < parts[p].begin + parts[p].size; b += kChunkRows)
      chunks.push_back({static_cast<int64_t>(p), b, std::min(b + kChunkRows, parts[p].begin + parts[p].size)});
  }
  return chunks;
}

// In 16 lanes, so that the compiler vectorizes it without reordering a sum.
float dot(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] += a[i + k] * b[i + k];
  float s = 0.0f;
  for (; i < n; ++i) s += a[i] * b[i];
  for (float l : lanes) s += l;
  return s;
}

class Bisection {
 public:
  Bisection(const WeightMatrix& table, ThreadPool& pool)
      : table_(table), width_(std::min(table.cols, kProjectedWidth)), pool_(pool) {
    rows_.resize(static_cast<size_t>(table.rows * width_));
    if (width_ == table.cols) {
      pool.parallel_for(table.rows, 256, [&](int, int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) dequantize_row(table, r, row(r));
      });
    } else {
      project(table);
    }
    ids_.resize(static_cast<size_t>(table.rows));
    source_.resize(ids_.size());
    for (int64_t r = 0; r < table.rows; ++r) ids_[static_cast<size_t>(r)] = static_cast<int32_t>(r);
  }

  TokenClusters run(int64_t clusters) {
    const auto rows = static_cast<int64_t>(ids_.size());
    std::vector<Part> parts = {{0, rows}};
    while (static_cast<int64_t>(parts.size()) < clusters) parts = split(parts);
    TokenClusters out;
    out.clusters = clusters;
    out.cluster_size = rows / clusters;
    out.top_clusters = std::max<int64_t>(1, clusters / 64);
    out.centroids = table_means(parts);
    for (const Part& p : parts) std::sort(ids_.begin() + p.begin, ids_.begin() + p.begin + p.size);
    out.token_ordering = std::move(ids_);
    return out;
  }

 private:
  float* row(int64_t position) { return rows_.data() + position * width_; }

  // Wide tables are split in a random projection of kProjectedWidth inputs: one matmul over the
  // stored table, then every pass reads 128 floats a row instead of thousands. The directions are
  // random signs, the same for every table of that width.
  void project(const WeightMatrix& table) {
    std::vector<float> directions(static_cast<size_t>(width_ * table.cols));
    uint64_t state = 0x2545f4914f6cdd1dULL;
    const float unit = 1.0f / std::sqrt(static_cast<float>(table.cols));
    for (float& d : directions) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      d = (state >> 63) != 0 ? unit : -unit;
    }
    std::vector<float> by_direction(static_cast<size_t>(width_ * table.rows));
    matmul(directions.data(), width_, table, by_direction.data(), pool_, Precision::Fast);
    for (int64_t d = 0; d < width_; ++d)
      for (int64_t r = 0; r < table.rows; ++r)
        rows_[static_cast<size_t>(r * width_ + d)] = by_direction[static_cast<size_t>(d * table.rows + r)];
  }

  // Each part's mean over the table's own rows, summed in row order by one task per part.
  std::vector<float> table_means(const std::vector<Part>& parts) {
    const int64_t cols = table_.cols;
    std::vector<float> m(parts.size() * static_cast<size_t>(cols), 0.0f);
    pool_.parallel_for(static_cast<int64_t>(parts.size()), 1, [&](int, int64_t begin, int64_t end) {
      std::vector<float> r(static_cast<size_t>(cols));
      for (int64_t p = begin; p < end; ++p) {
        float* acc = m.data() + p * cols;
        const Part& part = parts[static_cast<size_t>(p)];
        for (int64_t i = part.begin; i < part.begin + part.size; ++i) {
          dequantize_row(table_, ids_[static_cast<size_t>(i)], r.data());
          for (int64_t j = 0; j < cols; ++j) acc[j] += r[static_cast<size_t>(j)];
        }
        const float inv = 1.0f / static_cast<float>(part.size);
        for (int64_t j = 0; j < cols; ++j) acc[j] *= inv;
      }
    });
    return m;
  }

  // Per part, the sum over its rows of add(part, row, accumulator), each chunk summed apart and
  // the chunks added in order.
  std::vector<float> sums(const std::vector<Part>& parts,
                          const std::function<void(int64_t part, const float* row, float* acc)>& add) {
    const std::vector<Chunk> chunks = chunks_of(parts);
    std::vector<float> partial(chunks.size() * static_cast<size_t>(width_), 0.0f);
    pool_.parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int, int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        const Chunk& ch = chunks[static_cast<size_t>(c)];
        float* acc = partial.data() + c * width_;
        for (int64_t i = ch.begin; i < ch.end; ++i) add(ch.part, row(i), acc);
      }
    });
    std::vector<float> total(parts.size() * static_cast<size_t>(width_), 0.0f);
    for (size_t c = 0; c < chunks.size(); ++c) {
      float* t = total.data() + chunks[c].part * width_;
      const float* p = partial.data() + static_cast<int64_t>(c) * width_;
      for (int64_t j = 0; j < width_; ++j) t[j] += p[j];
    }
    return total;
  }

  std::vector<float> means(const std::vector<Part>& parts) {
    std::vector<float> m = sums(parts, [&](int64_t, const float* r, float* acc) {
      for (int64_t j = 0; j < width_; ++j) acc[j] += r[j];
    });
    for (size_t p = 0; p < parts.size(); ++p) {
      const float inv = 1.0f / static_cast<float>(parts[p].size);
      for (int64_t j = 0; j < width_; ++j) m[p * static_cast<size_t>(width_) + static_cast<size_t>(j)] *= inv;
    }
    return m;
  }

  // Each part's principal direction: power iterations on its rows' covariance from a fixed start.
  std::vector<float> directions(const std::vector<Part>& parts, const std::vector<float>& mean) {
    std::vector<float> v(parts.size() * static_cast<size_t>(width_));
    uint64_t state = 0x9e3779b97f4a7c15ULL;
    for (float& x : v) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      x = static_cast<float>(static_cast<int64_t>(state >> 40) - (int64_t{1} << 23)) / static_cast<float>(1 << 23);
    }
    std::vector<float> mean_along(parts.size());
    for (int it = 0; it < kPowerIterations; ++it) {
      for (size_t p = 0; p < parts.size(); ++p)
        mean_along[p] =
            dot(mean.data() + p * static_cast<size_t>(width_), v.data() + p * static_cast<size_t>(width_), width_);
      v = sums(parts, [&](int64_t p, const float* r, float* acc) {
        const float* mu = mean.data() + p * width_;
        const float along = dot(r, v.data() + p * width_, width_) - mean_along[static_cast<size_t>(p)];
        for (int64_t j = 0; j < width_; ++j) acc[j] += along * (r[j] - mu[j]);
      });
      for (size_t p = 0; p < parts.size(); ++p) {
        float* d = v.data() + p * static_cast<size_t>(width_);
        const float norm = std::sqrt(dot(d, d, width_));
        if (norm > 0.0f)
          for (int64_t j = 0; j < width_; ++j) d[j] /= norm;
      }
    }
    return v;
  }

  // Every part in two halves at the median of its rows' projections on its direction (ties by id).
  std::vector<Part> split(const std::vector<Part>& parts) {
    const std::vector<float> mean = means(parts);
    const std::vector<float> v = directions(parts, mean);
    std::vector<float>& along = along_;
    along.resize(ids_.size());
    const std::vector<Chunk> chunks = chunks_of(parts);
    pool_.parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int, int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        const Chunk& ch = chunks[static_cast<size_t>(c)];
        for (int64_t i = ch.begin; i < ch.end; ++i) {
          const float a = dot(row(i), v.data() + ch.part * width_, width_);
          along[static_cast<size_t>(i)] = std::isnan(a) ? 0.0f : a;  // a NaN would break the ordering
        }
      }
    });
    std::vector<Part> halves(parts.size() * 2);
    std::vector<int64_t>& source = source_;
    pool_.parallel_for(static_cast<int64_t>(parts.size()), 1, [&](int, int64_t begin, int64_t end) {
      struct Keyed {
        float along;
        int32_t id;
        int64_t position;
        bool operator<(const Keyed& o) const { return along != o.along ? along < o.along : id < o.id; }
      };
      std::vector<Keyed> keyed;
      for (int64_t p = begin; p < end; ++p) {
        const Part& part = parts[static_cast<size_t>(p)];
        keyed.resize(static_cast<size_t>(part.size));
        for (int64_t i = 0; i < part.size; ++i)
          keyed[static_cast<size_t>(i)] = {along[static_cast<size_t>(part.begin + i)],
                                           ids_[static_cast<size_t>(part.begin + i)], part.begin + i};
        const int64_t half = part.size / 2;
        std::nth_element(keyed.begin(), keyed.begin() + half, keyed.end());
        for (int64_t i = 0; i < part.size; ++i) {
          ids_[static_cast<size_t>(part.begin + i)] = keyed[static_cast<size_t>(i)].id;
          source[static_cast<size_t>(part.begin + i)] = keyed[static_cast<size_t>(i)].position;
        }
        halves[static_cast<size_t>(2 * p)] = {part.begin, half};
        halves[static_cast<size_t>(2 * p + 1)] = {part.begin + half, part.size - half};
      }
    });
    // The rows move with their ids, so that every pass reads a part's rows in sequence.
    std::vector<float>& moved = moved_;
    moved.resize(rows_.size());
    pool_.parallel_for(static_cast<int64_t>(ids_.size()), 1024, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        std::copy_n(row(source[static_cast<size_t>(i)]), width_, moved.data() + i * width_);
    });
    rows_.swap(moved);
    return halves;
  }

  const WeightMatrix& table_;
  int64_t width_;
  ThreadPool& pool_;
  std::vector<float> rows_;   // [rows * width]: row i is token ids_[i]'s, in f32 or projected
  std::vector<int32_t> ids_;  // token ids, each part's contiguous
  // Reused from split to split (a fresh buffer costs a page fault per 4 KB, each level).
  std::vector<float> moved_;
  std::vector<float> along_;
  std::vector<int64_t> source_;  // where each position's row was before the split
};

}  // namespace

int64_t token_cluster_count(int64_t rows) {
  int64_t best = 0;
  for (int64_t c = 2; c <= kMaxClusters; c *= 2) {
    if (rows % c == 0 && rows / c >= kMinClusterSize) best = c;
  }
  return best;
}

TokenClusters build_token_clusters(const WeightMatrix& table, ThreadPool& pool) {
  const int64_t clusters = token_cluster_count(table.rows);
  if (clusters == 0)
    fail("a candidate head needs a token table of a multiple of 256 rows (clusters of >= {} tokens); it has {}",
         kMinClusterSize, table.rows);
  return Bisection(table, pool).run(clusters);
}

}  // namespace specula
