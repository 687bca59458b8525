// libFuzzer wrapper; the entry function lives in targets/gguf_checkpoint.cpp (shared with the regression test).
#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return specula::fuzz::fuzz_gguf_checkpoint(data, size);
}
