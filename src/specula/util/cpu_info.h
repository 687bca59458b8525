#pragma once
// What processor this is, for benchmark reports (numbers are only comparable on one machine).
#include <string>

namespace specula {

// The first "model name" of /proc/cpuinfo, or "unknown".
std::string cpu_model_name();

}  // namespace specula
