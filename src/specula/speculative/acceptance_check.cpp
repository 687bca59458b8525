#include "specula/speculative/acceptance_check.h"

#include <fmt/format.h>

namespace specula {

std::string no_acceptance_warning(int64_t drafted, int64_t accepted, const std::string& draft_source) {
  if (drafted < kNoAcceptanceWarnDrafts || accepted > 0) return {};
  return fmt::format(
      "warning: none of the {} drafted tokens was accepted: is {} the assistant drafter of this model? "
      "A drafter made for another model of the same width loads but never agrees with it; without "
      "--draft, decoding is faster",
      drafted, draft_source);
}

std::string NoAcceptanceWatch::add(int64_t drafted, int64_t accepted, const std::string& draft_source) {
  std::lock_guard lock(mutex_);
  drafted_ += drafted;
  accepted_ += accepted;
  if (warned_) return {};
  std::string warning = no_acceptance_warning(drafted_, accepted_, draft_source);
  warned_ = !warning.empty();
  return warning;
}

}  // namespace specula
