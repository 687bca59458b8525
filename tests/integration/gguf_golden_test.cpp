// Every golden case converted to GGUF (float weights as f32, MLX 4-bit g32/g64 modules as Q4_1,
// which holds them exactly; other quantized modules dequantized to f32) reproduces the golden
// prefill logits within 1e-4 and the greedy tokens. And GGUF files of each ggml type specula
// loads hold, once loaded, exactly the values ggml's reference dequantization gives, and run the
// same logits as their f32 equivalent; described without converting (`inspect`), they have the
// converted image's tensors and the bytes per token the packed model reads.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "spec_golden_util.h"
#include "specula/io/checkpoint_summary.h"
#include "specula/io/config.h"
#include "specula/io/gguf.h"
#include "specula/kernels/ggml_quants.h"
#include "specula/model/generate.h"
#include "specula/model/gguf_target.h"
#include "specula/model/target_model.h"
#include "specula/model/target_weights.h"
#include "specula/synth/gguf_export.h"
#include "temp_dir.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using spec_test::golden_case_names;
using spec_test::golden_root;

std::vector<float> prefill_logits(TargetModel& model, const std::vector<int32_t>& prompt) {
  ThreadPool pool(1);
  TargetCache cache = model.new_cache();
  ForwardRequest all;
  all.rows = OutputRows::All;
  const ForwardOutput out = model.forward(cache, prompt, all, pool);
  std::vector<float> v;
  for (size_t r = 0; r < prompt.size(); ++r) v.insert(v.end(), out.logits_row(r), out.logits_row(r) + out.vocab_size);
  return v;
}

double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_abs = std::max(max_abs, std::abs(want[i]));
    max_diff = std::max(max_diff, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return max_diff / max_abs;
}

bool has_type(const std::string& path, GgmlType type) {
  const GgufFile f = GgufFile::open(path);
  return std::any_of(f.tensors().begin(), f.tensors().end(), [&](const GgufTensor& t) { return t.type == type; });
}

class GgufGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufGolden, PrefillLogitsAndGreedyTokensFromGguf) {
  const fs::path dir = golden_root() / GetParam();
  const nlohmann::json expected = read_json_file((dir / "expected.json").string());
  const auto prompt = expected.at("prompt").get<std::vector<int32_t>>();
  const auto want_greedy = expected.at("greedy").get<std::vector<int32_t>>();
  std::vector<double> want;
  for (const auto& row : expected.at("logits")) {
    const auto r = row.get<std::vector<double>>();
    want.insert(want.end(), r.begin(), r.end());
  }

  const test::ScopedTempDir tmp("specula-gguf-golden");
  const std::string file = tmp.file("model.gguf");
  synth::GgufExportOptions o;
  o.affine4_as_q4_1 = true;
  synth::write_target_gguf(load_target((dir / "model").string()), file, o);
  if (GetParam().find("-q4g") != std::string::npos) {
    EXPECT_TRUE(has_type(file, GgmlType::Q4_1)) << "no Q4_1 tensor";
  }

  auto model = TargetModel::load(file);
  const std::vector<float> logits = prefill_logits(*model, prompt);
  ASSERT_EQ(logits.size(), want.size());
  const double rel = relative_error(logits, want);
  std::printf("[gguf golden] %-24s max relative error %.3e\n", GetParam().c_str(), rel);
  EXPECT_LT(rel, 1e-4);

  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  GenerateOptions g;
  g.max_tokens = static_cast<int64_t>(want_greedy.size());
  g.ignore_eos = true;
  EXPECT_EQ(generate_greedy(*model, cache, prompt, g, pool).tokens, want_greedy);
}

INSTANTIATE_TEST_SUITE_P(Goldens, GgufGolden, ::testing::ValuesIn(golden_case_names()),
                         [](const auto& info) { return spec_test::param_name(info.param); });

// Each ggml type a GGUF target may hold: written from a golden model, loaded, and compared tensor
// by tensor (every value of every tensor, exactly; a zero may differ in sign: Q4_0 with a negative
// d gives -0 where the affine form gives +0) against dequantize_row_ggml of the file's blocks,
// reading the loaded weights back through the checkpoint's own row dequantization (the f32 export
// of the loaded checkpoint). The model then runs the logits of that f32 file (within the exact
// precision bar).
class GgufTypes : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufTypes, LoadedWeightsEqualTheReferenceDequantization) {
  const fs::path dir = golden_root() / "dense-bf16-hf";
  const test::ScopedTempDir tmp("specula-gguf-types");
  const std::string typed = tmp.file("typed.gguf"), dense = tmp.file("dense.gguf");
  synth::GgufExportOptions o;
  o.matrices = synth::parse_gguf_matrix_type(GetParam());
  synth::write_target_gguf(load_target((dir / "model").string()), typed, o);
  const TargetCheckpoint loaded = load_gguf_target(typed);
  synth::write_target_gguf(loaded, dense, {});

  const GgufFile a = GgufFile::open(typed), b = GgufFile::open(dense);
  size_t quantized = 0;
  for (const GgufTensor& t : a.tensors()) {
    SCOPED_TRACE(t.name);
    const GgufTensor& d = b.tensor(t.name);
    ASSERT_EQ(d.type, GgmlType::F32);
    ASSERT_EQ(d.dims, t.dims);
    if (t.type != GgmlType::F32) ++quantized;
    std::vector<float> want(static_cast<size_t>(t.ne0())), got(want.size());
    for (int64_t r = 0; r < t.rows(); ++r) {
      dequantize_gguf_row(t, r, want.data());
      std::memcpy(got.data(), d.data + static_cast<size_t>(r) * d.row_bytes(), d.row_bytes());
      for (size_t j = 0; j < want.size(); ++j) ASSERT_EQ(want[j], got[j]) << "row " << r << ", element " << j;
    }
  }
  EXPECT_GT(quantized, 0u) << "no tensor of type " << GetParam();
  // K-quant matrices keep their shared scale structure for the fast kernels (the only K-quant rows
  // here that are whole superblocks: down_proj's 256 inputs).
  const bool shared = GetParam() == "q4_k" || GetParam() == "q5_k" || GetParam() == "q6_k";
  EXPECT_EQ(loaded.layers[0].down_proj.quant.superblock, shared ? 256 : 0);
  EXPECT_EQ(loaded.layers[0].down_proj.quant.code_bits, GetParam() == "q6_k" ? 6 : 0);

  const std::vector<int32_t> prompt = {2, 17, 99, 5, 311, 42, 7};
  auto typed_model = TargetModel::load(typed);
  auto dense_model = TargetModel::load(dense);
  const std::vector<float> x = prefill_logits(*typed_model, prompt), y = prefill_logits(*dense_model, prompt);
  std::vector<double> yd(y.begin(), y.end());
  // Same weights; only the kernels' summation differs (affine groups vs dense rows).
  EXPECT_LT(relative_error(x, yd), 1e-4);
  // Fast precision runs the packed kernels for every type (Q6_K: 8-bit groups of 16 holding 6-bit
  // codes, `code_bits` 6).
  TargetOptions fast;
  fast.precision = Precision::Fast;
  auto fast_model = TargetModel::load(typed, fast);
  EXPECT_LT(relative_error(prefill_logits(*fast_model, prompt), yd), 3e-2);

  // Described instead of converted: the converted image's tensors (none of the matrices' bytes),
  // the file's size on disk, and the bytes a decode step of the packed model reads.
  GgufLoadOptions describe;
  describe.convert = false;
  const TargetCheckpoint described = load_gguf_target(typed, describe);
  EXPECT_EQ(described.gguf_image, GgufImageSource::Described);
  ASSERT_EQ(described.store.names(), loaded.store.names());
  for (const std::string& name : loaded.store.names()) {
    const TensorView& x = described.store.get(name);
    const TensorView& y = loaded.store.get(name);
    EXPECT_EQ(x.dtype, y.dtype) << name;
    EXPECT_EQ(x.shape, y.shape) << name;
    EXPECT_EQ(x.nbytes, y.nbytes) << name;
    if (y.shape.size() <= 1) {
      EXPECT_EQ(0, std::memcmp(x.data, y.data, y.nbytes)) << name;
    }
  }
  EXPECT_EQ(described.config.quantization.overrides, loaded.config.quantization.overrides);
  EXPECT_EQ(described.store.total_bytes(), loaded.store.total_bytes());

  const CheckpointSummary s = summarize_checkpoint(described), ran = summarize_checkpoint(fast_model->checkpoint());
  EXPECT_EQ(s.bytes_on_disk, fs::file_size(typed));
  EXPECT_EQ(ran.bytes_on_disk, fs::file_size(typed));
  EXPECT_EQ(s.gguf_image_bytes, loaded.store.total_bytes());
  EXPECT_EQ(s.bytes_per_token, ran.bytes_per_token);
  EXPECT_EQ(make_target_weights(described).decode_bytes_per_token(s, MatrixBytes::FastPrecision),
            fast_model->weights().decode_bytes_per_token(ran, MatrixBytes::Packed));
}

INSTANTIATE_TEST_SUITE_P(Types, GgufTypes,
                         ::testing::Values("bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"));

}  // namespace
}  // namespace specula
