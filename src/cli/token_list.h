#pragma once
// Parsing of `--tokens 2,105,...` for the commands that take token ids (no tokenizer yet).
#include <cstdint>
#include <string>
#include <vector>

namespace specula::cli {

// Comma-separated decimal ids (spaces allowed). Throws CLI::ValidationError (a usage error, exit 2)
// naming the offending entry; range checks against the vocabulary happen in the model.
std::vector<int32_t> parse_token_list(const std::string& text);

}  // namespace specula::cli
