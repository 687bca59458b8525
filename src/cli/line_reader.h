#pragma once
// How `specula chat` reads what the user types: the next line, or the end of the input. On a
// terminal the line is edited with libedit (edit_line_reader.h); from a pipe, or with
// --no-line-editing, the bytes are taken as they come.
#include <memory>
#include <string>

namespace specula::cli {

enum class LineStatus {
  Line,         // the next line, without its line end
  End,          // end of input: Ctrl-D at an empty prompt, or the pipe closed
  Interrupted,  // Ctrl-C at the prompt (cli/interrupt.h)
};

class LineReader {
 public:
  virtual ~LineReader() = default;
  virtual LineStatus read(std::string& line) = 0;
};

// Reads stdin with read(2), writing `prompt` to stdout first (when not empty).
std::unique_ptr<LineReader> make_plain_line_reader(std::string prompt);

// On a terminal: the libedit reader when `line_editing` and stdout is the terminal too, else the
// plain one; both show `prompt`.
// From a pipe: the plain reader without a prompt.
std::unique_ptr<LineReader> make_line_reader(bool line_editing, const std::string& prompt);

}  // namespace specula::cli
