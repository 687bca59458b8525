// The bytes `specula bench --contexts` holds a decode step to: every attention layer's K and V
// reads, the KV-sharing layers' included, on the e4b-like golden config (8 layers: sliding
// 0-2, 4-6 with 2 KV heads of 32, full 3 and 7 with 2 KV heads of 64, window 8; layers 4-7 read
// the caches of 2 and 3).
#include <gtest/gtest.h>

#include <string>

#include "specula/bench/long_context_bench.h"
#include "specula/io/config.h"
#include "specula/util/error.h"

namespace specula {
namespace {

TargetConfig e4b_like_config() {
  const std::string path = std::string(SPECULA_TEST_DATA) + "/goldens/e4b-like-q4g64-mlx/model/config.json";
  return parse_target_config(read_json_file(path), path);
}

TEST(LongContextBench, KvReadsCountEverySharingLayerAndTheSlidingWindow) {
  const TargetConfig c = e4b_like_config();
  ASSERT_EQ(c.layers.size(), 8u);
  ASSERT_EQ(c.first_shared_layer, 4);
  // Per position, f32: full layers 2 x (K, V) x 2 heads x 64 x 4 B = 2048 B; sliding layers
  // 6 x 2 x 2 x 32 x 4 B = 3072 B, for at most 8 positions.
  EXPECT_EQ(bench::kv_read_bytes_per_step(c, KvType::F32, 0), 0u);
  EXPECT_EQ(bench::kv_read_bytes_per_step(c, KvType::F32, 5), 5u * (2048 + 3072));
  EXPECT_EQ(bench::kv_read_bytes_per_step(c, KvType::F32, 8), 8u * (2048 + 3072));
  EXPECT_EQ(bench::kv_read_bytes_per_step(c, KvType::F32, 100), 100u * 2048 + 8u * 3072);
  EXPECT_EQ(bench::kv_read_bytes_per_step(c, KvType::Bf16, 100), (100u * 2048 + 8u * 3072) / 2);
  // q8: per head row of 64 (32) elements, 64 + 4 (32 + 2) bytes.
  EXPECT_EQ(bench::kv_read_bytes_per_step(c, KvType::Q8, 100), 100u * 2 * 2 * 2 * 68 + 8u * 6 * 2 * 2 * 34);
}

TEST(LongContextBench, OptionsOutOfRangeAreRefused) {
  EXPECT_NO_THROW(bench::LongContextOptions{}.validate());
  EXPECT_NO_THROW(bench::LongContextOptions::quick().validate());
  bench::LongContextOptions o;
  o.contexts = {};
  EXPECT_THROW(o.validate(), Error);
  o = bench::LongContextOptions{};
  o.repeats = 0;
  EXPECT_THROW(o.validate(), Error);
  o = bench::LongContextOptions{};
  o.bandwidth_bytes = 4096;
  EXPECT_THROW(o.validate(), Error);
}

}  // namespace
}  // namespace specula
