#include "core/cpu_check.h"

#include <cstdio>

namespace rbmrec {

std::string CpuSupportProblem() {
#if defined(__x86_64__) && defined(__AVX2__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    return "this rbmrec build needs a CPU with AVX2 and FMA (x86-64-v3); "
           "rebuild with cmake -DRBMREC_ISA=baseline for older CPUs";
  }
#endif
  return "";
}

bool CpuSupported(const char* program) {
  const std::string problem = CpuSupportProblem();
  if (problem.empty()) return true;
  std::fprintf(stderr, "%s: %s\n", program, problem.c_str());
  return false;
}

}  // namespace rbmrec
