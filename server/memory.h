#ifndef RBMREC_SERVER_MEMORY_H_
#define RBMREC_SERVER_MEMORY_H_

// Returning freed heap memory to the operating system.
//
// glibc's malloc keeps memory freed by a thread in that thread's arena and
// gives back only what sits at the top of it. A training job (a new thread,
// tens of MB of buffers) or an online publish (a serialized model copy) frees
// large blocks in the middle of arenas, so without help the server's RSS
// ratchets up job after job although nothing is leaked. The server calls
// ReleaseFreeMemory() after such bursts, and LimitMallocArenas() at start:
// glibc creates up to 8 arenas per core, one per thread that allocates
// concurrently, and memory freed in one arena cannot serve another's
// allocations, so many arenas hold many partly used heaps.

#include <cstdlib>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace rbmrec::server {

// Returns free pages of every malloc arena to the OS (glibc malloc_trim);
// a no-op elsewhere. Costs about a millisecond per 100 MB of heap; call it
// after a burst of large frees, not per request. Thread-safe.
inline void ReleaseFreeMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// Caps glibc's malloc arenas at one per core (at least 2), unless the
// operator set MALLOC_ARENA_MAX. Call once at start, before other threads.
inline void LimitMallocArenas() {
#if defined(__GLIBC__)
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return;
  const unsigned cores = std::thread::hardware_concurrency();
  mallopt(M_ARENA_MAX, static_cast<int>(cores > 2 ? cores : 2));
#endif
}

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_MEMORY_H_
