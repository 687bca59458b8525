// Fuzz entry: GgufFile::from_bytes on an arbitrary file (the same parser GgufFile::open runs over
// the mapping), then every metadata getter, the first row of each tensor through the dequantizer
// and the gemma4 and gemma4-assistant config mappings. The input is copied to its own buffer, so
// ASan catches any read past its end. The tokenizer metadata (text/gguf_tokenizer.h) is read too, and a tokenizer built
// from it encodes and decodes a short text.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_entries.h"
#include "specula/io/gguf.h"
#include "specula/io/gguf_config.h"
#include "specula/kernels/ggml_quants.h"
#include "specula/text/gguf_tokenizer.h"
#include "specula/util/error.h"

namespace specula::fuzz {
namespace {

// Calls every typed getter on the key: the one matching its type must succeed, the others must
// throw specula::Error (caught here).
void exercise_getters(const GgufFile& f, const GgufKv& kv) {
  const std::string_view k = kv.key;
  const auto attempt = [](auto&& call) {
    try {
      call();
    } catch (const specula::Error&) {
    }
  };
  attempt([&] { (void)f.get_string(k); });
  attempt([&] { (void)f.get_u32(k); });
  attempt([&] { (void)f.get_i32(k); });
  attempt([&] { (void)f.get_u64(k); });
  attempt([&] { (void)f.get_int(k); });
  attempt([&] { (void)f.get_f32(k); });
  attempt([&] { (void)f.get_bool(k); });
  attempt([&] { (void)f.get_string_array(k); });
  attempt([&] { (void)f.get_f32_array(k); });
  attempt([&] { (void)f.get_i32_array(k); });
  attempt([&] { (void)f.get_int_array(k); });
  if (kv.type == GgufType::STRING && f.get_string(k).size() != kv.strings.at(0).size()) std::abort();
  if (kv.is_array() && kv.array_type == GgufType::STRING && f.get_string_array(k).size() != kv.count) std::abort();
  (void)gguf_value_string(kv);
}

void exercise_tokenizer(const GgufFile& f) {
  (void)text::gguf_special_tokens(f);
  try {
    (void)text::gguf_chat_template(f);
  } catch (const specula::Error&) {
  }
  try {
    const text::Tokenizer t = text::gguf_tokenizer(f);
    const std::vector<int32_t> ids = t.encode("ab <bos>\n\n x\xC3\xA9", /*add_special_tokens=*/true);
    for (const int32_t id : ids)
      if (id < 0 || static_cast<size_t>(id) >= t.vocab_size()) std::abort();
    (void)t.decode(ids, /*skip_special_tokens=*/true);
  } catch (const specula::Error&) {
  }
}

}  // namespace

int fuzz_gguf(const uint8_t* data, size_t size) {
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                                     reinterpret_cast<const std::byte*>(data) + size);
  try {
    const GgufFile file = GgufFile::from_bytes(bytes, "fuzz.gguf");
    for (const GgufKv& kv : file.metadata()) {
      if (file.find_kv(kv.key) != &kv) std::abort();
      exercise_getters(file, kv);
    }
    unsigned sum = 0;
    std::vector<float> row;
    for (const GgufTensor& t : file.tensors()) {
      if (file.find_tensor(t.name) != &t) std::abort();
      if (t.numel() <= 0 || t.nbytes == 0 || t.offset % file.alignment() != 0) std::abort();
      if (t.nbytes != ggml_row_bytes(t.type, static_cast<uint64_t>(t.numel()))) std::abort();
      if (file.data_offset() + t.offset + t.nbytes > file.file_size()) std::abort();
      // Every view must lie inside the input: touching its first and last byte lets ASan check it.
      sum += std::to_integer<unsigned>(t.data[0]) + std::to_integer<unsigned>(t.data[t.nbytes - 1]);
      (void)t.dims_str();
      if (ggml_dequant_supported(t.type) && t.ne0() <= (1 << 16)) {
        row.resize(static_cast<size_t>(t.ne0()));
        dequantize_gguf_row(t, t.rows() - 1, row.data());
        for (float v : row) sum += std::isnan(v) ? 1u : 0u;
      }
    }
    if (sum == 0xdeadbeef) std::puts("");  // keeps the reads
    exercise_tokenizer(file);
    // The metadata mappings (io/gguf_config.h) read keys and the rope_freqs tensor: the gemma4
    // target's, then the gemma4-assistant drafter's (each refuses the other's architecture).
    try {
      (void)gguf_target_config(file);
    } catch (const specula::Error&) {
    }
    (void)gguf_drafter_config(file);
  } catch (const specula::Error&) {
  }
  return 0;
}

}  // namespace specula::fuzz
