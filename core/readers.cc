// The rating readers: format detection, line splitting and field checks,
// ParseRatings / ReadRatingsFile, and the public text helpers of
// core/readers.h (TrimBlanks, ParsePlainDecimal, the format names). The
// item readers are in core/item_readers.cc, the shared text handling in
// core/read_text.cc.

#include "core/readers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/read_text.h"
#include "core/utf8.h"

namespace rbmrec {
namespace {

using read_text::AV;
using read_text::CheckId;
using read_text::CsvQuoteOpenAfter;
using read_text::InvalidUtf8Reason;
using read_text::IsBlank;
using read_text::IsBlankChar;
using read_text::IsNumber;
using read_text::kMaxRecordBytes;
using read_text::LineReader;
using read_text::Quote;
using read_text::ReadWholeFile;
using read_text::SplitChar;
using read_text::SplitCsvLine;
using read_text::SplitDoubleColon;
using read_text::SplitWhitespace;
using read_text::StripBom;
using read_text::StrtodReadsAll;

constexpr size_t kMaxProblems = 20;

// ------------------------------------------------------------------ ratings

RatingFormat DetectRatingFormat(std::string_view first_line,
                                std::vector<std::string_view>* scratch) {
  if (absl::StrContains(AV(first_line), "::")) {
    return RatingFormat::kMovieLensDat;
  }
  if (absl::StrContains(AV(first_line), '\t')) {
    SplitChar(first_line, '\t', scratch);
    const bool numeric =
        scratch->size() == 4 &&
        std::all_of(scratch->begin(), scratch->end(), IsNumber);
    return numeric ? RatingFormat::kMovieLensTab : RatingFormat::kTsv;
  }
  if (absl::StrContains(AV(first_line), ',')) {
    return absl::StartsWithIgnoreCase(AV(TrimBlanks(first_line)),
                                      "userId,movieId,rating")
               ? RatingFormat::kMovieLensCsv
               : RatingFormat::kCsv;
  }
  return RatingFormat::kWhitespace;
}

// Splits a rating line into *fields (which may point into `owned`); false
// with *reason when a CSV line's quoting is malformed.
bool SplitRatingLine(RatingFormat format, std::string_view line,
                     std::vector<std::string>* owned,
                     std::vector<std::string_view>* fields,
                     std::string* reason) {
  switch (format) {
    case RatingFormat::kMovieLensTab:
    case RatingFormat::kTsv:
      SplitChar(line, '\t', fields);
      return true;
    case RatingFormat::kMovieLensDat:
      SplitDoubleColon(line, fields);
      return true;
    case RatingFormat::kMovieLensCsv:
    case RatingFormat::kCsv:
      return SplitCsvLine(line, owned, fields, reason);
    case RatingFormat::kWhitespace:
    case RatingFormat::kAuto:
      SplitWhitespace(line, fields);
      return true;
  }
  return true;
}

bool NeedsFourFields(RatingFormat format) {
  return format == RatingFormat::kMovieLensTab ||
         format == RatingFormat::kMovieLensDat ||
         format == RatingFormat::kMovieLensCsv;
}

bool FieldCountOk(RatingFormat format, size_t n) {
  return NeedsFourFields(format) ? n == 4 : (n == 3 || n == 4);
}

bool AllowsHeader(RatingFormat format) {
  return format == RatingFormat::kCsv || format == RatingFormat::kTsv ||
         format == RatingFormat::kMovieLensCsv;
}

// Validates the fields of one rating line. On failure sets *reason.
bool CheckRatingFields(RatingFormat format,
                       const std::vector<std::string_view>& f, double* rating,
                       int64_t* timestamp, std::string* reason) {
  const size_t n = f.size();
  if (!FieldCountOk(format, n)) {
    *reason = NeedsFourFields(format)
                  ? absl::StrCat(
                        "expected 4 fields (user, item, rating, timestamp), "
                        "got ",
                        n)
                  : absl::StrCat(
                        "expected 3 or 4 fields (user, item, rating[, "
                        "timestamp]), got ",
                        n);
    return false;
  }
  if (!CheckId(f[0], "user", reason) || !CheckId(f[1], "item", reason)) {
    return false;
  }
  if (!ParsePlainDecimal(f[2], rating)) {
    double loose = 0;
    if (!StrtodReadsAll(f[2], &loose)) {
      *reason = absl::StrCat("rating ", Quote(f[2]), " is not a number");
    } else if (!std::isfinite(loose)) {
      *reason = absl::StrCat("rating ", Quote(f[2]), " is not finite");
    } else {
      *reason = absl::StrCat("rating ", Quote(f[2]),
                             " is not a plain decimal number (such as 4 or "
                             "3.5)");
    }
    return false;
  }
  if (!std::isfinite(*rating)) {
    *reason = absl::StrCat("rating ", Quote(f[2]), " is not finite");
    return false;
  }
  *timestamp = 0;
  if (n == 4) {
    if (!absl::SimpleAtoi(AV(f[3]), timestamp)) {
      *reason = absl::StrCat("timestamp ", Quote(f[3]), " is not an integer");
      return false;
    }
  }
  return true;
}

}  // namespace

// ------------------------------------------------------------------- public

std::string_view TrimBlanks(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && IsBlankChar(s[b])) ++b;
  while (e > b && IsBlankChar(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool ParsePlainDecimal(std::string_view s, double* value) {
  auto digit = [&s](size_t i) {
    return i < s.size() && absl::ascii_isdigit(s[i]);
  };
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  for (; digit(i); ++i) ++digits;
  if (i < s.size() && s[i] == '.') {
    for (++i; digit(i); ++i) ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  if (i != s.size()) return false;
  // The syntax is checked: this is a decimal number, read without regard
  // to the locale (an exponent too large for a double gives an infinity).
  if (absl::SimpleAtod(AV(s), value)) return true;
  const std::string copy(s);
  *value = std::strtod(copy.c_str(), nullptr);
  return true;
}

absl::StatusOr<RatingFormat> ParseRatingFormat(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(AV(name));
  if (lower == "auto") return RatingFormat::kAuto;
  if (lower == "ml100k" || lower == "tab" || lower == "udata") {
    return RatingFormat::kMovieLensTab;
  }
  if (lower == "dat" || lower == "ml1m") return RatingFormat::kMovieLensDat;
  if (lower == "mlcsv") return RatingFormat::kMovieLensCsv;
  if (lower == "csv") return RatingFormat::kCsv;
  if (lower == "tsv") return RatingFormat::kTsv;
  if (lower == "space") return RatingFormat::kWhitespace;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown rating format '", AV(name),
      "'; expected one of auto, ml100k, tab, udata, dat, ml1m, mlcsv, csv, "
      "tsv, space"));
}

std::string_view RatingFormatName(RatingFormat format) {
  switch (format) {
    case RatingFormat::kAuto:
      return "auto";
    case RatingFormat::kMovieLensTab:
      return "ml100k";
    case RatingFormat::kMovieLensDat:
      return "ml1m";
    case RatingFormat::kMovieLensCsv:
      return "mlcsv";
    case RatingFormat::kCsv:
      return "csv";
    case RatingFormat::kTsv:
      return "tsv";
    case RatingFormat::kWhitespace:
      return "space";
  }
  return "unknown";
}

absl::StatusOr<ReadResult> ParseRatingsTo(std::string_view text,
                                          std::string_view name,
                                          const ReadOptions& options,
                                          const RatingSink& sink) {
  const size_t bom = text.size() - StripBom(text).size();
  text = StripBom(text);
  // Most files are valid UTF-8 throughout: then no line needs checking.
  const bool all_utf8 = IsValidUtf8(text);
  ReadResult result;
  std::vector<std::string_view> fields;
  fields.reserve(8);
  std::vector<std::string> owned;

  RatingFormat format = options.format;
  if (format == RatingFormat::kAuto) {
    LineReader probe(text);
    std::string_view line;
    while (probe.Next(&line) && IsBlank(line)) {
    }
    if (IsBlank(line)) return result;  // nothing to detect from
    format = DetectRatingFormat(line, &fields);
  }
  result.format = format;

  const bool csv =
      format == RatingFormat::kCsv || format == RatingFormat::kMovieLensCsv;
  LineReader lines(text);
  std::string_view line;
  std::string reason;
  std::string joined;  // a CSV record of several lines
  bool first = true;
  while (lines.Next(&line)) {
    if (IsBlank(line)) continue;
    // The record: this line, or (CSV) the lines up to the one that closes a
    // quoted field left open, joined with '\n'.
    const int64_t start = lines.number();
    const size_t start_offset = lines.offset();
    int64_t end = start;
    std::string_view record = line;
    if (csv && line.find('"') != std::string_view::npos &&
        CsvQuoteOpenAfter(line, false)) {
      const LineReader after_first = lines;
      joined.assign(line.data(), line.size());
      bool open = true;
      std::string_view next;
      while (open && joined.size() <= kMaxRecordBytes && lines.Next(&next)) {
        joined.push_back('\n');
        joined.append(next.data(), next.size());
        open = CsvQuoteOpenAfter(next, true);
      }
      if (open) {
        // Never closed (or not within a record's size): the first line alone
        // is the malformed record; reading goes on after it.
        lines = after_first;
      } else {
        record = joined;
        end = lines.number();
      }
    }
    double rating = 0;
    int64_t timestamp = 0;
    bool ok = true;
    if (!all_utf8 && FirstInvalidUtf8(record) != std::string_view::npos) {
      if (end == start) {
        reason = InvalidUtf8Reason(record, bom + start_offset);
      } else {
        // The physical line holding the byte, and its offset in the file.
        const size_t at = FirstInvalidUtf8(record);
        const size_t line_start = record.rfind('\n', at) + 1;  // npos + 1 = 0
        const int64_t k = std::count(
            record.begin(), record.begin() + static_cast<ptrdiff_t>(at), '\n');
        size_t offset = start_offset;
        for (int64_t j = 0; j < k; ++j) offset = text.find('\n', offset) + 1;
        const size_t line_end = record.find('\n', at);
        reason = InvalidUtf8Reason(
            record.substr(line_start, line_end == std::string_view::npos
                                          ? std::string_view::npos
                                          : line_end - line_start),
            bom + offset, start + k);
      }
      ok = false;
    } else if (!SplitRatingLine(format, record, &owned, &fields, &reason)) {
      ok = false;
    } else if (first && AllowsHeader(format) &&
               FieldCountOk(format, fields.size()) && !IsNumber(fields[2])) {
      // A header: the first record, with a valid field count and a rating
      // field that is not a number.
      first = false;
      result.header_line = start;
      continue;
    } else {
      ok = CheckRatingFields(format, fields, &rating, &timestamp, &reason);
    }
    first = false;
    if (!ok) {
      if (end > start) {
        absl::StrAppend(&reason, " (the record spans lines ", start, "-", end,
                        ")");
      }
      std::string message = absl::StrCat(AV(name), ":", start, ": ", reason);
      if (!options.lenient) return absl::InvalidArgumentError(message);
      ++result.skipped;
      if (result.problems.size() < kMaxProblems) {
        result.problems.push_back(std::move(message));
      }
      continue;
    }
    sink(RatingView{fields[0], fields[1], rating, timestamp, start});
  }
  return result;
}

absl::StatusOr<ReadResult> ParseRatings(std::string_view text,
                                        std::string_view name,
                                        const ReadOptions& options) {
  std::vector<RawRating> rows;
  rows.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) +
               1);
  absl::StatusOr<ReadResult> result =
      ParseRatingsTo(text, name, options, [&](const RatingView& v) {
        RawRating& row = rows.emplace_back();
        row.user.assign(v.user.data(), v.user.size());
        row.item.assign(v.item.data(), v.item.size());
        row.rating = v.rating;
        row.timestamp = v.timestamp;
        row.line = v.line;
      });
  if (result.ok()) result->rows = std::move(rows);
  return result;
}

absl::StatusOr<ReadResult> ReadRatingsFile(const std::string& path,
                                           const ReadOptions& options) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  return ParseRatings(*text, path, options);
}

absl::StatusOr<ReadResult> ReadRatingsFileTo(const std::string& path,
                                             const ReadOptions& options,
                                             const RatingSink& sink) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  return ParseRatingsTo(*text, path, options, sink);
}

}  // namespace rbmrec
