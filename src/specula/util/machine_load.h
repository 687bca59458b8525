#pragma once
// How busy the machine was with other work while a benchmark ran: the CPU time other processes
// took and the time the hypervisor gave this VM's CPUs to other guests ("steal"), as fractions of
// all CPUs' time over the run. On a shared VM either one slows memory-bound figures by tens of
// percent, so benchmark reports print them beside the figures they qualify.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace specula {

// The aggregate "cpu" line of /proc/stat, in clock ticks summed over every CPU.
struct CpuTicks {
  uint64_t total = 0;  // user .. steal, idle included (guest time, the fields after, is inside user and nice)
  uint64_t busy = 0;   // user + nice + system + irq + softirq
  uint64_t steal = 0;
};

// The ticks of a /proc/stat text's first "cpu " line; nullopt when there is none or it has fewer
// than the 8 fields up to steal (kernels before 2.6.11).
std::optional<CpuTicks> parse_proc_stat(std::string_view text);

// utime + stime + cutime + cstime (fields 14-17) of a /proc/<pid>/stat line, whose second field
// (the command name in parentheses) may itself hold spaces and parentheses; nullopt if malformed.
std::optional<uint64_t> parse_process_ticks(std::string_view stat_line);

struct MachineLoad {
  double other_processes = 0.0;  // fraction of all CPUs' time used by other processes
  double steal = 0.0;            // fraction of all CPUs' time stolen by the hypervisor
  // Whether the figures are likely distorted: other processes above 10 % or steal above 5 %.
  bool busy() const { return other_processes > 0.10 || steal > 0.05; }
};

// The load between two samples of the machine's and this process's ticks.
MachineLoad machine_load_between(const CpuTicks& before, uint64_t self_before, const CpuTicks& after,
                                 uint64_t self_after);

// Samples /proc/stat and /proc/self/stat when made and when asked; without /proc (not Linux) it
// measures nothing and load() is nullopt.
class MachineLoadMonitor {
 public:
  MachineLoadMonitor();
  std::optional<MachineLoad> load() const;

 private:
  std::optional<CpuTicks> machine_;
  std::optional<uint64_t> self_;
};

// "other processes 3 % of the CPU time, steal 0 %" plus, when busy(), a warning that the figures
// are not comparable with a quiet run's.
std::string machine_load_text(const MachineLoad& load);

}  // namespace specula
