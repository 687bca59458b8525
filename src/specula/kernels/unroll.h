#pragma once
// SPECULA_UNROLL(n): forced unrolling of a kernel's inner loop. Sanitizer builds define
// SPECULA_ROLLED_LOOPS and leave the loops rolled: clang instruments every access of an unrolled
// body and then optimizes functions of thousands of them (the AVX-512 fast kernel alone took
// about ten minutes to compile under ASan). Unrolling never reorders the arithmetic, so the
// values are the same either way.
#if defined(SPECULA_ROLLED_LOOPS)
#define SPECULA_UNROLL(n)
#else
#define SPECULA_PRAGMA(text) _Pragma(#text)
#define SPECULA_UNROLL(n) SPECULA_PRAGMA(GCC unroll n)
#endif
