#pragma once
// A one-line progress bar on stderr for long jobs (writing multi-GB checkpoints). It draws only when
// stderr is a terminal, unless forced, so logs and test output stay clean.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace specula {

class ProgressBar {
 public:
  enum class Mode { Auto, Always, Never };  // Auto: only when the stream is a TTY

  ProgressBar(std::string label, uint64_t total, Mode mode = Mode::Auto, std::FILE* out = stderr);
  ~ProgressBar();  // finishes the line if anything was drawn
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return enabled_; }
  // Sets the amount done (clamped to total). Redraws at most every 100 ms, and at completion.
  void update(uint64_t done);
  // Draws the final state and ends the line.
  void finish();

  // The text of one bar line, e.g. "writing [#######.............]  35%  1.2 GB / 3.4 GB  410 MB/s".
  static std::string render(const std::string& label, uint64_t done, uint64_t total, double seconds, int width = 30);

 private:
  void draw(bool final_line);

  std::string label_;
  uint64_t total_ = 0;
  uint64_t done_ = 0;
  std::FILE* out_ = nullptr;
  bool enabled_ = false;
  bool drawn_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// "1.5 GB", "640 KB", "12 B" (decimal units, like disk sizes).
std::string format_bytes(uint64_t bytes);

}  // namespace specula
