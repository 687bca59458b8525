// Fuzz entry: Tokenizer::from_json on arbitrary tokenizer.json text, then a few encodes and
// decodes with whatever tokenizer it built.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_entries.h"
#include "specula/text/tokenizer.h"
#include "specula/util/error.h"

namespace specula::fuzz {

int fuzz_tokenizer_json(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    text::Tokenizer tok = text::Tokenizer::from_json(text, "fuzz/tokenizer.json");
    for (const std::string_view sample : {std::string_view("Hello world"), std::string_view(" a  b\n\tc\xc3\xa9"),
                                          std::string_view("<bos><pad>x\xff\xfe"), std::string_view("")}) {
      for (const bool special : {false, true}) {
        const std::vector<int32_t> ids = tok.encode(sample, special);
        for (const int32_t id : ids) {
          if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size()) std::abort();  // encode's own output
        }
        (void)tok.decode(ids, false);
        (void)tok.decode(ids, true);
      }
    }
    std::vector<int32_t> all;
    for (size_t id = 0; id < tok.vocab_size() && id < 64; ++id) {
      all.push_back(static_cast<int32_t>(id));
      if (const auto piece = tok.id_to_token(static_cast<int32_t>(id))) (void)tok.token_to_id(*piece);
      (void)tok.is_special(static_cast<int32_t>(id));
    }
    try {
      (void)tok.decode(all, false);
    } catch (const specula::Error&) {  // ids in a gap of the vocabulary
    }
  } catch (const specula::Error&) {
  }
  return 0;
}

}  // namespace specula::fuzz
