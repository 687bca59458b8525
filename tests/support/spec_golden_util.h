#pragma once
// Shared helpers of the drafter / speculative golden tests: the list of golden cases, their
// folders (tests/data/goldens/<case>/{model,drafter,expected.json}) and prompts.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specula/io/config.h"

namespace specula::spec_test {

inline std::filesystem::path golden_root() { return std::filesystem::path(SPECULA_TEST_DATA) / "goldens"; }

// The case with E4B-like layers, 4-bit MLX weights and a drafter, which the CLI tests run.
inline const std::string kE4bLikeQ4Case = (golden_root() / "e4b-like-q4g64-mlx").string();

inline std::vector<int32_t> golden_prompt(const std::string& name) {
  return read_json_file((golden_root() / name / "expected.json").string()).at("prompt").get<std::vector<int32_t>>();
}

inline std::vector<std::string> golden_case_names() {
  std::vector<std::string> cases;
  for (const auto& e : std::filesystem::directory_iterator(golden_root()))
    if (e.is_directory() && std::filesystem::exists(e.path() / "expected.json"))
      cases.push_back(e.path().filename().string());
  std::sort(cases.begin(), cases.end());
  return cases;
}

// gtest parameter names may only hold [A-Za-z0-9_].
inline std::string param_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

}  // namespace specula::spec_test
