#pragma once
// The --kv-type flag shared by every command that loads a target model.
#include <string>

#include <CLI/CLI.hpp>

namespace specula::cli {

// Adds --kv-type f32|bf16|q8 to `cmd`, stored in `value` (read it with parse_kv_type); any other
// value is a usage error naming the flag and the allowed values.
CLI::Option* add_kv_type_option(CLI::App* cmd, std::string& value);

}  // namespace specula::cli
