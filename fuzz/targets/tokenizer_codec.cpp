// Fuzz entry: the real Gemma 4 tokenizer (loaded once) encoding arbitrary bytes and decoding
// arbitrary ids, the streaming detokenizer, and stop-string matching over its output.
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_entries.h"
#include "specula/text/detokenizer.h"
#include "specula/text/stop_strings.h"
#include "specula/text/tokenizer.h"
#include "specula/util/error.h"

namespace specula::fuzz {
namespace {

const text::Tokenizer& gemma() {
  static const text::Tokenizer tok = text::Tokenizer::load(SPECULA_TEST_DATA "/tokenizer-gemma4/tokenizer.json");
  return tok;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n;
  }
  return true;
}

std::string spaces_for_metaspace(std::string_view s) {
  static constexpr std::string_view kMetaspace = "\xe2\x96\x81";
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i, kMetaspace.size()) == kMetaspace) {
      out += ' ';
      i += kMetaspace.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::vector<int32_t> ids_from_bytes(std::string_view bytes, size_t vocab) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 4 <= bytes.size() && ids.size() < 256; i += 4) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + i, 4);
    // Mostly in-range ids, with a few just past the end and negative ones.
    const int64_t range = static_cast<int64_t>(vocab) + 16;
    ids.push_back((v & 0x80000000u) && (v & 1) ? -static_cast<int32_t>(v & 0xff) - 1
                                               : static_cast<int32_t>(static_cast<int64_t>(v & 0x7fffffff) % range));
  }
  return ids;
}

}  // namespace

int fuzz_tokenizer_codec(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const text::Tokenizer& tok = gemma();
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0:
    case 1: {
      const bool special = data[0] % 4 == 1;
      const std::vector<int32_t> ids = tok.encode(rest, special);
      for (const int32_t id : ids) {
        if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size()) std::abort();
      }
      const std::string back = tok.decode(ids, false);
      // Byte fallback makes valid UTF-8 round-trip exactly (the post-processor only adds <bos>),
      // except that U+2581 (the normalizer's stand-in for a space) decodes to a space, as in HF.
      if (!special && valid_utf8(rest) && back != spaces_for_metaspace(rest)) std::abort();
      break;
    }
    case 2: {
      const std::vector<int32_t> ids = ids_from_bytes(rest, tok.vocab_size());
      try {
        (void)tok.decode(ids, (data[0] & 4) != 0);
      } catch (const specula::Error&) {
      }
      break;
    }
    case 3: {
      // Stop strings come from the first bytes; the rest are ids streamed one at a time.
      const std::string_view stop_bytes = rest.substr(std::min<size_t>(1, rest.size()));
      const size_t stop_len =
          std::min<size_t>(rest.empty() ? 0 : static_cast<unsigned char>(rest[0]) % 8, stop_bytes.size());
      const size_t second_len = std::min(stop_len / 2, stop_bytes.size() - stop_len);
      std::vector<std::string> stops{std::string(stop_bytes.substr(0, stop_len)),
                                     std::string(stop_bytes.substr(stop_len, second_len))};
      const std::string_view id_bytes = stop_bytes.substr(stop_len + second_len);
      text::DetokenizerOptions options;
      options.skip_special_tokens = (data[0] & 4) != 0;
      if (data[0] & 8) options.hidden_ids = {1, 106};
      text::StreamingDetokenizer detok(tok, options);
      text::StopStringMatcher stop(stops);
      std::string emitted;
      try {
        for (const int32_t id : ids_from_bytes(id_bytes, tok.vocab_size())) {
          const text::StopStringMatcher::Step step = stop.push(detok.push(id));
          emitted += step.text;
          if (step.stopped) break;
        }
        if (!stop.stopped()) emitted += stop.push(detok.finish()).text;
        if (!stop.stopped()) emitted += stop.finish();
      } catch (const specula::Error&) {  // an out-of-range id
      }
      // Emitted text never contains a stop string.
      for (const std::string& s : stops) {
        if (!s.empty() && emitted.find(s) != std::string::npos) std::abort();
      }
      break;
    }
  }
  return 0;
}

}  // namespace specula::fuzz
