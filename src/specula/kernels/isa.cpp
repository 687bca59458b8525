#include "specula/kernels/isa.h"

#include <atomic>
#include <cstdlib>

#include "specula/util/error.h"

#if defined(SPECULA_X86) || defined(__x86_64__)
#define SPECULA_HAVE_CPUID 1
#include <cpuid.h>
#endif

namespace specula {

namespace {

#if defined(SPECULA_HAVE_CPUID)
// XCR0: which register states the OS saves on context switch. Using YMM/ZMM registers the OS does
// not save corrupts them silently, so cpuid bits alone are not enough.
uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

CpuFeatures probe() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool avx = c & (1u << 28);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool ymm_saved = (xcr0 & 0x6) == 0x6;    // SSE + AVX state
  const bool zmm_saved = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM0-15 high, ZMM16-31
  if (!ymm_saved) return f;
  const bool fma = c & (1u << 12);
  const bool f16c = c & (1u << 29);
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  unsigned a7 = 0, b7 = 0, c7 = 0, d7 = 0;
  __cpuid_count(7, 0, a7, b7, c7, d7);
  f.fma = fma;
  f.f16c = f16c;
  f.avx2 = b7 & (1u << 5);
  f.bmi2 = b7 & (1u << 8);
  if (zmm_saved) {
    f.avx512f = b7 & (1u << 16);
    f.avx512dq = b7 & (1u << 17);
    f.avx512bw = b7 & (1u << 30);
    f.avx512vl = b7 & (1u << 31);
    f.avx512vnni = c7 & (1u << 11);
    if (a7 >= 1) {
      unsigned a71 = 0, b71 = 0, c71 = 0, d71 = 0;
      __cpuid_count(7, 1, a71, b71, c71, d71);
      f.avx512bf16 = a71 & (1u << 5);
    }
  }
  return f;
}
#else
CpuFeatures probe() { return {}; }
#endif

Isa best_isa(const CpuFeatures& f) {
  // The AVX2 translation unit is built with -mavx2 -mfma -mf16c -mbmi2, the AVX-512 one adds
  // F/BW/VL/DQ (kernels use only those; VNNI/BF16 are optional extras for later).
  const bool avx2 = f.avx2 && f.fma && f.f16c && f.bmi2;
  if (avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) return Isa::Avx512;
  if (avx2) return Isa::Avx2;
  return Isa::Scalar;
}

Isa initial_isa() {
  Isa isa = detected_isa();
  if (const char* env = std::getenv("SPECULA_ISA"); env != nullptr && *env != '\0') {
    Isa cap;
    if (!parse_isa(env, &cap)) {
      fail("SPECULA_ISA='{}' is not a kernel set; expected scalar, avx2 or avx512", env);
    }
    if (cap < isa) isa = cap;
  }
  return isa;
}

std::atomic<int>& active_slot() {
  static std::atomic<int> slot{static_cast<int>(initial_isa())};
  return slot;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = probe();
  return features;
}

std::string cpu_features_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.bmi2, "bmi2");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  return s.empty() ? std::string("none") : s;
}

Isa detected_isa() {
  static const Isa isa = best_isa(cpu_features());
  return isa;
}

Isa active_isa() { return static_cast<Isa>(active_slot().load(std::memory_order_relaxed)); }

void set_active_isa(Isa isa) {
  if (isa > detected_isa()) isa = detected_isa();
  active_slot().store(static_cast<int>(isa), std::memory_order_relaxed);
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

bool parse_isa(std::string_view name, Isa* out) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (name == isa_name(isa)) {
      *out = isa;
      return true;
    }
  }
  return false;
}

}  // namespace specula
