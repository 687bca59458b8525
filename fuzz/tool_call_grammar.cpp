// libFuzzer wrapper; the entry function lives in targets/tool_call_grammar.cpp (shared with the regression test).
#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return specula::fuzz::fuzz_tool_call_grammar(data, size);
}
