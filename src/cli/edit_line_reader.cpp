#include "cli/edit_line_reader.h"

#include <histedit.h>
#include <langinfo.h>
#include <unistd.h>

#include <clocale>
#include <cstring>
#include <cwchar>
#include <utility>

#include "cli/interrupt.h"

namespace specula::cli {

namespace {

constexpr int kHistoryLines = 1000;

// libedit decodes what is typed and encodes the line with the C library's multibyte functions:
// the chat's text is UTF-8 whatever locale the environment names (C.UTF-8 is built into glibc).
void use_utf8_characters() {
  if (std::setlocale(LC_CTYPE, "") != nullptr && std::strcmp(nl_langinfo(CODESET), "UTF-8") == 0) return;
  std::setlocale(LC_CTYPE, "C.UTF-8");
}

class EditLineReader final : public LineReader {
 public:
  explicit EditLineReader(std::string prompt) : prompt_(std::move(prompt)) {}
  ~EditLineReader() override {
    if (editor_ != nullptr) el_end(editor_);
    if (history_ != nullptr) history_end(history_);
  }
  EditLineReader(const EditLineReader&) = delete;
  EditLineReader& operator=(const EditLineReader&) = delete;

  bool start() {
    use_utf8_characters();
    history_ = history_init();
    editor_ = el_init("specula", stdin, stdout, stderr);
    if (history_ == nullptr || editor_ == nullptr) return false;
    HistEvent event;
    history(history_, &event, H_SETSIZE, kHistoryLines);
    history(history_, &event, H_SETUNIQUE, 1);
    el_set(editor_, EL_CLIENTDATA, this);
    el_set(editor_, EL_EDITOR, "emacs");
    el_set(editor_, EL_PROMPT, &EditLineReader::prompt_of);
    el_set(editor_, EL_HIST, history, history_);
    el_set(editor_, EL_GETCFN, &EditLineReader::read_char);
    return true;
  }

  LineStatus read(std::string& line) override {
    interrupted_ = false;
    el_resize(editor_);  // the window may have changed size while the model answered
    // The terminal leaves line mode before the prompt shows: a key pressed once it shows (Ctrl-D
    // above all, which the kernel's line mode would take as its own end of input) reaches libedit.
    el_set(editor_, EL_PREP_TERM, 1);
    int count = 0;
    const char* text = el_gets(editor_, &count);
    if (text == nullptr || count <= 0) return interrupted_ ? LineStatus::Interrupted : LineStatus::End;
    line.assign(text, static_cast<size_t>(count));
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) {
      HistEvent event;
      history(history_, &event, H_ENTER, line.c_str());
    }
    return LineStatus::Line;
  }

 private:
  static EditLineReader& reader_of(EditLine* editor) {
    void* data = nullptr;
    el_get(editor, EL_CLIENTDATA, &data);
    return *static_cast<EditLineReader*>(data);
  }

  static char* prompt_of(EditLine* editor) { return reader_of(editor).prompt_.data(); }

  // EL_GETCFN: one character of stdin, decoded from UTF-8 (a byte that is not is dropped); 0 at
  // the end of input, -1 when Ctrl-C interrupts the wait (el_gets then returns no line).
  static int read_char(EditLine* editor, wchar_t* out) {
    std::mbstate_t state{};
    for (;;) {
      char byte = 0;
      const ByteRead r = read_byte_unless_interrupted(STDIN_FILENO, byte);
      if (r == ByteRead::Interrupted) {
        reader_of(editor).interrupted_ = true;
        return -1;
      }
      if (r == ByteRead::End) return 0;
      const size_t n = std::mbrtowc(out, &byte, 1, &state);
      if (n == static_cast<size_t>(-2)) continue;  // inside a multibyte character
      if (n == static_cast<size_t>(-1)) {
        state = {};
        continue;
      }
      return 1;
    }
  }

  std::string prompt_;
  EditLine* editor_ = nullptr;
  History* history_ = nullptr;
  bool interrupted_ = false;
};

}  // namespace

std::unique_ptr<LineReader> make_edit_line_reader(const std::string& prompt) {
  auto reader = std::make_unique<EditLineReader>(prompt);
  if (!reader->start()) return nullptr;
  return reader;
}

}  // namespace specula::cli
