#ifndef RBMREC_SERVER_MEMORY_H_
#define RBMREC_SERVER_MEMORY_H_

// Returning freed heap memory to the operating system.
//
// glibc's malloc keeps memory freed by a thread in that thread's arena and
// gives back only what sits at the top of it. A training job (a new thread,
// tens of MB of buffers) or an online publish (a serialized model copy) frees
// large blocks in the middle of arenas, so without help the server's RSS
// ratchets up job after job although nothing is leaked. The server calls
// ReleaseFreeMemory() after such bursts.

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

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_MEMORY_H_
