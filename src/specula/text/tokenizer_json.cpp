#include "specula/text/tokenizer_json.h"

#include <limits>
#include <utility>

#include "specula/util/error.h"
#include "specula/util/mapped_file.h"

namespace specula::text {

namespace {

using nlohmann::json;

// Builds a DOM for everything except model.vocab / model.merges, which go to flat arrays.
class TokenizerJsonSax final : public nlohmann::json_sax<json> {
 public:
  explicit TokenizerJsonSax(TokenizerFile& out) : out_(out) {}

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::Vocab) return vocab_id(v);
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::Vocab) {
      if (v > static_cast<number_unsigned_t>(std::numeric_limits<int64_t>::max())) return vocab_id(-1);
      return vocab_id(static_cast<int64_t>(v));
    }
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool binary(binary_t& v) override { return value(json(json::binary_t(v))); }

  bool string(string_t& v) override {
    if (mode_ == Mode::Merges) return merge_string(v);
    if (mode_ == Mode::Vocab) fail("{}: model.vocab[\"{}\"] must be an integer id, got a string", out_.source, key_);
    return value(json(std::move(v)));
  }

  bool start_object(std::size_t) override {
    if (mode_ == Mode::Vocab) fail("{}: model.vocab[\"{}\"] must be an integer id, got an object", out_.source, key_);
    if (mode_ == Mode::Merges)
      fail("{}: model.merges[{}] must be a pair of strings, got an object", out_.source, merge_count());
    if (capture_next_ == Capture::Vocab) {
      capture_next_ = Capture::None;
      mode_ = Mode::Vocab;
      out_.has_vocab = true;
      return true;
    }
    capture_next_ = Capture::None;
    return push(json::object());
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::Vocab) {
      key_ = std::move(k);
      return true;
    }
    json& obj = *stack_.back();
    // model.vocab and model.merges are captured by the next container instead of the DOM.
    if (stack_.size() == 2 && in_model_) {
      if (k == "vocab") {
        capture_next_ = Capture::Vocab;
        return true;
      }
      if (k == "merges") {
        capture_next_ = Capture::Merges;
        return true;
      }
    }
    pending_key_ = std::move(k);
    element_ = &obj[pending_key_];
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::Dom;
      return true;
    }
    pop();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::Vocab) fail("{}: model.vocab[\"{}\"] must be an integer id, got an array", out_.source, key_);
    if (mode_ == Mode::Merges) {
      if (in_pair_)
        fail("{}: model.merges[{}] must be a pair of strings, got a nested array", out_.source, merge_count());
      in_pair_ = true;
      pair_size_ = 0;
      return true;
    }
    if (capture_next_ == Capture::Merges) {
      capture_next_ = Capture::None;
      mode_ = Mode::Merges;
      out_.has_merges = true;
      return true;
    }
    capture_next_ = Capture::None;
    return push(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::Merges) {
      if (in_pair_) {
        if (pair_size_ != 2) {
          fail("{}: model.merges[{}] must have exactly 2 strings, got {}", out_.source, merge_count(), pair_size_);
        }
        in_pair_ = false;
        return true;
      }
      mode_ = Mode::Dom;
      return true;
    }
    pop();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    fail("{}: invalid JSON at byte {}: {}", out_.source, position, e.what());
  }

  json take_root() { return std::move(root_); }

 private:
  enum class Mode { Dom, Vocab, Merges };
  enum class Capture { None, Vocab, Merges };

  size_t merge_count() const { return out_.merge_left.size(); }

  StringSpan store(const std::string& s) {
    if (out_.strings.size() + s.size() > std::numeric_limits<uint32_t>::max()) {
      fail("{}: vocabulary and merges exceed 4 GiB of text", out_.source);
    }
    StringSpan span{static_cast<uint32_t>(out_.strings.size()), static_cast<uint32_t>(s.size())};
    out_.strings.append(s);
    return span;
  }

  bool vocab_id(int64_t id) {
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      fail("{}: model.vocab[\"{}\"] = {} is not a valid token id (0..{})", out_.source, key_, id,
           std::numeric_limits<int32_t>::max());
    }
    out_.vocab_tokens.push_back(store(key_));
    out_.vocab_ids.push_back(id);
    return true;
  }

  bool merge_string(const std::string& s) {
    if (in_pair_) {
      if (pair_size_ >= 2) fail("{}: model.merges[{}] must have exactly 2 strings", out_.source, merge_count());
      (pair_size_ == 0 ? out_.merge_left : out_.merge_right).push_back(store(s));
      ++pair_size_;
      return true;
    }
    // Older files write a merge as one "left right" string.
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      fail("{}: model.merges[{}] = \"{}\" is not of the form \"left right\"", out_.source, merge_count(), s);
    }
    out_.merge_left.push_back(store(s.substr(0, space)));
    out_.merge_right.push_back(store(s.substr(space + 1)));
    return true;
  }

  bool value(json&& v) {
    if (mode_ != Mode::Dom) {
      fail("{}: unexpected value inside model.{}", out_.source, mode_ == Mode::Vocab ? "vocab" : "merges");
    }
    if (capture_next_ != Capture::None) {
      // model.vocab / model.merges given as something other than an object / array: keep it in the
      // DOM so the model factory reports the type mismatch with its path.
      const char* name = capture_next_ == Capture::Vocab ? "vocab" : "merges";
      capture_next_ = Capture::None;
      (*stack_.back())[name] = std::move(v);
      return true;
    }
    if (stack_.empty()) {
      root_ = std::move(v);
    } else if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(v));
    } else {
      *element_ = std::move(v);
    }
    return true;
  }

  bool push(json&& container) {
    json* slot = nullptr;
    if (stack_.empty()) {
      root_ = std::move(container);
      slot = &root_;
    } else if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(container));
      slot = &stack_.back()->back();
    } else {
      *element_ = std::move(container);
      slot = element_;
    }
    const bool is_model = stack_.size() == 1 && slot->is_object() && pending_key_ == "model";
    stack_.push_back(slot);
    if (is_model) in_model_ = true;
    return true;
  }

  void pop() {
    if (stack_.size() == 2 && in_model_) in_model_ = false;
    stack_.pop_back();
  }

  TokenizerFile& out_;
  json root_;
  std::vector<json*> stack_;
  json* element_ = nullptr;
  std::string pending_key_;
  std::string key_;  // current model.vocab key
  Mode mode_ = Mode::Dom;
  Capture capture_next_ = Capture::None;
  bool in_model_ = false;
  bool in_pair_ = false;
  size_t pair_size_ = 0;
};

}  // namespace

TokenizerFile parse_tokenizer_json(std::string_view json_text, const std::string& source) {
  TokenizerFile file;
  file.source = source;
  TokenizerJsonSax sax(file);
  json::sax_parse(json_text.begin(), json_text.end(), &sax);
  file.config = sax.take_root();
  if (!file.config.is_object()) fail("{}: top level must be a JSON object", source);
  if (file.merge_left.size() != file.merge_right.size()) {
    fail("{}: model.merges ends inside a pair", source);
  }
  return file;
}

TokenizerFile load_tokenizer_json(const std::string& path) {
  const MappedFile mapped = MappedFile::open(path);
  const std::string_view text(reinterpret_cast<const char*>(mapped.data()), mapped.size());
  return parse_tokenizer_json(text, path);
}

}  // namespace specula::text
