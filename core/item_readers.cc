// The item readers: u.item, movies.dat and movies.csv (ParseItems,
// ReadItemsFile; declared in core/readers.h).

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/read_text.h"
#include "core/readers.h"
#include "core/utf8.h"

namespace rbmrec {
namespace {

using read_text::AV;
using read_text::CheckId;
using read_text::IsBlank;
using read_text::LineReader;
using read_text::Quote;
using read_text::ReadWholeFile;
using read_text::SplitChar;
using read_text::SplitDoubleColon;
using read_text::StripBom;
using read_text::ToUtf8;

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
