// A GGUF target with the golden case's safetensors drafter: speculative greedy decoding gives the
// golden greedy tokens for every gamma (the drafter checks its fit against the GGUF's config).
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "spec_golden_util.h"
#include "specula/io/config.h"
#include "specula/model/drafter.h"
#include "specula/model/target_model.h"
#include "specula/speculative/speculative.h"
#include "specula/synth/gguf_export.h"
#include "temp_dir.h"

namespace specula {
namespace {

using spec_test::golden_case_names;
using spec_test::golden_root;

class GgufSpec : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufSpec, SpeculativeTokensEqualGoldenGreedy) {
  const auto dir = golden_root() / GetParam();
  const nlohmann::json expected = read_json_file((dir / "expected.json").string());
  const auto prompt = expected.at("prompt").get<std::vector<int32_t>>();
  const auto greedy = expected.at("greedy").get<std::vector<int32_t>>();
  const test::ScopedTempDir tmp("specula-gguf-spec");
  const std::string file = tmp.file("model.gguf");
  synth::GgufExportOptions o;
  o.affine4_as_q4_1 = true;
  synth::write_target_gguf(load_target((dir / "model").string()), file, o);
  auto model = TargetModel::load(file);
  auto drafter = Drafter::load((dir / "drafter").string(), *model, DrafterConvention::Ollama);
  ThreadPool pool(1);
  TargetCache cache = model->new_cache();
  for (int64_t gamma : {1, 3, 5}) {
    SpeculativeOptions s;
    s.max_tokens = static_cast<int64_t>(greedy.size());
    s.ignore_eos = true;
    s.gamma.fixed = gamma;
    EXPECT_EQ(generate_speculative(*model, cache, drafter.get(), prompt, s, pool).tokens, greedy) << "gamma " << gamma;
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, GgufSpec, ::testing::ValuesIn(golden_case_names()),
                         [](const auto& info) { return spec_test::param_name(info.param); });

}  // namespace
}  // namespace specula
