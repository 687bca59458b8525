#include "cli/line_reader.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "cli/edit_line_reader.h"
#include "cli/interrupt.h"

namespace specula::cli {

namespace {

class PlainLineReader final : public LineReader {
 public:
  explicit PlainLineReader(std::string prompt) : prompt_(std::move(prompt)) {}

  LineStatus read(std::string& line) override {
    show_prompt();
    line.clear();
    for (;;) {
      char c = 0;
      const ByteRead r = read_byte_unless_interrupted(STDIN_FILENO, c);
      if (r == ByteRead::Interrupted) return LineStatus::Interrupted;
      if (r == ByteRead::End) {
        if (line.empty()) return LineStatus::End;
        break;  // a last line without a line end
      }
      if (c == '\n') break;
      line += c;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return LineStatus::Line;
  }

 private:
  void show_prompt() const {
    if (prompt_.empty()) return;
    std::fwrite(prompt_.data(), 1, prompt_.size(), stdout);
    std::fflush(stdout);
  }

  std::string prompt_;
};

}  // namespace

std::unique_ptr<LineReader> make_plain_line_reader(std::string prompt) {
  return std::make_unique<PlainLineReader>(std::move(prompt));
}

std::unique_ptr<LineReader> make_line_reader(bool line_editing, const std::string& prompt) {
  if (isatty(STDIN_FILENO) == 0) return make_plain_line_reader("");
  // The editor draws on stdout: an answer saved to a file must not fill up with its escape sequences.
  if (line_editing && isatty(STDOUT_FILENO) != 0) {
    if (std::unique_ptr<LineReader> editor = make_edit_line_reader(prompt)) return editor;
  }
  return make_plain_line_reader(prompt);
}

}  // namespace specula::cli
