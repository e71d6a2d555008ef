#ifndef RBMREC_CORE_READERS_H_
#define RBMREC_CORE_READERS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ratings.h"

namespace rbmrec {

// Rating file formats. All carry user, item, rating and optionally a
// timestamp (Unix seconds, kept in RawRating::timestamp).
enum class RatingFormat {
  kAuto,          // detect from the file name and the first lines
  kMovieLensTab,  // ML-100k u.data: "user\titem\trating\ttimestamp"
  kMovieLensDat,  // ML-1M ratings.dat: "user::item::rating::timestamp"
  kMovieLensCsv,  // ml-latest ratings.csv: header "userId,movieId,rating,..."
  kCsv,           // generic "user,item,rating[,timestamp]", optional header;
                  // both CSV formats quote per RFC 4180 (see ParseRatings)
  kTsv,           // generic tab-separated, optional header
  kWhitespace,    // space-separated (FilmTrust ratings.txt)
};

// "auto", "ml100k"/"tab"/"udata", "dat"/"ml1m", "mlcsv", "csv", "tsv",
// "space". InvalidArgument listing the accepted names otherwise.
absl::StatusOr<RatingFormat> ParseRatingFormat(std::string_view name);
// The canonical name, accepted by ParseRatingFormat: "auto", "ml100k",
// "ml1m", "mlcsv", "csv", "tsv" or "space".
std::string_view RatingFormatName(RatingFormat format);

struct ReadOptions {
  RatingFormat format = RatingFormat::kAuto;
  // When false (default) the first malformed line fails the read. When true
  // malformed lines are skipped, counted and (the first 20) described.
  bool lenient = false;
};

// A rating as read, with external ids.
struct RawRating {
  std::string user;
  std::string item;
  double rating = 0;
  int64_t timestamp = 0;  // Unix seconds from the file; 0 when it has none
  int64_t line = 0;       // 1-based line number in the source
};

struct ReadResult {
  // The format used (detected); stays kAuto when auto-detection had no
  // non-empty line to look at.
  RatingFormat format = RatingFormat::kAuto;
  std::vector<RawRating> rows;
  // The line of the header record that was skipped; 0 when none.
  int64_t header_line = 0;
  int64_t skipped = 0;                // lenient mode: malformed lines
  std::vector<std::string> problems;  // first 20 "name:line: reason"
};

// Parses rating text. `name` is used in messages ("name:LINE: reason").
// Malformed lines: a line that is not valid UTF-8 (the message gives the
// byte, its 1-based column and its offset in the file: nothing is ever
// passed on or transcoded), wrong field count, empty user/item id, id longer
// than 256 bytes, id with a control character (U+0000..U+001F, U+007F) or a
// line break, rating not a plain decimal number (ParsePlainDecimal: "0x4",
// "inf" and "nan" are refused) or not finite, timestamp not an integer,
// malformed CSV quoting. Empty lines and a trailing newline are fine.
// CSV formats follow RFC 4180: a field in double quotes may hold ',', ""
// (one '"') and line breaks, and its quotes are not part of the value
// ("ok1" -> ok1). A record whose quoted field spans lines is numbered by the
// line it starts on (RawRating::line, messages; a message adds "the record
// spans lines A-B"); a line break inside an id is still malformed. A quote
// not closed by the end of the text, or within 4 KiB of record, makes only
// its first line malformed; reading goes on with the next line.
// A header record is accepted only as the first record of a
// CSV/TSV/ratings.csv file (it is one when its field count is valid and its
// rating field is not a number, not even "0x4" or "inf"); its line is
// ReadResult::header_line. Lines may end in "\r\n"; unquoted fields are
// trimmed of spaces and tabs (TrimBlanks).
// kAuto looks at the first non-empty line: "::" means kMovieLensDat; a tab
// means kMovieLensTab when it has 4 numeric fields, else kTsv; a ',' means
// kMovieLensCsv when it starts with "userId,movieId,rating" (any case), else
// kCsv; anything else is kWhitespace.
// `s` without the spaces and tabs at either end: the rule for every
// unquoted field of a rating file, and for the ids given on the rbmrec
// command line (so an id means the same in a file and as an argument).
std::string_view TrimBlanks(std::string_view s);

// Parses a rating as a plain decimal number: an optional sign, digits with
// an optional '.' and fraction (at least one digit), and an optional
// exponent ("e-1"). Nothing else: no spaces, no hex ("0x4", which strtod
// takes), no "inf" or "nan". False when `s` is not one; a syntactically
// valid number too large for a double sets *value to an infinity.
bool ParsePlainDecimal(std::string_view s, double* value);

absl::StatusOr<ReadResult> ParseRatings(std::string_view text,
                                        std::string_view name,
                                        const ReadOptions& options);
// Reads a file; NotFound / PermissionDenied naming the path when it can't.
absl::StatusOr<ReadResult> ReadRatingsFile(const std::string& path,
                                           const ReadOptions& options);

// A rating as ParseRatingsTo hands it over: user and item view the text (or
// a copy of a quoted CSV field) and are valid only during the call.
struct RatingView {
  std::string_view user;
  std::string_view item;
  double rating = 0;
  int64_t timestamp = 0;
  int64_t line = 0;
};
using RatingSink = std::function<void(const RatingView&)>;

// ParseRatings with each accepted rating handed to `sink`, in file order,
// instead of kept in ReadResult::rows (left empty): the same checks,
// messages, header and lenient counting. For readers that hold the ratings
// more compactly than RawRating (two id strings, a double and two int64s a
// rating). Not lenient, a malformed line ends the parse with its error
// (the ratings before it have been passed).
absl::StatusOr<ReadResult> ParseRatingsTo(std::string_view text,
                                          std::string_view name,
                                          const ReadOptions& options,
                                          const RatingSink& sink);

// ReadRatingsFile through ParseRatingsTo.
absl::StatusOr<ReadResult> ReadRatingsFileTo(const std::string& path,
                                             const ReadOptions& options,
                                             const RatingSink& sink);

// Item titles: ML-100k u.item ("id|title|..."; latin-1, converted to UTF-8),
// ML-1M movies.dat ("id::title::genres"), ml-latest movies.csv (quoted CSV
// with header movieId,title,genres), detected from the content.
// Titles and genres are always valid UTF-8: a field that is not valid UTF-8
// is taken as latin-1 and converted (MovieLens u.item and movies.dat are
// latin-1). Item ids are checked like rating ids (non-empty, <= 256 bytes,
// valid UTF-8, no control characters); a bad one fails with "name:LINE:
// reason". Items are returned in file order.
struct ItemInfo {
  std::string item;
  std::string title;
  // "|"-separated, may be empty ("(no genres listed)" is returned as empty).
  std::string genres;
};
absl::StatusOr<std::vector<ItemInfo>> ReadItemsFile(const std::string& path);
// Parses item file text as ReadItemsFile does; `name` is used in messages
// ("name:LINE: reason").
absl::StatusOr<std::vector<ItemInfo>> ParseItems(std::string_view text,
                                                 std::string_view name);

}  // namespace rbmrec

#endif  // RBMREC_CORE_READERS_H_
