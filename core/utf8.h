#ifndef RBMREC_CORE_UTF8_H_
#define RBMREC_CORE_UTF8_H_

// UTF-8 well-formedness (RFC 3629): overlong forms, surrogates (U+D800..
// U+DFFF) and code points above U+10FFFF are ill-formed. And the code points
// that text shown to people (ids, titles) may not hold. Pure functions.
//
// Header-only: the store (which does not link rbmrec_core) checks ids with
// FirstTextFlaw too, so that its rules and the server's are one.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace rbmrec {

// The length of the well-formed UTF-8 sequence at the start of `s`: 1 for an
// ASCII byte, 2..4 for a multi-byte sequence, 0 when `s` is empty or does
// not start with a well-formed sequence.
inline size_t Utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  const auto c = static_cast<unsigned char>(s[0]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
    return 0;
  }
  return n;
}

// The code point of the well-formed sequence of `n` bytes at the start of
// `s`. REQUIRES: n == Utf8SequenceLength(s) > 0.
inline uint32_t DecodeUtf8(std::string_view s, size_t n) {
  const auto c = static_cast<unsigned char>(s[0]);
  if (n == 1) return c;
  uint32_t cp = c & (n == 2 ? 0x1Fu : n == 3 ? 0x0Fu : 0x07u);
  for (size_t i = 1; i < n; ++i) {
    cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3Fu);
  }
  return cp;
}

// The byte offset of the first byte of `s` that does not start a
// well-formed sequence, or std::string_view::npos when all of `s` is
// well-formed.
inline size_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // The ASCII fast path: most ids and lines are plain ASCII.
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(s.substr(i));
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

inline bool IsValidUtf8(std::string_view s) {
  return FirstInvalidUtf8(s) == std::string_view::npos;
}

// Code points that act on how the text around them is shown instead of
// showing as a character.
enum class CodePointKind {
  kOrdinary,
  // C0 (U+0000..U+001F), DEL (U+007F) and C1 (U+0080..U+009F; U+009B is
  // the 8-bit CSI that starts terminal escape sequences).
  kControl,
  // U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR: line breaks.
  kSeparator,
  // Scoped bidirectional formatting: the embeddings and overrides
  // U+202A..U+202E (LRE, RLE, PDF, LRO, RLO) and the isolates
  // U+2066..U+2069 (LRI, RLI, FSI, PDI). An unterminated one reorders the
  // text after it, past the end of the field (the "Trojan Source" trick).
  kBidiFormatting,
  // The zero-width marks U+200E LRM, U+200F RLM and U+061C ALM: they set
  // the direction of neutral characters next to them and have no scope.
  kBidiMark,
};

constexpr CodePointKind KindOf(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) return CodePointKind::kControl;
  if (cp < 0x061C) return CodePointKind::kOrdinary;
  if (cp == 0x2028 || cp == 0x2029) return CodePointKind::kSeparator;
  if ((cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069)) {
    return CodePointKind::kBidiFormatting;
  }
  if (cp == 0x200E || cp == 0x200F || cp == 0x061C) {
    return CodePointKind::kBidiMark;
  }
  return CodePointKind::kOrdinary;
}

// What a kind of text may hold, beyond being well-formed UTF-8:
//   kId:    ordinary code points only (no kind above but kOrdinary). Ids
//           name things, are compared byte for byte and echoed in messages
//           and logs; nothing in them may be invisible or act on the text
//           around them.
//   kTitle: also the bidirectional marks (LRM, RLM, ALM), which titles
//           mixing right-to-left and left-to-right words may need and which
//           reach no further than their neighbours; never controls,
//           separators or scoped bidirectional formatting.
enum class TextRules { kId, kTitle };

// The first flaw of a text under its rules: an ill-formed sequence or a
// code point it may not hold.
struct TextFlaw {
  size_t byte = std::string_view::npos;  // where it starts; npos: none
  bool ill_formed = false;  // else code_point is the one not allowed
  uint32_t code_point = 0;
  CodePointKind kind = CodePointKind::kOrdinary;

  bool found() const { return byte != std::string_view::npos; }
};

inline TextFlaw FirstTextFlaw(std::string_view s, TextRules rules) {
  TextFlaw flaw;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 1;
    uint32_t cp = c;
    if (c >= 0x80) {
      n = Utf8SequenceLength(s.substr(i));
      if (n == 0) {
        flaw.byte = i;
        flaw.ill_formed = true;
        return flaw;
      }
      cp = DecodeUtf8(s.substr(i), n);
    }
    const CodePointKind kind = KindOf(cp);
    if (kind != CodePointKind::kOrdinary &&
        !(rules == TextRules::kTitle && kind == CodePointKind::kBidiMark)) {
      flaw.byte = i;
      flaw.code_point = cp;
      flaw.kind = kind;
      return flaw;
    }
    i += n;
  }
  return flaw;
}

// The flaw in words, after "contains": "the control character U+001B at
// byte 3", "the line separator U+2028 at byte 0", "the bidirectional
// formatting character U+202E at byte 5", "invalid UTF-8 at byte 2".
// REQUIRES: flaw.found().
inline std::string DescribeTextFlaw(const TextFlaw& flaw) {
  char text[128];
  if (flaw.ill_formed) {
    std::snprintf(text, sizeof(text), "invalid UTF-8 at byte %zu", flaw.byte);
    return text;
  }
  const char* what = "the character";
  switch (flaw.kind) {
    case CodePointKind::kControl:
      what = "the control character";
      break;
    case CodePointKind::kSeparator:
      what = flaw.code_point == 0x2028 ? "the line separator"
                                       : "the paragraph separator";
      break;
    case CodePointKind::kBidiFormatting:
      what = "the bidirectional formatting character";
      break;
    case CodePointKind::kBidiMark:
      what = "the bidirectional mark";
      break;
    case CodePointKind::kOrdinary:
      break;
  }
  std::snprintf(text, sizeof(text), "%s U+%04X at byte %zu", what,
                static_cast<unsigned>(flaw.code_point), flaw.byte);
  return text;
}

}  // namespace rbmrec

#endif  // RBMREC_CORE_UTF8_H_
