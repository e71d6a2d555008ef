#ifndef RBMREC_CORE_UTF8_H_
#define RBMREC_CORE_UTF8_H_

// UTF-8 well-formedness (RFC 3629): overlong forms, surrogates (U+D800..
// U+DFFF) and code points above U+10FFFF are ill-formed. Pure functions.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rbmrec {

// The length of the well-formed UTF-8 sequence at the start of `s`: 1 for an
// ASCII byte, 2..4 for a multi-byte sequence, 0 when `s` is empty or does
// not start with a well-formed sequence.
size_t Utf8SequenceLength(std::string_view s);

// The code point of the well-formed sequence of `n` bytes at the start of
// `s`. REQUIRES: n == Utf8SequenceLength(s) > 0.
uint32_t DecodeUtf8(std::string_view s, size_t n);

// The byte offset of the first byte of `s` that does not start a
// well-formed sequence, or std::string_view::npos when all of `s` is
// well-formed.
size_t FirstInvalidUtf8(std::string_view s);

inline bool IsValidUtf8(std::string_view s) {
  return FirstInvalidUtf8(s) == std::string_view::npos;
}

}  // namespace rbmrec

#endif  // RBMREC_CORE_UTF8_H_
