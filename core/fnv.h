#ifndef RBMREC_CORE_FNV_H_
#define RBMREC_CORE_FNV_H_

// FNV-1a 64, the one hash of the project's own bytes: the model file's
// checksum (core/model_file.h) and Model::MfFingerprint.

#include <cstddef>
#include <cstdint>

namespace rbmrec {

inline constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ULL;

// FNV-1a 64 of n bytes at data, continuing from h (kFnv1a64Basis to start).
inline uint64_t Fnv1a64(const void* data, size_t n,
                        uint64_t h = kFnv1a64Basis) {
  const unsigned char* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace rbmrec

#endif  // RBMREC_CORE_FNV_H_
