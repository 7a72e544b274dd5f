// Index checks for accessors that take indices (records, snapshots, the
// cache's blocks): on in Debug builds and wherever KVSCOPE_INDEX_CHECKS is
// defined, compiled out in Release. CMakeLists.txt defines it in the
// sanitizer builds (KVSCOPE_SANITIZE, KVSCOPE_TSAN: `make test` runs both),
// together with libstdc++'s own operator[] checks. An index outside its range
// is a bug in kvscope, never bad input (inputs are validated where they are
// read), so it aborts like assert with the values.
#pragma once

#include <cstdio>
#include <cstdlib>

#if !defined(NDEBUG) || defined(KVSCOPE_INDEX_CHECKS)
#define KVSCOPE_CHECK_INDEX(what, i, n)                                                                          \
  do {                                                                                                           \
    const long long kvscope_i_ = static_cast<long long>(i), kvscope_n_ = static_cast<long long>(n);              \
    if (kvscope_i_ < 0 || kvscope_i_ >= kvscope_n_) {                                                            \
      std::fprintf(stderr, "%s:%d: index check failed: %s = %lld, expected 0..%lld\n", __FILE__, __LINE__, what, \
                   kvscope_i_, kvscope_n_ - 1);                                                                  \
      std::abort();                                                                                              \
    }                                                                                                            \
  } while (0)
#else
#define KVSCOPE_CHECK_INDEX(what, i, n) \
  do {                                  \
  } while (0)
#endif
