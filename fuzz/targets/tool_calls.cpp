// Fuzz entry: tool-call extraction from model output, and the argument parser on its own.
#include <string>
#include <string_view>

#include "fuzz_entries.h"
#include "specula/text/tool_calls.h"
#include "specula/util/error.h"

namespace specula::fuzz {

int fuzz_tool_calls(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const text::ToolCallExtraction out = text::extract_tool_calls(text);
  for (const text::ToolCall& call : out.calls) {
    if (!call.arguments.is_object()) std::abort();  // the documented contract
    // The server serializes the arguments; invalid UTF-8 from the text is replaced, never thrown.
    (void)call.arguments.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  try {
    const nlohmann::json args = text::parse_tool_call_arguments(text);
    if (!args.is_object()) std::abort();
  } catch (const specula::Error&) {
  }
  return 0;
}

}  // namespace specula::fuzz
