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
#include "core/utf8.h"

namespace rbmrec {
namespace {

constexpr size_t kMaxIdBytes = 256;
constexpr size_t kMaxProblems = 20;
// Longest CSV record that spans lines (a quoted field holding line breaks).
// A valid record holds two ids of at most kMaxIdBytes, a rating and a
// timestamp; a quote still open after this many bytes is taken as never
// closed, so a stray quote cannot swallow the rest of a file.
constexpr size_t kMaxRecordBytes = 4096;
// Longest field value quoted verbatim in a message.
constexpr size_t kMaxQuotedBytes = 40;

// ---------------------------------------------------------------- text utils

// Debian's Abseil is built with its own absl::string_view (not an alias of
// std::string_view); convert explicitly at Abseil calls.
absl::string_view AV(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

std::string_view StripBom(std::string_view text) {
  if (absl::StartsWith(AV(text), "\xEF\xBB\xBF")) text.remove_prefix(3);
  return text;
}

bool IsBlankChar(char c) { return c == ' ' || c == '\t'; }

bool IsBlank(std::string_view line) { return TrimBlanks(line).empty(); }

// A field value for a message: 'value', shortened when long.
std::string Quote(std::string_view v) {
  if (v.size() <= kMaxQuotedBytes) return absl::StrCat("'", AV(v), "'");
  return absl::StrCat("'", AV(v.substr(0, kMaxQuotedBytes)), "...'");
}

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
               std::vector<std::string_view>* fields) {
  fields->clear();
  while (true) {
    const size_t at = line.find(sep);
    fields->push_back(TrimBlanks(line.substr(0, at)));
    if (at == std::string_view::npos) return;
    line.remove_prefix(at + 1);
  }
}

// Whether a CSV record is still inside a quoted field at the end of `line`
// (then the record goes on on the next line), when the line starts inside
// one (`in_quotes`) or at the start of a field. Follows SplitCsvLine: only a
// '"' that starts a field opens a quoted field; malformed quoting is left
// for SplitCsvLine to report.
bool CsvQuoteOpenAfter(std::string_view line, bool in_quotes) {
  size_t i = 0;
  while (true) {
    if (in_quotes) {
      const size_t quote = line.find('"', i);
      if (quote == std::string_view::npos) return true;
      if (quote + 1 < line.size() && line[quote + 1] == '"') {
        i = quote + 2;  // "" inside quotes
        continue;
      }
      in_quotes = false;
      i = quote + 1;
    } else {
      while (i < line.size() && IsBlankChar(line[i])) ++i;
      if (i < line.size() && line[i] == '"') {
        in_quotes = true;
        ++i;
        continue;
      }
    }
    const size_t comma = line.find(',', i);
    if (comma == std::string_view::npos) return false;
    i = comma + 1;
  }
}

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
                  std::vector<std::string_view>* fields, std::string* reason) {
  if (line.find('"') == std::string_view::npos) {
    SplitChar(line, ',', fields);
    return true;
  }
  owned->clear();
  size_t i = 0;
  while (true) {
    std::string& field = owned->emplace_back();
    while (i < line.size() && IsBlankChar(line[i])) ++i;
    if (i < line.size() && line[i] == '"') {
      const size_t field_number = owned->size();
      ++i;
      while (true) {
        const size_t quote = line.find('"', i);
        if (quote == std::string_view::npos) {
          *reason = absl::StrCat("field ", field_number,
                                 ": quoted field has no closing quote");
          return false;
        }
        field.append(line.data() + i, quote - i);
        i = quote + 1;
        if (i < line.size() && line[i] == '"') {  // "" inside quotes
          field.push_back('"');
          ++i;
          continue;
        }
        break;
      }
      while (i < line.size() && IsBlankChar(line[i])) ++i;
      if (i < line.size() && line[i] != ',') {
        *reason = absl::StrCat("field ", field_number,
                               ": unexpected character after closing quote");
        return false;
      }
    } else {
      const size_t comma = line.find(',', i);
      const std::string_view raw = line.substr(
          i,
          comma == std::string_view::npos ? std::string_view::npos : comma - i);
      if (raw.find('"') != std::string_view::npos) {
        *reason = absl::StrCat("field ", owned->size(),
                               ": quote inside an unquoted field");
        return false;
      }
      const std::string_view trimmed = TrimBlanks(raw);
      field.assign(trimmed.data(), trimmed.size());
      i = comma == std::string_view::npos ? line.size() : comma;
    }
    if (i >= line.size()) break;
    ++i;  // the ','
  }
  fields->clear();
  for (const std::string& f : *owned) fields->emplace_back(f);
  return true;
}

// Splits on "::", trimming each field.
void SplitDoubleColon(std::string_view line,
                      std::vector<std::string_view>* fields) {
  fields->clear();
  while (true) {
    const size_t at = line.find("::");
    fields->push_back(TrimBlanks(line.substr(0, at)));
    if (at == std::string_view::npos) return;
    line.remove_prefix(at + 2);
  }
}

// Splits on runs of spaces and tabs, ignoring them at both ends.
void SplitWhitespace(std::string_view line,
                     std::vector<std::string_view>* fields) {
  fields->clear();
  size_t i = 0;
  while (true) {
    while (i < line.size() && IsBlankChar(line[i])) ++i;
    if (i == line.size()) return;
    const size_t start = i;
    while (i < line.size() && !IsBlankChar(line[i])) ++i;
    fields->push_back(line.substr(start, i - start));
  }
}

// Whether strtod reads all of `s` as a number: decimal, hex ("0x4"),
// "inf" or "nan". Looser than ParsePlainDecimal: it tells a header field
// ("rating") from a malformed number ("0x4"), which must not pass for a
// header.
bool StrtodReadsAll(std::string_view s, double* value) {
  if (s.empty()) return false;
  const std::string copy(s);
  char* end = nullptr;
  *value = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size();
}

bool IsNumber(std::string_view s) {
  double unused;
  return StrtodReadsAll(s, &unused);
}

// Describes the first invalid UTF-8 byte of `line` (which has one), e.g.
// "invalid UTF-8: byte 0xE9 at column 7 (file offset 1234)"; columns are
// 1-based bytes; `line_offset` is the line's offset in the file. A
// `line_number` > 0 is named too ("at line 3 column 7"), for a record of
// several lines.
std::string InvalidUtf8Reason(std::string_view line, size_t line_offset,
                              int64_t line_number = 0) {
  const size_t at = FirstInvalidUtf8(line);
  return absl::StrFormat(
      "invalid UTF-8: byte 0x%02X at %scolumn %d (file offset %d); convert "
      "the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)",
      static_cast<unsigned char>(line[at]),
      line_number > 0 ? absl::StrCat("line ", line_number, " ") : "", at + 1,
      line_offset + at);
}

// `s` as UTF-8: unchanged when it already is valid UTF-8, else read as
// latin-1 (each byte is the code point) and converted.
std::string ToUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out.push_back(ch);
    } else {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

// Checks an external id: non-empty, at most kMaxIdBytes bytes, valid UTF-8,
// no control characters (U+0000..U+001F, U+007F). Sets *reason and returns
// false otherwise.
bool CheckId(std::string_view id, std::string_view what, std::string* reason) {
  if (id.empty()) {
    *reason = absl::StrCat("empty ", AV(what), " id");
    return false;
  }
  if (id.size() > kMaxIdBytes) {
    *reason = absl::StrCat(AV(what), " id longer than ", kMaxIdBytes, " bytes");
    return false;
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    if (c == '\n') {  // from a quoted CSV field that spans lines
      *reason = absl::StrFormat("%s id contains a line break at byte %d",
                                AV(what), i + 1);
      return false;
    }
    if (c < 0x20 || c == 0x7F) {
      *reason = absl::StrFormat(
          "%s id contains the control character 0x%02X at byte %d", AV(what), c,
          i + 1);
      return false;
    }
  }
  if (!IsValidUtf8(id)) {
    *reason = absl::StrCat(AV(what), " id is not valid UTF-8");
    return false;
  }
  return true;
}

// Reads a whole file into memory.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return absl::Status(absl::ErrnoToStatusCode(e),
                        absl::StrCat("cannot open ", path, ": ",
                                     std::generic_category().message(e)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  std::string data;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    // One spare byte so that the read seeing end-of-file needs no growth.
    data.resize(static_cast<size_t>(st.st_size) + 1);
  }
  size_t used = 0;
  while (true) {
    if (used == data.size()) {
      // Unknown size or the file grew: make room for more.
      data.resize(std::max<size_t>(data.size() * 2, 1 << 16));
    }
    const ssize_t got = ::read(fd, data.data() + used, data.size() - used);
    if (got < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      return absl::Status(absl::ErrnoToStatusCode(e),
                          absl::StrCat("cannot read ", path, ": ",
                                       std::generic_category().message(e)));
    }
    if (got == 0) break;
    used += static_cast<size_t>(got);
  }
  data.resize(used);
  return data;
}

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

// -------------------------------------------------------------------- items

constexpr const char* kMl100kGenres[19] = {
    "unknown",   "Action",   "Adventure",   "Animation", "Children's",
    "Comedy",    "Crime",    "Documentary", "Drama",     "Fantasy",
    "Film-Noir", "Horror",   "Musical",     "Mystery",   "Romance",
    "Sci-Fi",    "Thriller", "War",         "Western"};
constexpr size_t kUItemFields = 5 + 19;

enum class ItemFormat { kUItem, kMoviesDat, kMoviesCsv };

std::string ItemError(std::string_view name, int64_t line,
                      std::string_view reason) {
  return absl::StrCat(AV(name), ":", line, ": ", AV(reason));
}

std::string NormalizeGenres(std::string_view genres) {
  if (genres == "(no genres listed)") return std::string();
  return ToUtf8(genres);
}

// u.item: "id|title|release date|video release date|url|19 genre flags".
bool ParseUItemLine(std::string_view line, std::vector<std::string_view>* f,
                    ItemInfo* info, std::string* reason) {
  SplitChar(line, '|', f);
  if (f->size() != kUItemFields) {
    *reason = absl::StrCat(
        "expected ", kUItemFields,
        " fields (id, title, release date, video release date, url, 19 genre "
        "flags), got ",
        f->size());
    return false;
  }
  if (!CheckId((*f)[0], "item", reason)) return false;
  info->item = std::string((*f)[0]);
  info->title = ToUtf8((*f)[1]);
  info->genres.clear();
  for (size_t g = 0; g < 19; ++g) {
    const std::string_view flag = (*f)[5 + g];
    if (flag == "1") {
      if (!info->genres.empty()) info->genres.push_back('|');
      info->genres += kMl100kGenres[g];
    } else if (flag != "0") {
      *reason = absl::StrCat("genre flag ", kMl100kGenres[g], " is ",
                             Quote(flag), ", expected 0 or 1");
      return false;
    }
  }
  return true;
}

// movies.dat: "id::title::genres".
bool ParseMoviesDatLine(std::string_view line, std::vector<std::string_view>* f,
                        ItemInfo* info, std::string* reason) {
  SplitDoubleColon(line, f);
  if (f->size() != 3) {
    *reason =
        absl::StrCat("expected 3 fields (id, title, genres), got ", f->size());
    return false;
  }
  if (!CheckId((*f)[0], "item", reason)) return false;
  info->item = std::string((*f)[0]);
  info->title = ToUtf8((*f)[1]);
  info->genres = NormalizeGenres((*f)[2]);
  return true;
}

// RFC 4180 records: fields separated by ',', records by "\n" or "\r\n";
// a field in double quotes may hold ',', line breaks and "" for '"'.
class CsvReader {
 public:
  explicit CsvReader(std::string_view text) : text_(text) {}

  // Reads the next non-empty record into *fields. Returns false at the end
  // of the text. On a malformed record sets *error (and returns true).
  bool Next(std::vector<std::string>* fields, std::string* error) {
    error->clear();
    while (pos_ < text_.size()) {
      start_line_ = line_;
      fields->clear();
      ReadRecord(fields, error);
      if (error->empty() && fields->size() == 1 &&
          TrimBlanks((*fields)[0]).empty() && !last_field_quoted_) {
        continue;  // empty line
      }
      return true;
    }
    return false;
  }
  // Line on which the record last returned by Next() starts.
  int64_t start_line() const { return start_line_; }

 private:
  // Reads one record, or sets *error and skips past the bad part.
  void ReadRecord(std::vector<std::string>* fields, std::string* error) {
    while (true) {
      std::string field;
      last_field_quoted_ = false;
      if (pos_ < text_.size() && text_[pos_] == '"') {
        last_field_quoted_ = true;
        ++pos_;
        while (true) {
          const size_t quote = text_.find('"', pos_);
          if (quote == std::string_view::npos) {
            CountLines(pos_, text_.size());
            pos_ = text_.size();
            *error = "unterminated quoted field";
            return;
          }
          CountLines(pos_, quote);
          field.append(text_.substr(pos_, quote - pos_));
          pos_ = quote + 1;
          if (pos_ < text_.size() && text_[pos_] == '"') {
            field.push_back('"');
            ++pos_;
            continue;
          }
          break;
        }
        if (pos_ < text_.size() && text_[pos_] == '\r') ++pos_;
        if (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n') {
          *error = "unexpected character after closing quote";
          SkipLine();
          return;
        }
      } else {
        size_t end = pos_;
        while (end < text_.size() && text_[end] != ',' && text_[end] != '\n') {
          ++end;
        }
        std::string_view raw = text_.substr(pos_, end - pos_);
        if (!raw.empty() && raw.back() == '\r' &&
            (end == text_.size() || text_[end] == '\n')) {
          raw.remove_suffix(1);
        }
        field.assign(raw.data(), raw.size());
        pos_ = end;
      }
      fields->push_back(std::move(field));
      if (pos_ >= text_.size()) return;
      const char sep = text_[pos_++];
      if (sep == '\n') {
        ++line_;
        return;
      }
      // sep == ','
    }
  }

  void CountLines(size_t from, size_t to) {
    line_ += std::count(text_.begin() + static_cast<std::ptrdiff_t>(from),
                        text_.begin() + static_cast<std::ptrdiff_t>(to), '\n');
  }

  void SkipLine() {
    const size_t nl = text_.find('\n', pos_);
    pos_ = nl == std::string_view::npos ? text_.size() : nl + 1;
    if (nl != std::string_view::npos) ++line_;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int64_t line_ = 1;
  int64_t start_line_ = 1;
  bool last_field_quoted_ = false;
};

absl::StatusOr<std::vector<ItemInfo>> ParseMoviesCsv(std::string_view text,
                                                     std::string_view name) {
  std::vector<ItemInfo> items;
  CsvReader reader(text);
  std::vector<std::string> fields;
  std::string error;
  bool header = true;
  while (reader.Next(&fields, &error)) {
    if (!error.empty()) {
      return absl::InvalidArgumentError(
          ItemError(name, reader.start_line(), error));
    }
    if (header) {  // detection saw "movieId," at the start of this record
      header = false;
      continue;
    }
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(ItemError(
          name, reader.start_line(),
          absl::StrCat("expected 3 fields (movieId, title, genres), got ",
                       fields.size())));
    }
    const std::string_view id = TrimBlanks(fields[0]);
    if (!CheckId(id, "item", &error)) {
      return absl::InvalidArgumentError(
          ItemError(name, reader.start_line(), error));
    }
    ItemInfo info;
    info.item = std::string(id);
    info.title = ToUtf8(fields[1]);
    info.genres = NormalizeGenres(TrimBlanks(fields[2]));
    items.push_back(std::move(info));
  }
  return items;
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

absl::StatusOr<ReadResult> ParseRatings(std::string_view text,
                                        std::string_view name,
                                        const ReadOptions& options) {
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
  result.rows.reserve(
      static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1);

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
    RawRating& row = result.rows.emplace_back();
    row.user.assign(fields[0].data(), fields[0].size());
    row.item.assign(fields[1].data(), fields[1].size());
    row.rating = rating;
    row.timestamp = timestamp;
    row.line = start;
  }
  return result;
}

absl::StatusOr<ReadResult> ReadRatingsFile(const std::string& path,
                                           const ReadOptions& options) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  return ParseRatings(*text, path, options);
}

absl::StatusOr<std::vector<ItemInfo>> ParseItems(std::string_view text,
                                                 std::string_view name) {
  text = StripBom(text);
  std::vector<ItemInfo> items;

  LineReader probe(text);
  std::string_view first;
  while (probe.Next(&first) && IsBlank(first)) {
  }
  if (IsBlank(first)) return items;
  ItemFormat format;
  if (absl::StartsWithIgnoreCase(AV(TrimBlanks(first)), "movieId,")) {
    format = ItemFormat::kMoviesCsv;
  } else if (absl::StrContains(AV(first), "::")) {
    format = ItemFormat::kMoviesDat;
  } else if (absl::StrContains(AV(first), '|')) {
    format = ItemFormat::kUItem;
  } else {
    return absl::InvalidArgumentError(ItemError(
        name, probe.number(),
        "unrecognized item file format; expected u.item (id|title|...), "
        "movies.dat (id::title::genres) or movies.csv with header "
        "movieId,title,genres"));
  }
  if (format == ItemFormat::kMoviesCsv) return ParseMoviesCsv(text, name);

  LineReader lines(text);
  std::string_view line;
  std::vector<std::string_view> fields;
  std::string reason;
  while (lines.Next(&line)) {
    if (IsBlank(line)) continue;
    ItemInfo info;
    const bool ok = format == ItemFormat::kUItem
                        ? ParseUItemLine(line, &fields, &info, &reason)
                        : ParseMoviesDatLine(line, &fields, &info, &reason);
    if (!ok) {
      return absl::InvalidArgumentError(
          ItemError(name, lines.number(), reason));
    }
    items.push_back(std::move(info));
  }
  return items;
}

absl::StatusOr<std::vector<ItemInfo>> ReadItemsFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  return ParseItems(*text, path);
}

}  // namespace rbmrec
