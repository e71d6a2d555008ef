#include "core/cpu_check.h"

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

}  // namespace rbmrec
