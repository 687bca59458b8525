// The mismatched-drafter warning (speculative/acceptance_check.h): only after enough drafts, and
// only when none was accepted; over many generations, once.
#include <gtest/gtest.h>

#include <string>

#include "specula/speculative/acceptance_check.h"

namespace {

using specula::kNoAcceptanceWarnDrafts;
using specula::no_acceptance_warning;
using specula::NoAcceptanceWatch;

TEST(AcceptanceCheck, WarnsOnlyAfterEnoughDraftsWithNoneAccepted) {
  EXPECT_EQ(no_acceptance_warning(kNoAcceptanceWarnDrafts - 1, 0, "d"), "");
  EXPECT_EQ(no_acceptance_warning(kNoAcceptanceWarnDrafts * 10, 1, "d"), "");
  const std::string w = no_acceptance_warning(kNoAcceptanceWarnDrafts, 0, "/models/other-assistant");
  EXPECT_NE(w.find("none of the 32 drafted tokens"), std::string::npos) << w;
  EXPECT_NE(w.find("/models/other-assistant"), std::string::npos) << w;
}

TEST(AcceptanceCheck, WatchWarnsOnceWhenTheTotalOfManyGenerationsCallsForIt) {
  NoAcceptanceWatch watch;
  EXPECT_EQ(watch.add(kNoAcceptanceWarnDrafts - 1, 0, "d"), "");
  const std::string w = watch.add(1, 0, "/models/other-assistant");
  EXPECT_NE(w.find("none of the 32 drafted tokens"), std::string::npos) << w;
  EXPECT_NE(w.find("/models/other-assistant"), std::string::npos) << w;
  EXPECT_EQ(watch.add(kNoAcceptanceWarnDrafts, 0, "d"), "");
}

TEST(AcceptanceCheck, WatchStaysQuietOnceADraftWasAccepted) {
  NoAcceptanceWatch watch;
  EXPECT_EQ(watch.add(4, 1, "d"), "");
  EXPECT_EQ(watch.add(kNoAcceptanceWarnDrafts * 10, 0, "d"), "");
}

}  // namespace
