#include "specula/kernels/kv_type.h"

#include "specula/util/error.h"

namespace specula {

KvType parse_kv_type(const std::string& text) {
  if (text == "f32") return KvType::F32;
  if (text == "bf16") return KvType::Bf16;
  fail("KV cache type '{}' is not one of 'f32', 'bf16'", text);
}

const char* kv_type_name(KvType t) { return t == KvType::Bf16 ? "bf16" : "f32"; }

}  // namespace specula
