#pragma once
// Run-time choice of the kernel set from CPU features. The default build targets baseline x86-64;
// AVX2 and AVX-512 kernels live in their own translation units and are called only when the CPU
// (and OS) support them. SPECULA_ISA=scalar|avx2|avx512 in the environment caps the choice.
#include <string>
#include <string_view>

namespace specula {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

Isa detected_isa();                  // the best set this CPU supports (ignores overrides)
Isa active_isa();                    // what kernels use now
void set_active_isa(Isa isa);        // for tests/benchmarks; clamps to detected_isa()
std::string_view isa_name(Isa isa);  // "scalar", "avx2", "avx512"
bool parse_isa(std::string_view name, Isa* out);

// CPU features relevant to the kernels, each true only when the OS also saves the register state
// (xgetbv). For benchmarks, logs and the fast precision mode (VNNI / BF16 dot products).
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
};
const CpuFeatures& cpu_features();
std::string cpu_features_string();  // e.g. "avx2 fma f16c bmi2 avx512f ... avx512bf16"

}  // namespace specula
