#ifndef RBMREC_CORE_READ_TEXT_H_
#define RBMREC_CORE_READ_TEXT_H_

// The text handling the rating and item readers share (core/readers.cc,
// core/item_readers.cc), internal to core/: lines, field splitting (one
// character, "::", whitespace, RFC 4180 CSV), numbers, UTF-8 checks and
// conversion, id checks and reading a whole file.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/readers.h"

namespace rbmrec {
namespace read_text {

inline constexpr size_t kMaxIdBytes = 256;
// Longest CSV record that spans lines (a quoted field holding line breaks).
// A valid record holds two ids of at most kMaxIdBytes, a rating and a
// timestamp; a quote still open after this many bytes is taken as never
// closed, so a stray quote cannot swallow the rest of a file.
inline constexpr size_t kMaxRecordBytes = 4096;
// Longest field value quoted verbatim in a message.
inline constexpr size_t kMaxQuotedBytes = 40;

// Debian's Abseil is built with its own absl::string_view (not an alias of
// std::string_view); convert explicitly at Abseil calls.
inline absl::string_view AV(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

std::string_view StripBom(std::string_view text);

inline bool IsBlankChar(char c) { return c == ' ' || c == '\t'; }

bool IsBlank(std::string_view line);

// A field value for a message: 'value', shortened when long.
std::string Quote(std::string_view v);

// Iterates over the lines of a text; drops "\n" and a "\r" before it.
class LineReader {
 public:
  explicit LineReader(std::string_view text) : text_(text) {}

  // Sets *line to the next line; false at the end of the text.
  bool Next(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    const char* begin = text_.data() + pos_;
    const size_t left = text_.size() - pos_;
    const void* nl = std::memchr(begin, '\n', left);
    const size_t len =
        nl == nullptr
            ? left
            : static_cast<size_t>(static_cast<const char*>(nl) - begin);
    offset_ = pos_;
    pos_ += len + 1;
    ++number_;
    *line = std::string_view(begin, len);
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    return true;
  }
  // 1-based number of the line last returned by Next().
  int64_t number() const { return number_; }
  // Byte offset in the text of the line last returned by Next().
  size_t offset() const { return offset_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  size_t offset_ = 0;
  int64_t number_ = 0;
};

// Splits on a one-character separator, trimming each field.
void SplitChar(std::string_view line, char sep,
               std::vector<std::string_view>* fields);

// Whether a CSV record is still inside a quoted field at the end of `line`
// (then the record goes on on the next line), when the line starts inside
// one (`in_quotes`) or at the start of a field. Follows SplitCsvLine: only a
// '"' that starts a field opens a quoted field; malformed quoting is left
// for SplitCsvLine to report.
bool CsvQuoteOpenAfter(std::string_view line, bool in_quotes);

// Splits one RFC 4180 record: fields separated by ','; a field whose first
// character after spaces and tabs is '"' is quoted: it ends at the next '"'
// that is not doubled, may contain ',' and line breaks (a record of several
// lines, joined with '\n') and holds "" as one '"'; only spaces and tabs may
// follow its closing quote, and the quotes are not part of the value.
// Unquoted fields are trimmed of spaces and tabs.
// *fields point into `line` or into `owned` (which holds unescaped values).
// Returns false with *reason on an unterminated quoted field or text after
// a closing quote.
bool SplitCsvLine(std::string_view line, std::vector<std::string>* owned,
                  std::vector<std::string_view>* fields, std::string* reason);

// Splits on "::", trimming each field.
void SplitDoubleColon(std::string_view line,
                      std::vector<std::string_view>* fields);

// Splits on runs of spaces and tabs, ignoring them at both ends.
void SplitWhitespace(std::string_view line,
                     std::vector<std::string_view>* fields);

// Whether strtod reads all of `s` as a number: decimal, hex ("0x4"),
// "inf" or "nan". Looser than ParsePlainDecimal: it tells a header field
// ("rating") from a malformed number ("0x4"), which must not pass for a
// header.
bool StrtodReadsAll(std::string_view s, double* value);

bool IsNumber(std::string_view s);

// Describes the first invalid UTF-8 byte of `line` (which has one), e.g.
// "invalid UTF-8: byte 0xE9 at column 7 (file offset 1234)"; columns are
// 1-based bytes; `line_offset` is the line's offset in the file. A
// `line_number` > 0 is named too ("at line 3 column 7"), for a record of
// several lines.
std::string InvalidUtf8Reason(std::string_view line, size_t line_offset,
                              int64_t line_number = 0);

// `s` as UTF-8: unchanged when it already is valid UTF-8, else read as
// latin-1 (each byte is the code point) and converted.
std::string ToUtf8(std::string_view s);

// Checks an external id: non-empty, at most kMaxIdBytes bytes, valid UTF-8,
// no control characters (U+0000..U+001F, U+007F). Sets *reason and returns
// false otherwise.
bool CheckId(std::string_view id, std::string_view what, std::string* reason);

// Reads a whole file into memory.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace read_text
}  // namespace rbmrec

#endif  // RBMREC_CORE_READ_TEXT_H_
