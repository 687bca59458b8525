#include "specula/util/progress.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <unistd.h>

namespace specula {

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  if (u == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.{}f} {}", v, v < 10.0 ? 2 : (v < 100.0 ? 1 : 0), units[u]);
}

ProgressBar::ProgressBar(std::string label, uint64_t total, Mode mode, std::FILE* out)
    : label_(std::move(label)), total_(total), out_(out) {
  enabled_ = out_ != nullptr && (mode == Mode::Always || (mode == Mode::Auto && ::isatty(::fileno(out_)) == 1));
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() {
  if (drawn_ && !finished_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

std::string ProgressBar::render(const std::string& label, uint64_t done, uint64_t total, double seconds, int width) {
  const double frac = total == 0 ? 1.0 : std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  const int filled = static_cast<int>(std::floor(frac * width));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  std::string line = fmt::format("{} [{}] {:3d}%  {} / {}", label, bar, static_cast<int>(frac * 100.0),
                                 format_bytes(done), format_bytes(total));
  if (seconds > 0.05 && done > 0) {
    const double rate = static_cast<double>(done) / seconds;
    line += fmt::format("  {}/s", format_bytes(static_cast<uint64_t>(rate)));
    if (done < total) {
      line += fmt::format("  ETA {:.0f}s", static_cast<double>(total - done) / rate);
    }
  }
  return line;
}

void ProgressBar::draw(bool final_line) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // "\r" + clear-to-end-of-line so a shorter line leaves no stale characters.
  std::fprintf(out_, "\r%s\x1b[K%s", render(label_, done_, total_, secs).c_str(), final_line ? "\n" : "");
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::update(uint64_t done) {
  if (!enabled_ || finished_) return;
  done_ = std::min(done, total_);
  const auto now = std::chrono::steady_clock::now();
  if (done_ == total_ || now - last_draw_ >= std::chrono::milliseconds(100) || !drawn_) {
    last_draw_ = now;
    draw(false);
  }
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  done_ = total_;
  draw(true);
  finished_ = true;
}

}  // namespace specula
