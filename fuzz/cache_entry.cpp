// libFuzzer wrapper; the entry function lives in targets/cache_entry.cpp (shared with the regression test).
#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return specula::fuzz::fuzz_cache_entry(data, size);
}
