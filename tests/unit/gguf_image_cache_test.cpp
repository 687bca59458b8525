// The cache of converted GGUF images (model/gguf_image_cache.h): the first load writes the image
// and its key, later loads map it and get the very tensors a conversion in memory gives; a changed
// GGUF, a damaged key or image, and a cache directory that cannot be used all fall back to
// converting, never fail the load. A load that only describes the file (`inspect`) maps a current
// image and otherwise converts and writes nothing.
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "error_of.h"
#include "specula/io/checkpoint.h"
#include "specula/model/gguf_image_cache.h"
#include "specula/model/gguf_target.h"
#include "specula/synth/gguf_export.h"
#include "temp_dir.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::ScopedTempDir;

// Every tensor of `a` is in `b` with the same dtype, shape and bytes, and nothing else is.
void expect_same_tensors(const TensorStore& a, const TensorStore& b) {
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& name : a.names()) {
    const TensorView& x = a.get(name);
    const TensorView& y = b.get(name);
    ASSERT_EQ(x.dtype, y.dtype) << name;
    ASSERT_EQ(x.shape, y.shape) << name;
    ASSERT_EQ(x.nbytes, y.nbytes) << name;
    ASSERT_EQ(0, std::memcmp(x.data, y.data, x.nbytes)) << name;
  }
}

uint64_t inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

class GgufImageCache : public ::testing::Test {
 protected:
  // The e4b-like golden with its 4-bit modules as Q4_1 and the rest in Q8_0: affine tensors with
  // f16 and f32 scales, dense vectors, and a quantization block to record.
  // (The writer reads the golden's tensors while it writes: both live as long as the suite.)
  static void SetUpTestSuite() {
    golden_ = new TargetCheckpoint(load_target(std::string(SPECULA_TEST_DATA) + "/goldens/e4b-like-q4g64-mlx/model"));
    synth::GgufExportOptions options;
    options.matrices = synth::GgufMatrixType::Q8_0;
    options.affine4_as_q4_1 = true;
    writer_ = new GgufWriter(synth::target_gguf_writer(*golden_, options));
  }
  static void TearDownTestSuite() {
    delete writer_;
    delete golden_;
    writer_ = nullptr;
    golden_ = nullptr;
  }

  GgufLoadOptions cached() const { return {cache_.path().string(), 0}; }
  GgufImageEntry entry() const { return gguf_image_entry(cache_.path().string(), file_); }

  static TargetCheckpoint* golden_;
  static GgufWriter* writer_;
  ScopedTempDir dir_{"specula-gguf-image"};
  ScopedTempDir cache_{"specula-gguf-image-cache"};
  std::string file_ = dir_.file("model.gguf");
};
TargetCheckpoint* GgufImageCache::golden_ = nullptr;
GgufWriter* GgufImageCache::writer_ = nullptr;

TEST_F(GgufImageCache, TheFirstLoadWritesTheImageAndLaterLoadsMapItWithTheSameTensors) {
  writer_->write(file_);
  const TargetCheckpoint in_memory = load_gguf_target(file_);
  EXPECT_EQ(in_memory.gguf_image, GgufImageSource::Memory);

  const TargetCheckpoint written = load_gguf_target(file_, cached());
  EXPECT_EQ(written.gguf_image, GgufImageSource::CacheWritten);
  ASSERT_TRUE(fs::exists(entry().image));
  ASSERT_TRUE(fs::exists(entry().key_file));
  const uint64_t inode = inode_of(entry().image);  // the file the next load must not replace
  const auto written_time = fs::last_write_time(entry().image);

  const TargetCheckpoint hit = load_gguf_target(file_, cached());
  EXPECT_EQ(hit.gguf_image, GgufImageSource::CacheHit);
  EXPECT_EQ(fs::last_write_time(entry().image), written_time);
  EXPECT_EQ(inode_of(entry().image), inode);
  EXPECT_EQ(hit.dir, file_);
  EXPECT_EQ(hit.store.dir(), entry().dir);

  expect_same_tensors(in_memory.store, written.store);
  expect_same_tensors(in_memory.store, hit.store);
  ASSERT_TRUE(hit.config.quantization.present) << "the golden's 4-bit modules stay quantized";
  EXPECT_EQ(hit.config.quantization.defaults, in_memory.config.quantization.defaults);
  EXPECT_EQ(hit.config.quantization.overrides, in_memory.config.quantization.overrides);
  EXPECT_EQ(hit.config.text.hidden_size, in_memory.config.text.hidden_size);
}

TEST_F(GgufImageCache, AChangedFileIsConvertedAgain) {
  writer_->write(file_);
  EXPECT_EQ(load_gguf_target(file_, cached()).gguf_image, GgufImageSource::CacheWritten);
  // The same bytes rewritten: another mtime (and inode), so another identity.
  const GgufImageEntry before = entry();
  fs::remove(file_);
  ::usleep(10000);
  writer_->write(file_);
  ASSERT_NE(entry().identity, before.identity);
  EXPECT_EQ(load_gguf_target(file_, cached()).gguf_image, GgufImageSource::CacheWritten);
  EXPECT_EQ(load_gguf_target(file_, cached()).gguf_image, GgufImageSource::CacheHit);
}

TEST_F(GgufImageCache, ADamagedKeyOrImageIsConvertedAgain) {
  writer_->write(file_);
  const TargetCheckpoint reference = load_gguf_target(file_);
  ASSERT_EQ(load_gguf_target(file_, cached()).gguf_image, GgufImageSource::CacheWritten);

  std::ofstream(entry().key_file, std::ios::trunc) << "{not json";
  EXPECT_EQ(load_gguf_target(file_, cached()).gguf_image, GgufImageSource::CacheWritten);

  fs::resize_file(entry().image, fs::file_size(entry().image) - 64);  // truncated: another size than the key's
  EXPECT_EQ(load_gguf_target(file_, cached()).gguf_image, GgufImageSource::CacheWritten);

  {  // The same size, a header that is no longer JSON: the hit fails to open and is converted again.
    std::fstream f(entry().image, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.write("\x01\x02\x03\x04", 4);
  }
  const TargetCheckpoint again = load_gguf_target(file_, cached());
  EXPECT_EQ(again.gguf_image, GgufImageSource::CacheWritten);
  expect_same_tensors(reference.store, again.store);
  EXPECT_EQ(load_gguf_target(file_, cached()).gguf_image, GgufImageSource::CacheHit);
}

TEST_F(GgufImageCache, ACacheDirectoryThatCannotBeUsedFallsBackToMemory) {
  writer_->write(file_);
  const std::string blocker = dir_.file("not-a-directory");
  std::ofstream(blocker) << "a file where the cache directory should be";
  const TargetCheckpoint ck = load_gguf_target(file_, {blocker, 0});
  EXPECT_EQ(ck.gguf_image, GgufImageSource::Memory);
  EXPECT_EQ(ck.config.text.hidden_size, load_gguf_target(file_).config.text.hidden_size);
}

TEST_F(GgufImageCache, AFileThatDoesNotValidateNamesTheGgufAndLeavesNoImage) {
  GgufWriter w = *writer_;
  ASSERT_TRUE(w.remove_tensor("blk.1.ffn_up.weight"));
  w.write(file_);
  const std::string e = error_of([&] { load_gguf_target(file_, cached()); });
  EXPECT_NE(e.find(file_), std::string::npos) << e;
  EXPECT_EQ(e.find(cache_.path().string()), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(entry().dir));
}

TEST_F(GgufImageCache, ADescriptionWritesNothingAndMapsACurrentImage) {
  writer_->write(file_);
  GgufLoadOptions describe = cached();
  describe.convert = false;
  const TargetCheckpoint described = load_gguf_target(file_, describe);
  EXPECT_EQ(described.gguf_image, GgufImageSource::Described);
  EXPECT_TRUE(fs::is_empty(cache_.path()));
  const TargetCheckpoint converted = load_gguf_target(file_);
  ASSERT_EQ(described.store.names(), converted.store.names());
  for (const std::string& name : converted.store.names()) {
    const TensorView& x = described.store.get(name);
    const TensorView& y = converted.store.get(name);
    EXPECT_EQ(x.dtype, y.dtype) << name;
    EXPECT_EQ(x.shape, y.shape) << name;
    EXPECT_EQ(x.nbytes, y.nbytes) << name;
  }
  EXPECT_EQ(described.store.total_bytes(), converted.store.total_bytes());
  EXPECT_EQ(described.config.quantization.overrides, converted.config.quantization.overrides);

  ASSERT_EQ(load_gguf_target(file_, cached()).gguf_image, GgufImageSource::CacheWritten);
  const TargetCheckpoint hit = load_gguf_target(file_, describe);
  EXPECT_EQ(hit.gguf_image, GgufImageSource::CacheHit);
  EXPECT_EQ(hit.store.dir(), entry().dir);
}

TEST_F(GgufImageCache, SmallFilesAreNotCached) {
  writer_->write(file_);
  EXPECT_EQ(load_gguf_target(file_, {cache_.path().string()}).gguf_image, GgufImageSource::Memory);
  EXPECT_TRUE(fs::is_empty(cache_.path()));
}

TEST(GgufImageCacheDir, LivesBesideThePackedCacheAndIsOffWithIt) {
  EXPECT_EQ(gguf_image_cache_dir(""), "");
  EXPECT_EQ(gguf_image_cache_dir("/tmp/specula/packed"), "/tmp/specula/packed/gguf");
}

}  // namespace
}  // namespace specula
