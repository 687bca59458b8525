#pragma once
// The terminal's line reader: libedit with Emacs bindings (arrow keys, Home/End, Ctrl-A/E/K/W...)
// and the lines typed in this chat on Up/Down. The history lives in memory only: no prompt is
// written to disk.
#include <memory>
#include <string>

#include "cli/line_reader.h"

namespace specula::cli {

// Null when libedit cannot set up the terminal (the caller falls back to the plain reader).
std::unique_ptr<LineReader> make_edit_line_reader(const std::string& prompt);

}  // namespace specula::cli
