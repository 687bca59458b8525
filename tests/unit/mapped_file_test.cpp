// MappedFile::release: pages dropped from the process read back unchanged; ranges outside the
// mapping are ignored. MappedFile::populate maps the pages of its range in, not the whole file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "page_residency.h"
#include "specula/util/mapped_file.h"

namespace specula {
namespace {

TEST(MappedFile, ReleasedPagesReadBackUnchanged) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "specula_mapped_file_test.bin";
  std::vector<char> bytes(3 << 20);
  std::mt19937 rng(3);
  for (char& c : bytes) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  {
    const MappedFile file = MappedFile::open(path.string());
    ASSERT_EQ(file.size(), bytes.size());
    EXPECT_TRUE(file.contains(file.data() + 10, 100));
    EXPECT_FALSE(file.contains(file.data() + 10, bytes.size()));
    EXPECT_FALSE(file.contains(bytes.data(), 1));
    file.release(file.data() + 123, bytes.size() - 1000);
    file.release(bytes.data(), bytes.size());  // not in the mapping: nothing happens
    EXPECT_EQ(0, std::memcmp(file.data(), bytes.data(), bytes.size()));
  }
  std::filesystem::remove(path);
}

// A kernel may map a whole large folio of the page cache (up to 2 MiB) when one of its pages is
// faulted in, so "not mapped" is checked past the first 2 MiB, which hold the populated range.
TEST(MappedFile, PopulateMapsThePagesOfItsRangeIn) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "specula_mapped_file_populate.bin";
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t beyond_folio = 2 * (size_t{2} << 20) / page;  // the page 4 MiB in
  std::vector<char> bytes(2 * beyond_folio * page);
  std::mt19937 rng(4);
  for (char& c : bytes) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  {
    const MappedFile file = MappedFile::open(path.string());
    const std::byte* d = file.data();
    EXPECT_FALSE(page_present(d + 100 * page));    // nothing touched yet
    file.populate(d + 64 * page + 10, 64 * page);  // pages 64..128 (the range ends inside 128)
    EXPECT_TRUE(page_present(d + 64 * page));
    EXPECT_TRUE(page_present(d + 100 * page));
    EXPECT_TRUE(page_present(d + 128 * page));
    EXPECT_FALSE(page_present(d + beyond_folio * page));
    file.populate(bytes.data(), bytes.size());  // not in the mapping: nothing happens
    file.release(d + 64 * page, 65 * page);
    EXPECT_FALSE(page_present(d + 100 * page));
    EXPECT_EQ(0, std::memcmp(d, bytes.data(), bytes.size()));
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace specula
