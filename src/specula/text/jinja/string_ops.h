#pragma once
// Python str operations on UTF-8 text, by code point where Python counts code points (len,
// indexing, slicing). Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic
// (no final-sigma or other context-dependent rules); other characters pass through unchanged.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specula::jinja {

std::u32string utf8_to_u32(std::string_view text);
std::string u32_to_utf8(std::u32string_view text);
void append_utf8(std::string& out, char32_t code_point);
size_t code_point_count(std::string_view text);

// Python whitespace (as str.split()/str.strip() without arguments use it), ASCII subset.
bool is_py_space(char c);

std::string py_strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right);
std::vector<std::string> py_split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit);
std::string py_replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count);
std::string py_upper(std::string_view text);
std::string py_lower(std::string_view text);
std::string py_title(std::string_view text);
std::string py_capitalize(std::string_view text);
bool py_is_lower(std::string_view text);
bool py_is_upper(std::string_view text);

// Python's slice index resolution: fills the selected indices of a sequence of `length` items.
std::vector<int64_t> slice_indices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   std::optional<int64_t> step);

}  // namespace specula::jinja
