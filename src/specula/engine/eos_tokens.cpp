#include "specula/engine/eos_tokens.h"

#include <algorithm>
#include <string>

#include "specula/io/checkpoint.h"
#include "specula/model/target_model.h"
#include "specula/text/chat_template.h"
#include "specula/text/tokenizer.h"

namespace specula {

namespace {

// End-of-turn markers of the Gemma chat templates, newest first.
constexpr const char* kEndOfTurnMarkers[] = {"<turn|>", "<end_of_turn>"};

}  // namespace

std::vector<int32_t> tokenizer_eos_ids(const text::Tokenizer& tokenizer, const nlohmann::ordered_json& special_tokens,
                                       const ChatTemplate* chat_template) {
  std::vector<int32_t> ids;
  if (special_tokens.is_object()) {
    const auto eos = special_tokens.find("eos_token");
    if (eos != special_tokens.end() && eos->is_string()) {
      if (auto id = tokenizer.token_to_id(eos->get<std::string>())) ids.push_back(*id);
    }
  }
  if (chat_template) {
    for (const char* marker : kEndOfTurnMarkers) {
      if (chat_template->source().find(marker) == std::string::npos) continue;
      if (auto id = tokenizer.token_to_id(marker)) {
        ids.push_back(*id);
        break;
      }
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::unique_ptr<TargetModel> load_target_with_eos(const std::string& path, const TargetOptions& options,
                                                  const std::vector<int32_t>& tokenizer_ids) {
  auto checkpoint = std::make_unique<TargetCheckpoint>(TargetModel::load_checkpoint(path, options));
  std::vector<int>& ids = checkpoint->config.eos_token_ids;
  for (int32_t id : tokenizer_ids)
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return std::make_unique<TargetModel>(std::move(checkpoint), options);
}

}  // namespace specula
