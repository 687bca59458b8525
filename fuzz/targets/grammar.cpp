// Fuzz entry: the GBNF parser and the JSON Schema compiler, then the matcher on the input's own
// bytes (so a grammar that compiles is also run).
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_entries.h"
#include "specula/grammar/gbnf_parser.h"
#include "specula/grammar/grammar_matcher.h"
#include "specula/grammar/json_schema.h"
#include "specula/util/error.h"

namespace specula::fuzz {

int fuzz_grammar(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    std::shared_ptr<const grammar::Grammar> g;
    if (data[0] & 1) {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(text);
      } catch (const nlohmann::json::exception&) {
        return 0;
      }
      g = std::make_shared<const grammar::Grammar>(grammar::grammar_from_json_schema(schema));
    } else {
      g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(text));
    }
    grammar::GrammarMatcher m(g);
    for (const char c : text.substr(0, 256))
      if (!m.accept_byte(static_cast<uint8_t>(c))) break;
    (void)m.can_end();
  } catch (const specula::Error&) {
  }
  return 0;
}

}  // namespace specula::fuzz
