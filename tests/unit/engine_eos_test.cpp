// The engine's EOS set and default sampling on a checkpoint laid out like the 12B's (no
// eos_token_id in config.json, no generation_config.json) that carries the Gemma 4 tokenizer and
// chat template: a chat turn still ends at <turn|> (docs/gemma4.md §2.5). And the default sampling
// a Gemma 4 IT generation_config.json gives.
#include <gtest/gtest.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scratch_dir.h"
#include "specula/engine/engine.h"
#include "specula/io/config.h"
#include "specula/model/target_model.h"
#include "specula/sample/sampling_params.h"
#include "specula/synth/plan.h"
#include "specula/synth/writer.h"

namespace specula {
namespace {

namespace fs = std::filesystem;

TEST(EngineEos, ConfigWithoutEosStopsAtTheTemplatesEndOfTurn) {
  const test::ScratchDir scratch("specula-engine-eos");
  const fs::path dir(scratch.str());
  synth::SynthOptions o;
  o.preset = "tiny-dense";
  o.vocab = 262144;  // the tokenizer's ids must have embedding rows
  synth::CheckpointPlan plan = synth::plan_target(o);
  plan.config.erase("eos_token_id");
  plan.config["text_config"].erase("eos_token_id");
  synth::write_checkpoint(plan, dir.string());
  fs::remove(dir / "generation_config.json");
  const fs::path tok = fs::path(SPECULA_TEST_DATA) / "tokenizer-gemma4";
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"})
    fs::copy_file(tok / name, dir / name);

  EngineOptions eo;
  eo.model_dir = dir.string();
  eo.threads = 1;
  eo.precision = Precision::Exact;
  const auto engine = Engine::load(eo);
  EXPECT_EQ(engine->model().eos_token_ids(), (std::vector<int32_t>{1, 106}));  // <eos>, <turn|>
  EXPECT_TRUE(engine->default_sampling().greedy());  // no generation_config.json
}

TEST(GenerationDefaults, Gemma4ItGenerationConfig) {
  // synth writes generation_config.json with the keys and values of the Gemma 4 IT releases.
  synth::SynthOptions o;
  o.preset = "tiny-dense";
  o.vocab = 262144;
  const nlohmann::json g = synth::plan_target(o).generation_config;
  const SamplingParams d = sampling_params_from_generation_config(parse_generation_config(g, "generation_config.json"));
  EXPECT_EQ(d.temperature, 1.0);
  EXPECT_EQ(d.top_k, 64);
  EXPECT_EQ(d.top_p, 0.95);
  EXPECT_EQ(d.min_p, 0.0);
  EXPECT_EQ(d.suppress_tokens, (std::vector<int32_t>{258883, 258882}));
  // A request's own values win, field by field.
  SamplingOverrides r;
  r.top_k = 5;
  const SamplingParams p = apply_overrides(d, r);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_EQ(p.top_p, 0.95);
  EXPECT_EQ(p.temperature, 1.0);
}

}  // namespace
}  // namespace specula
