// The mismatched-drafter warning (speculative/acceptance_check.h): only after enough drafts, and
// only when none was accepted.
#include <gtest/gtest.h>

#include <string>

#include "specula/speculative/acceptance_check.h"

namespace {

using specula::kNoAcceptanceWarnDrafts;
using specula::no_acceptance_warning;

TEST(AcceptanceCheck, WarnsOnlyAfterEnoughDraftsWithNoneAccepted) {
  EXPECT_EQ(no_acceptance_warning(kNoAcceptanceWarnDrafts - 1, 0, "d"), "");
  EXPECT_EQ(no_acceptance_warning(kNoAcceptanceWarnDrafts * 10, 1, "d"), "");
  const std::string w = no_acceptance_warning(kNoAcceptanceWarnDrafts, 0, "/models/other-assistant");
  EXPECT_NE(w.find("none of the 32 drafted tokens"), std::string::npos) << w;
  EXPECT_NE(w.find("/models/other-assistant"), std::string::npos) << w;
}

}  // namespace
