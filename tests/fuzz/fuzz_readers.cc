// libFuzzer target: the rating-file readers (every format, with and without
// detection, strict and lenient) and the item-file reader, on in-memory text.
//
// Input: byte 0 selects what is parsed, the rest is the file's text.
//   byte0 % 8 == 7: ParseItems (u.item / movies.dat / movies.csv detection);
//   otherwise ParseRatings with format (byte0 % 8) in kAuto..kWhitespace,
//   strict, then lenient.
// Invariants checked (abort on violation):
//   - every accepted row has a non-empty user and item id of at most 256
//     bytes, a finite rating and a 1-based line number within the text,
//     line numbers strictly increasing (a CSV record of several lines is
//     numbered by its first); a header line comes before every row;
//   - an explicit format is reported back unchanged;
//   - strict mode skips nothing; when strict succeeds, lenient returns the
//     same rows with nothing skipped; lenient keeps at most 20 problems and
//     rows + skipped never exceed the text's lines;
//   - items have non-empty ids and titles/genres that are valid UTF-8.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/readers.h"

namespace {

// Aborts with a message: libFuzzer reports the input as a crash.
void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_readers: invariant violated: %s\n", what);
    std::abort();
  }
}

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (size_t j = 1; j <= n; ++j) {
      const auto d = static_cast<unsigned char>(s[i + j]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and values above U+10FFFF are invalid.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
        (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

int64_t CountLines(std::string_view text) {
  int64_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines + 1;  // the last line may lack its '\n'
}

void CheckRows(const rbmrec::ReadResult& r, int64_t lines) {
  int64_t prev_line = 0;
  for (const rbmrec::RawRating& row : r.rows) {
    Check(!row.user.empty() && !row.item.empty(), "empty user or item id");
    Check(row.user.size() <= 256 && row.item.size() <= 256,
          "id longer than 256 bytes");
    Check(std::isfinite(row.rating), "rating not finite");
    Check(row.line > prev_line, "line numbers not strictly increasing");
    Check(row.line <= lines, "line number beyond the text");
    prev_line = row.line;
  }
  Check(r.header_line >= 0 && r.header_line <= lines,
        "header line outside the text");
  Check(r.rows.empty() || r.header_line < r.rows.front().line,
        "header line not before the first row");
  Check(r.skipped >= 0, "negative skipped count");
  Check(static_cast<int64_t>(r.rows.size()) + r.skipped <= lines,
        "more rows plus skipped lines than lines");
  Check(r.problems.size() <= 20, "more than 20 problems kept");
  Check(r.problems.size() <= static_cast<size_t>(r.skipped),
        "more problems than skipped lines");
}

bool SameRows(const rbmrec::ReadResult& a, const rbmrec::ReadResult& b) {
  if (a.rows.size() != b.rows.size() || a.format != b.format) return false;
  for (size_t i = 0; i < a.rows.size(); ++i) {
    const rbmrec::RawRating& x = a.rows[i];
    const rbmrec::RawRating& y = b.rows[i];
    if (x.user != y.user || x.item != y.item || x.line != y.line ||
        !(x.rating == y.rating)) {
      return false;
    }
  }
  return true;
}

void FuzzRatings(rbmrec::RatingFormat format, std::string_view text) {
  const int64_t lines = CountLines(text);
  rbmrec::ReadOptions options;
  options.format = format;
  options.lenient = false;
  const absl::StatusOr<rbmrec::ReadResult> strict =
      rbmrec::ParseRatings(text, "fuzz", options);
  if (strict.ok()) {
    CheckRows(*strict, lines);
    Check(strict->skipped == 0, "strict mode skipped lines");
    if (format != rbmrec::RatingFormat::kAuto) {
      Check(strict->format == format, "explicit format not kept");
    }
  } else {
    Check(!strict.status().message().empty(), "error without a message");
  }
  options.lenient = true;
  const absl::StatusOr<rbmrec::ReadResult> lenient =
      rbmrec::ParseRatings(text, "fuzz", options);
  if (!lenient.ok()) return;
  CheckRows(*lenient, lines);
  if (format != rbmrec::RatingFormat::kAuto) {
    Check(lenient->format == format, "explicit format not kept (lenient)");
  }
  if (strict.ok()) {
    Check(lenient->skipped == 0, "lenient skipped what strict accepted");
    Check(SameRows(*strict, *lenient), "strict and lenient rows differ");
  }
}

void FuzzItems(std::string_view text) {
  const absl::StatusOr<std::vector<rbmrec::ItemInfo>> items =
      rbmrec::ParseItems(text, "fuzz");
  if (!items.ok()) {
    Check(!items.status().message().empty(), "error without a message");
    return;
  }
  Check(static_cast<int64_t>(items->size()) <= CountLines(text),
        "more items than lines");
  for (const rbmrec::ItemInfo& item : *items) {
    Check(!item.item.empty(), "empty item id");
    Check(ValidUtf8(item.title), "title is not valid UTF-8");
    Check(ValidUtf8(item.genres), "genres are not valid UTF-8");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 8;
  const std::string_view text(reinterpret_cast<const char*>(data + 1),
                              size - 1);
  if (mode == 7) {
    FuzzItems(text);
  } else {
    FuzzRatings(static_cast<rbmrec::RatingFormat>(mode), text);
  }
  return 0;
}
