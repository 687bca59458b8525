#include "cli/constraint_options.h"

#include <climits>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/text_prompt.h"
#include "specula/engine/token_vocabulary.h"
#include "specula/grammar/gbnf_parser.h"
#include "specula/grammar/json_schema.h"
#include "specula/util/error.h"

namespace specula::cli {
namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

grammar::Grammar compile(const ConstraintArgs& args) {
  if (!args.grammar_file.empty()) {
    try {
      return grammar::parse_gbnf(read_text_file(args.grammar_file));
    } catch (const Error& e) {
      fail("{}: {}", args.grammar_file, e.what());
    }
  }
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(read_text_file(args.json_schema_file));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", args.json_schema_file, e.what());
  }
  try {
    return grammar::grammar_from_json_schema(schema);
  } catch (const Error& e) {
    fail("{}: {}", args.json_schema_file, e.what());
  }
}

}  // namespace

void add_constraint_options(CLI::App* cmd, ConstraintArgs& args) {
  CLI::Option* schema = cmd->add_option("--json-schema", args.json_schema_file,
                                        "constrain the output to JSON matching this JSON Schema file");
  CLI::Option* gbnf = cmd->add_option("--grammar", args.grammar_file, "constrain the output to this GBNF grammar file");
  schema->excludes(gbnf);
}

grammar::TokenConstraint load_constraint(const ConstraintArgs& args, const std::string& model_dir) {
  grammar::TokenConstraint c;
  c.grammar = std::make_shared<const grammar::Grammar>(compile(args));
  const text::Tokenizer tokenizer = load_model_tokenizer(model_dir);
  c.vocabulary = build_token_vocabulary(tokenizer, INT64_MAX);
  return c;
}

}  // namespace specula::cli
