#include "cli/bench_draft.h"

#include <cstdio>

#include <fmt/format.h>

#include "specula/model/target_model.h"
#include "specula/spec/draft_benchmark.h"
#include "specula/spec/drafter.h"

namespace specula::cli {

std::string run_draft_bench(const std::string& model_dir, const DraftBenchArgs& args, const std::vector<int>& threads) {
  DraftBenchOptions options;
  options.prompt_tokens = args.prompt_tokens;
  options.generate_tokens = args.generate_tokens;
  options.repeats = args.repeats;
  TargetOptions target_options;
  target_options.rollback_reserve = std::max<int64_t>(target_options.rollback_reserve, options.max_width);
  auto model = TargetModel::load(model_dir, target_options);
  auto drafter = Drafter::load(args.draft_dir, *model);

  std::string md;
  for (int t : threads) {
    ThreadPool pool(t);
    const DraftCosts costs = bench_draft_costs(*model, *drafter, options, pool);
    md += fmt::format("\nDraft and verify costs, {} thread(s), context {} tokens (relative to one plain decode step "
                      "of {:.1f} ms):\n\n| step | ms | x decode |\n|---|---|---|\n| drafter step | {:.2f} | {:.3f} |\n",
                      t, options.prompt_tokens, costs.decode_ms, costs.draft_step_ms, costs.draft_step_relative());
    for (int64_t w = 2; w < static_cast<int64_t>(costs.verify_ms.size()); ++w)
      md += fmt::format("| verify {} rows | {:.1f} | {:.2f} |\n", w, costs.verify_ms[static_cast<size_t>(w)],
                        costs.verify_relative(w));
    std::fputs(md.c_str(), stdout);
    std::fflush(stdout);
    if (args.costs_only) continue;
    const auto runs = bench_controlled_acceptance(*model, *drafter, options, pool);
    std::string table = fmt::format(
        "\nControlled acceptance, {} thread(s), {} generated tokens (random weights: p is imposed, not measured):\n\n"
        "| p | gamma | plain tok/s | spec tok/s | speedup | ideal speedup | drafted | accepted |\n"
        "|---|---|---|---|---|---|---|---|\n",
        t, options.generate_tokens);
    for (const auto& r : runs)
      table += fmt::format("| {:.1f} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {} | {} |\n", r.p, r.gamma,
                           r.plain_tok_per_s, r.spec_tok_per_s, r.speedup, r.ideal_speedup, r.drafted, r.accepted);
    std::fputs(table.c_str(), stdout);
    std::fflush(stdout);
    md += table;
  }
  return md;
}

}  // namespace specula::cli
