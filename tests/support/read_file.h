#pragma once
// The whole content of a file, read as bytes ("" when it cannot be opened).
#include <fstream>
#include <iterator>
#include <string>

namespace specula::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace specula::test
