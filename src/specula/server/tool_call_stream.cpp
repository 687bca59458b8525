#include "specula/server/tool_call_stream.h"

#include "specula/text/tokenizer.h"

namespace specula::server {

ToolCallStream::ToolCallStream(const text::Tokenizer& tokenizer, int32_t begin_id, int32_t end_id,
                               std::vector<std::string> stops)
    : tokenizer_(tokenizer), begin_id_(begin_id), end_id_(end_id), content_(tokenizer), stops_(std::move(stops)) {}

std::string ToolCallStream::emit(const std::string& text) {
  if (stops_.stopped() || text.empty()) return {};
  return stops_.push(text).text;
}

std::string ToolCallStream::close_block(bool terminated) {
  const std::string raw = tokenizer_.decode(block_, /*skip_special_tokens=*/false);
  block_.clear();
  in_block_ = false;
  if (terminated) {
    text::ToolCallExtraction found = text::extract_tool_calls(raw);
    if (found.errors.empty() && !found.calls.empty()) {
      for (auto& call : found.calls) calls_.push_back(std::move(call));
      return emit(found.content);
    }
  }
  return emit(raw);
}

std::string ToolCallStream::push(const std::vector<int32_t>& tokens) {
  std::string out;
  for (const int32_t id : tokens) {
    if (stops_.stopped()) break;
    if (in_block_) {
      block_.push_back(id);
      if (id == end_id_) out += close_block(true);
    } else if (id == begin_id_) {
      // Content decoded so far is final before a block starts.
      out += emit(content_.finish());
      content_.reset();
      in_block_ = true;
      block_.assign(1, id);
    } else {
      out += emit(content_.push(id));
    }
  }
  return out;
}

std::string ToolCallStream::finish() {
  std::string out;
  if (in_block_) out += close_block(false);
  out += emit(content_.finish());
  if (!stops_.stopped()) out += stops_.finish();
  return out;
}

}  // namespace specula::server
