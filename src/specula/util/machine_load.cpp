#include "specula/util/machine_load.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace specula {

namespace {

// The whitespace-separated integers of `text` from its start (at most `limit`); stops at the first
// token that is not one. Signed: /proc/<pid>/stat has -1 fields (tpgid) before the CPU times.
std::vector<int64_t> leading_numbers(std::string_view text, size_t limit) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (out.size() < limit) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i == text.size()) break;
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), v);
    if (ec != std::errc() || (end != text.data() + text.size() && *end != ' ' && *end != '\t' && *end != '\n')) break;
    out.push_back(v);
    i = static_cast<size_t>(end - text.data());
  }
  return out;
}

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool all_non_negative(const std::vector<int64_t>& v, size_t from) {
  for (size_t i = from; i < v.size(); ++i)
    if (v[i] < 0) return false;
  return true;
}

double fraction(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

std::optional<CpuTicks> parse_proc_stat(std::string_view text) {
  size_t line = 0;
  while (line < text.size()) {
    const size_t eol = std::min(text.find('\n', line), text.size());
    const std::string_view l = text.substr(line, eol - line);
    if (l.starts_with("cpu ")) {
      // user nice system idle iowait irq softirq steal [guest guest_nice]
      const std::vector<int64_t> n = leading_numbers(l.substr(4), 8);
      if (n.size() < 8 || !all_non_negative(n, 0)) return std::nullopt;
      const std::vector<uint64_t> f(n.begin(), n.end());
      CpuTicks t;
      for (uint64_t v : f) t.total += v;
      t.busy = f[0] + f[1] + f[2] + f[5] + f[6];
      t.steal = f[7];
      return t;
    }
    line = eol + 1;
  }
  return std::nullopt;
}

std::optional<uint64_t> parse_process_ticks(std::string_view stat_line) {
  const size_t close = stat_line.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // After the name: state (field 3), then numbers from field 4 (ppid) on; utime is field 14.
  std::string_view rest = stat_line.substr(close + 1);
  const size_t state = rest.find_first_not_of(' ');
  if (state == std::string_view::npos) return std::nullopt;
  rest = rest.substr(state + 1);
  const std::vector<int64_t> f = leading_numbers(rest, 14);
  if (f.size() < 14 || !all_non_negative(f, 10)) return std::nullopt;
  return static_cast<uint64_t>(f[10] + f[11] + f[12] + f[13]);  // fields 14-17
}

MachineLoad machine_load_between(const CpuTicks& before, uint64_t self_before, const CpuTicks& after,
                                 uint64_t self_after) {
  MachineLoad load;
  if (after.total <= before.total) return load;
  const uint64_t total = after.total - before.total;
  const uint64_t busy = after.busy >= before.busy ? after.busy - before.busy : 0;
  const uint64_t self = self_after >= self_before ? self_after - self_before : 0;
  load.other_processes = fraction(busy > self ? busy - self : 0, total);
  load.steal = fraction(after.steal >= before.steal ? after.steal - before.steal : 0, total);
  return load;
}

MachineLoadMonitor::MachineLoadMonitor()
    : machine_(parse_proc_stat(read_text("/proc/stat"))), self_(parse_process_ticks(read_text("/proc/self/stat"))) {}

std::optional<MachineLoad> MachineLoadMonitor::load() const {
  if (!machine_ || !self_) return std::nullopt;
  const std::optional<CpuTicks> now = parse_proc_stat(read_text("/proc/stat"));
  const std::optional<uint64_t> self = parse_process_ticks(read_text("/proc/self/stat"));
  if (!now || !self) return std::nullopt;
  return machine_load_between(*machine_, *self_, *now, *self);
}

std::string machine_load_text(const MachineLoad& load) {
  std::string s = fmt::format("other processes {:.0f} % of the CPU time, hypervisor steal {:.0f} %",
                              100.0 * load.other_processes, 100.0 * load.steal);
  if (load.busy()) s += " (warning: the machine was busy; these figures are not comparable with a quiet run's)";
  return s;
}

}  // namespace specula
