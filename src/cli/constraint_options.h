#pragma once
// `--json-schema FILE` / `--grammar FILE` of `specula run`: constrained output (grammar/).
#include <string>

#include <CLI/CLI.hpp>

#include "specula/grammar/token_constraint.h"

namespace specula::cli {

struct ConstraintArgs {
  std::string json_schema_file;
  std::string grammar_file;
  bool requested() const { return !json_schema_file.empty() || !grammar_file.empty(); }
};

void add_constraint_options(CLI::App* cmd, ConstraintArgs& args);

// The compiled constraint with the model's token bytes (from its tokenizer.json); throws
// specula::Error naming the file and the problem.
grammar::TokenConstraint load_constraint(const ConstraintArgs& args, const std::string& model_dir);

}  // namespace specula::cli
