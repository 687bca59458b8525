#pragma once
// Fuzz entry functions, one per parser of outside input. Each takes arbitrary bytes, returns 0, and
// must never crash, hang or leak: bad input may only throw specula::Error, which the entry catches.
// Any other exception escapes on purpose (libFuzzer and the regression test report it).
#include <cstddef>
#include <cstdint>

namespace specula::fuzz {

// Safetensors file: byte 0 odd -> the rest is the whole file; even -> the rest is
// "<header JSON>\0<data>" and the entry prepends the little-endian header length.
int fuzz_safetensors(const uint8_t* data, size_t size);
// config.json / generation_config.json / quantization block: any bytes that parse as JSON.
int fuzz_config_json(const uint8_t* data, size_t size);
// tokenizer.json text (small files), then a few encodes and decodes with the result.
int fuzz_tokenizer_json(const uint8_t* data, size_t size);
// The real Gemma 4 tokenizer: byte 0 picks encode / encode with specials / decode ids / streaming
// detokenizer + stop strings; the rest is the text or little-endian int32 ids.
int fuzz_tokenizer_codec(const uint8_t* data, size_t size);
// Chat template: "<template source>\0<variables JSON>" (variables optional).
int fuzz_chat_template(const uint8_t* data, size_t size);
// Tool-call extraction and argument parsing of model output text.
int fuzz_tool_calls(const uint8_t* data, size_t size);
// A checkpoint directory (config.json, tensor inventory, optional shard index) written to a temp
// dir, then load_target + make_target_weights (or load_drafter + check_drafter_compat). See
// targets/checkpoint_dir.cpp for the input format.
int fuzz_checkpoint_dir(const uint8_t* data, size_t size);
// OpenAI request bodies (server/openai_request.h). Byte 0: bits 0-1 endpoint (chat completions,
// completions, tokenize, detokenize), bit 2 a vocabulary of 262144, bit 3 small limits.
int fuzz_openai_request(const uint8_t* data, size_t size);
// GGUF file: the whole input is the file; then every metadata getter and a row of each tensor
// through the dequantizer.
int fuzz_gguf(const uint8_t* data, size_t size);
// A GGUF file through the target or drafter checkpoint loader, converted or described. Byte 0:
// bit 0 the drafter loader, bit 1 describe instead of convert; the rest is the file.
int fuzz_gguf_checkpoint(const uint8_t* data, size_t size);
// Output constraints: byte 0 even -> the rest is GBNF grammar text, odd -> a JSON Schema; a
// grammar that compiles is then run over the same bytes.
int fuzz_grammar(const uint8_t* data, size_t size);
// Forced tool calls: byte 0 bit 0 allows parallel calls, bit 1 names the first tool; the rest is a
// `tools` array (JSON), whose tool-call grammar is then run over the same bytes.
int fuzz_tool_call_grammar(const uint8_t* data, size_t size);
// The cache inventory over one packed-weight file or GGUF image.json written from the input into
// a temporary cache directory. See targets/cache_entry.cpp for the input format.
int fuzz_cache_entry(const uint8_t* data, size_t size);

}  // namespace specula::fuzz
