// HugePageBuffer: memory that starts on a huge-page boundary, is writable over its whole size,
// moves without copying, and names what it was for when the memory is not there.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "specula/util/alignment.h"
#include "specula/util/error.h"
#include "specula/util/huge_page_buffer.h"

namespace specula {
namespace {

TEST(HugePageBuffer, StartsOnAHugePageAndHoldsItsSize) {
  for (const size_t bytes :
       {size_t{1}, size_t{4096}, size_t{kHugePage}, size_t{kHugePage} + 1, 3 * size_t{kHugePage}}) {
    SCOPED_TRACE(bytes);
    const HugePageBuffer b(bytes, "a test buffer");
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kHugePage, 0u);
    EXPECT_EQ(b.size(), bytes);
    std::memset(b.data(), 0x5a, bytes);  // every byte is writable
    EXPECT_EQ(b.data()[bytes - 1], 0x5a);
  }
}

TEST(HugePageBuffer, ZeroBytesIsEmpty) {
  const HugePageBuffer b(0, "nothing");
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
}

TEST(HugePageBuffer, MovesTheMemory) {
  HugePageBuffer a(100, "a");
  a.data()[99] = 7;
  uint8_t* const p = a.data();
  HugePageBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.size(), 100u);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  HugePageBuffer c(10, "c");
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.data()[99], 7);
  EXPECT_EQ(b.size(), 0u);  // NOLINT(bugprone-use-after-move)
}

TEST(HugePageBuffer, MemoryThatIsNotThereIsAnErrorNamingItsUse) {
  try {
    const HugePageBuffer b(size_t{1} << 62, "the test's impossible buffer");
    FAIL() << "a 4 EiB mapping succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the test's impossible buffer"), std::string::npos) << e.what();
  }
  EXPECT_THROW(HugePageBuffer(SIZE_MAX - 100, "a size that would wrap"), Error);
}

}  // namespace
}  // namespace specula
