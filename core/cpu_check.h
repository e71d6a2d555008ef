#ifndef RBMREC_CORE_CPU_CHECK_H_
#define RBMREC_CORE_CPU_CHECK_H_

#include <string>

namespace rbmrec {

// Empty when this CPU can run the instruction set the binary was built for
// (see RBMREC_ISA in CMakeLists.txt); otherwise a message saying what is
// missing and how to rebuild. Call first thing in main().
std::string CpuSupportProblem();

// CpuSupportProblem() for main(): prints "PROGRAM: problem" to stderr and
// returns false when there is one.
bool CpuSupported(const char* program);

}  // namespace rbmrec

#endif  // RBMREC_CORE_CPU_CHECK_H_
