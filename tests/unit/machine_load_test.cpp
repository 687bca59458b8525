// The machine-load figures of benchmark reports: /proc/stat and /proc/<pid>/stat parsed as the
// kernel writes them, malformed text refused, and the fractions between two samples.
#include <gtest/gtest.h>

#include "specula/util/machine_load.h"

namespace specula {
namespace {

TEST(MachineLoad, ParsesTheAggregateCpuLine) {
  const char* text =
      "cpu  100 5 50 800 20 3 2 10 7 0\n"
      "cpu0 50 2 25 400 10 1 1 5 0 0\n"
      "intr 12345\n";
  const std::optional<CpuTicks> t = parse_proc_stat(text);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->total, 100u + 5 + 50 + 800 + 20 + 3 + 2 + 10);  // guest (7) is inside user
  EXPECT_EQ(t->busy, 100u + 5 + 50 + 3 + 2);
  EXPECT_EQ(t->steal, 10u);
}

TEST(MachineLoad, RefusesCpuLinesItCannotRead) {
  for (const char* text :
       {"", "intr 1 2 3\n", "cpu  1 2 3 4 5 6 7\n", "cpu  1 2 x 4 5 6 7 8\n", "cpu0 1 2 3 4 5 6 7 8\n",
        "cpu  1 2 3 4 5 6 7 -8\n", "cpu  99999999999999999999999 2 3 4 5 6 7 8\n"})
    EXPECT_FALSE(parse_proc_stat(text).has_value()) << text;
}

TEST(MachineLoad, ProcessTicksSkipANameWithSpacesAndParentheses) {
  // Fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
  // utime stime cutime cstime ...
  const char* line = "4242 (my (odd) name) R 1 2 3 0 -1 6 7 8 9 10 1000 200 30 4 20 0 1 0\n";
  const std::optional<uint64_t> ticks = parse_process_ticks(line);
  ASSERT_TRUE(ticks.has_value());
  EXPECT_EQ(*ticks, 1234u);
  for (const char* bad :
       {"", "4242 no parentheses R 1 2 3", "4242 (name) R 1 2 3 4 5 6 7 8 9 10 1000", "4242 (name)",
        "4242 (name) R 1 2 3 4 5 6 7 8 9 10 x 200 30 4", "4242 (name) R 1 2 3 4 5 6 7 8 9 10 -1 200 30 4"})
    EXPECT_FALSE(parse_process_ticks(bad).has_value()) << bad;
}

TEST(MachineLoad, FractionsOfAllCpusTime) {
  const CpuTicks before{1000, 300, 10};
  const CpuTicks after{2000, 1100, 110};  // 1000 ticks: 800 busy (600 ours), 100 stolen
  const MachineLoad load = machine_load_between(before, 50, after, 650);
  EXPECT_DOUBLE_EQ(load.other_processes, 0.2);
  EXPECT_DOUBLE_EQ(load.steal, 0.1);
  EXPECT_TRUE(load.busy());
  const MachineLoad quiet = machine_load_between(before, 50, CpuTicks{2000, 1000, 20}, 700);
  EXPECT_DOUBLE_EQ(quiet.other_processes, 0.05);
  EXPECT_FALSE(quiet.busy());
  EXPECT_EQ(machine_load_text(quiet).find("warning"), std::string::npos);
  EXPECT_NE(machine_load_text(load).find("warning"), std::string::npos);
  // No time passed, or counters that went backwards: nothing to report, never negative.
  const MachineLoad none = machine_load_between(after, 650, before, 50);
  EXPECT_EQ(none.other_processes, 0.0);
  EXPECT_EQ(none.steal, 0.0);
}

TEST(MachineLoad, ThisMachineHasProc) {
  const MachineLoadMonitor monitor;
  volatile double sink = 0.0;
  for (int i = 0; i < 1000000; ++i) sink = sink + 1.0;
  const std::optional<MachineLoad> load = monitor.load();
  ASSERT_TRUE(load.has_value());
  EXPECT_GE(load->other_processes, 0.0);
  EXPECT_LE(load->other_processes, 1.0);
  EXPECT_GE(load->steal, 0.0);
  EXPECT_LE(load->steal, 1.0);
}

}  // namespace
}  // namespace specula
