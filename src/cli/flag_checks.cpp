#include "cli/flag_checks.h"

#include <cstdio>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "specula/io/config.h"

namespace specula::cli {

CLI::Validator in_range(const limits::IntRange& range) {
  return CLI::Validator([range](std::string& text) { return limits::int_text_error(text, range); },
                        limits::describe(range));
}

CLI::Validator in_range(const limits::RealRange& range) {
  return CLI::Validator([range](std::string& text) { return limits::real_text_error(text, range); },
                        limits::describe(range));
}

CLI::Validator gamma_value() {
  return CLI::Validator([](std::string& text) { return limits::gamma_text_error(text); },
                        fmt::format("auto or {}", limits::describe(limits::kGamma)));
}

void warn_if_threads_above_cores(const char* flag, int threads) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores == 0 || threads <= static_cast<int>(cores)) return;
  std::fputs(fmt::format("warning: {} {} is more than the {} hardware threads of this machine: the extra threads "
                         "share cores and slow every step\n",
                         flag, threads, cores)
                 .c_str(),
             stderr);
}

void check_context_flag(const char* flag, int64_t context, const std::string& model_dir) {
  if (context <= 0) return;
  const std::filesystem::path config_path = std::filesystem::path(model_dir) / "config.json";
  int64_t model_limit = 0;
  try {
    model_limit =
        parse_target_config(read_json_file(config_path.string()), config_path.string()).text.max_position_embeddings;
  } catch (const std::exception&) {
    return;  // the load names what is wrong with the checkpoint
  }
  if (context > model_limit) {
    throw CLI::ValidationError(flag, fmt::format("{} is above the model's limit of {} tokens "
                                                 "(max_position_embeddings in {}; 0 = the model's limit)",
                                                 context, model_limit, config_path.string()));
  }
}

}  // namespace specula::cli
