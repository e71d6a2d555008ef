#include "core/readers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rbmrec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

ReadOptions Options(RatingFormat format = RatingFormat::kAuto,
                    bool lenient = false) {
  ReadOptions options;
  options.format = format;
  options.lenient = lenient;
  return options;
}

ReadResult MustParse(std::string_view text,
                     RatingFormat format = RatingFormat::kAuto) {
  auto result = ParseRatings(text, "test", Options(format));
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : ReadResult();
}

// The message of a strict parse that must fail.
std::string ParseError(std::string_view text,
                       RatingFormat format = RatingFormat::kAuto) {
  auto result = ParseRatings(text, "f.txt", Options(format));
  EXPECT_FALSE(result.ok()) << "parsed: " << text;
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  return Message(result.status());
}

// A file under testing::TempDir() with a name unique to this process (ctest
// may run tests of several build trees at once), removed at scope exit.
class TempFile {
 public:
  TempFile(const std::string& name, std::string_view content)
      : path_(testing::TempDir() + "/readers_test_" +
              std::to_string(::getpid()) + "_" + name) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    EXPECT_TRUE(out) << path_;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ------------------------------------------------------------ format names

TEST(ReadersFormatNameTest, ParsesEveryName) {
  const std::pair<const char*, RatingFormat> names[] = {
      {"auto", RatingFormat::kAuto},
      {"ml100k", RatingFormat::kMovieLensTab},
      {"tab", RatingFormat::kMovieLensTab},
      {"udata", RatingFormat::kMovieLensTab},
      {"dat", RatingFormat::kMovieLensDat},
      {"ml1m", RatingFormat::kMovieLensDat},
      {"mlcsv", RatingFormat::kMovieLensCsv},
      {"csv", RatingFormat::kCsv},
      {"tsv", RatingFormat::kTsv},
      {"space", RatingFormat::kWhitespace},
      {"CSV", RatingFormat::kCsv},
  };
  for (const auto& [name, format] : names) {
    auto parsed = ParseRatingFormat(name);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    EXPECT_EQ(*parsed, format) << name;
  }
}

TEST(ReadersFormatNameTest, NameRoundTrips) {
  for (RatingFormat format :
       {RatingFormat::kAuto, RatingFormat::kMovieLensTab,
        RatingFormat::kMovieLensDat, RatingFormat::kMovieLensCsv,
        RatingFormat::kCsv, RatingFormat::kTsv, RatingFormat::kWhitespace}) {
    auto parsed = ParseRatingFormat(RatingFormatName(format));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, format);
  }
}

TEST(ReadersFormatNameTest, UnknownNameListsTheAcceptedOnes) {
  auto parsed = ParseRatingFormat("xml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(parsed.status()), HasSubstr("'xml'"));
  EXPECT_THAT(Message(parsed.status()), HasSubstr("auto, ml100k"));
  EXPECT_THAT(Message(parsed.status()), HasSubstr("space"));
}

// ----------------------------------------------------------- auto-detection

TEST(ReadersDetectTest, MovieLensTab) {
  const ReadResult r = MustParse("196\t242\t3\t881250949\n186\t302\t3\t8917\n");
  EXPECT_EQ(r.format, RatingFormat::kMovieLensTab);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].user, "196");
  EXPECT_EQ(r.rows[0].item, "242");
  EXPECT_EQ(r.rows[0].rating, 3.0);
  EXPECT_EQ(r.rows[0].line, 1);
  EXPECT_EQ(r.rows[1].user, "186");
  EXPECT_EQ(r.rows[1].line, 2);
}

TEST(ReadersDetectTest, MovieLensDat) {
  const ReadResult r = MustParse("1::1193::5::978300760\n1::661::3::9783\n");
  EXPECT_EQ(r.format, RatingFormat::kMovieLensDat);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].item, "1193");
  EXPECT_EQ(r.rows[0].rating, 5.0);
  EXPECT_EQ(r.rows[1].item, "661");
}

TEST(ReadersDetectTest, MovieLensCsvWithHeader) {
  const ReadResult r = MustParse(
      "userId,movieId,rating,timestamp\n1,1,4.0,964982703\n1,3,3.5,9649\n");
  EXPECT_EQ(r.format, RatingFormat::kMovieLensCsv);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].user, "1");
  EXPECT_EQ(r.rows[0].line, 2);
  EXPECT_EQ(r.rows[1].rating, 3.5);
  EXPECT_EQ(r.rows[1].line, 3);
}

TEST(ReadersDetectTest, MovieLensCsvHeaderIsCaseInsensitive) {
  const ReadResult r = MustParse("USERID,MovieId,Rating,Timestamp\n1,2,3,4\n");
  EXPECT_EQ(r.format, RatingFormat::kMovieLensCsv);
  EXPECT_EQ(r.rows.size(), 1u);
}

TEST(ReadersDetectTest, GenericCsv) {
  const ReadResult r = MustParse("alice,matrix,4.5\nbob,alien,2\n");
  EXPECT_EQ(r.format, RatingFormat::kCsv);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].user, "alice");
  EXPECT_EQ(r.rows[0].item, "matrix");
  EXPECT_EQ(r.rows[0].rating, 4.5);
}

TEST(ReadersDetectTest, TsvWhenNotFourNumericFields) {
  EXPECT_EQ(MustParse("u1\ti1\t4\n").format, RatingFormat::kTsv);
  EXPECT_EQ(MustParse("1\t2\t4\n").format, RatingFormat::kTsv);
  EXPECT_EQ(MustParse("user\titem\trating\ttime\n1\t2\t3\t4\n").format,
            RatingFormat::kTsv);
}

TEST(ReadersDetectTest, Whitespace) {
  const ReadResult r = MustParse("1 1 2\n1  2 4\n 2 3   3.5 \n");
  EXPECT_EQ(r.format, RatingFormat::kWhitespace);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[1].item, "2");
  EXPECT_EQ(r.rows[2].user, "2");
  EXPECT_EQ(r.rows[2].rating, 3.5);
}

TEST(ReadersDetectTest, LooksPastLeadingEmptyLines) {
  const ReadResult r = MustParse("\n\n1::2::3::4\n");
  EXPECT_EQ(r.format, RatingFormat::kMovieLensDat);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].line, 3);
}

TEST(ReadersDetectTest, EmptyTextHasNoRows) {
  for (std::string_view text : {"", "\n", "\r\n\n  \n"}) {
    const ReadResult r = MustParse(text);
    EXPECT_EQ(r.format, RatingFormat::kAuto);
    EXPECT_TRUE(r.rows.empty());
    EXPECT_EQ(r.skipped, 0);
  }
}

TEST(ReadersDetectTest, ExplicitFormatOverridesDetection) {
  // Looks like CSV, but read as whitespace-separated: one field per line.
  EXPECT_THAT(ParseError("1,2,3\n", RatingFormat::kWhitespace),
              HasSubstr("got 1"));
  const ReadResult r = MustParse("1\t2\t3\t4\n", RatingFormat::kTsv);
  EXPECT_EQ(r.format, RatingFormat::kTsv);
  EXPECT_EQ(r.rows.size(), 1u);
}

// --------------------------------------------------------- lines and fields

TEST(ReadersParseTest, HandlesCrlf) {
  const ReadResult r = MustParse(
      "userId,movieId,rating,timestamp\r\n1,1,4.0,964982703\r\n2,5,1,1\r\n");
  EXPECT_EQ(r.format, RatingFormat::kMovieLensCsv);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[1].user, "2");
  EXPECT_EQ(r.rows[1].item, "5");

  const ReadResult tab = MustParse("1\t2\t3\t4\r\n5\t6\t2\t8\r\n");
  EXPECT_EQ(tab.format, RatingFormat::kMovieLensTab);
  ASSERT_EQ(tab.rows.size(), 2u);
  EXPECT_EQ(tab.rows[0].item, "2");

  const ReadResult space = MustParse("1 2 3\r\n");
  ASSERT_EQ(space.rows.size(), 1u);
  EXPECT_EQ(space.rows[0].rating, 3.0);
}

TEST(ReadersParseTest, SkipsEmptyLinesAndKeepsLineNumbers) {
  const ReadResult r = MustParse("1,2,3\n\n   \n4,5,1\n\n");
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].line, 1);
  EXPECT_EQ(r.rows[1].line, 4);
}

TEST(ReadersParseTest, LastLineWithoutNewline) {
  const ReadResult r = MustParse("1,2,3\n4,5,1");
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[1].user, "4");
  EXPECT_EQ(r.rows[1].rating, 1.0);
}

TEST(ReadersParseTest, TrimsSpacesAroundFields) {
  const ReadResult r =
      MustParse("  u 1 ,\ti1 , 4.5 , 12 \n", RatingFormat::kCsv);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].user, "u 1");
  EXPECT_EQ(r.rows[0].item, "i1");
  EXPECT_EQ(r.rows[0].rating, 4.5);
}

TEST(ReadersParseTest, SkipsUtf8ByteOrderMark) {
  const ReadResult r = MustParse("\xEF\xBB\xBFuser,item,rating\nu,i,2\n");
  EXPECT_EQ(r.format, RatingFormat::kCsv);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].user, "u");
}

TEST(ReadersParseTest, AcceptsIdsUpTo256Bytes) {
  const std::string id(256, 'x');
  const ReadResult r = MustParse(id + "," + id + ",3\n");
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].user, id);
}

TEST(ReadersParseTest, RatingFormsAccepted) {
  const ReadResult r = MustParse("a,b,+4\na,c,-1\na,d,2.50\na,e,1e0\n");
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.rows[0].rating, 4.0);
  EXPECT_EQ(r.rows[1].rating, -1.0);
  EXPECT_EQ(r.rows[2].rating, 2.5);
  EXPECT_EQ(r.rows[3].rating, 1.0);
}

// ------------------------------------------------------------------ headers

TEST(ReadersHeaderTest, GenericCsvHeaderIsSkipped) {
  const ReadResult r = MustParse("user,item,rating\nu1,i1,5\n");
  EXPECT_EQ(r.format, RatingFormat::kCsv);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].line, 2);
}

TEST(ReadersHeaderTest, TsvHeaderIsSkipped) {
  const ReadResult r = MustParse("user\titem\trating\nu1\ti1\t5\n");
  EXPECT_EQ(r.format, RatingFormat::kTsv);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].user, "u1");
}

TEST(ReadersHeaderTest, HeaderOnlyAllowedOnFirstLine) {
  EXPECT_EQ(ParseError("u1,i1,5\nuser,item,rating\n"),
            "f.txt:2: rating 'rating' is not a number");
  EXPECT_EQ(ParseError("u,i,r\nuser,item,rating\n"),
            "f.txt:2: rating 'rating' is not a number");
}

TEST(ReadersHeaderTest, NoHeaderForMovieLensTabDatOrWhitespace) {
  EXPECT_EQ(ParseError("user\titem\trating\ttime\n1\t2\t3\t4\n",
                       RatingFormat::kMovieLensTab),
            "f.txt:1: rating 'rating' is not a number");
  EXPECT_EQ(ParseError("user::item::rating::time\n"),
            "f.txt:1: rating 'rating' is not a number");
  EXPECT_EQ(ParseError("user item rating\n1 2 3\n"),
            "f.txt:1: rating 'rating' is not a number");
}

TEST(ReadersHeaderTest, FirstLineWithWrongFieldCountIsNoHeader) {
  EXPECT_EQ(ParseError("user,item\n1,2,3\n"),
            "f.txt:1: expected 3 or 4 fields (user, item, rating[, "
            "timestamp]), got 2");
}

TEST(ReadersHeaderTest, SingleLineWithTextRatingIsTakenAsHeader) {
  const ReadResult r = MustParse("1,2,x\n");
  EXPECT_EQ(r.format, RatingFormat::kCsv);
  EXPECT_TRUE(r.rows.empty());
}

TEST(ReadersHeaderTest, HeaderOnlyFileHasNoRows) {
  const ReadResult r = MustParse("userId,movieId,rating,timestamp\n");
  EXPECT_EQ(r.format, RatingFormat::kMovieLensCsv);
  EXPECT_TRUE(r.rows.empty());
  EXPECT_EQ(r.header_line, 1);  // so a caller can say "only a header"
  EXPECT_EQ(MustParse("\n\nuser,item,rating\nu,i,4\n").header_line, 3);
  EXPECT_EQ(MustParse("u,i,4\n").header_line, 0);
}

// ------------------------------------------------------------ malformed lines

TEST(ReadersMalformedTest, WrongFieldCountFourFieldFormats) {
  EXPECT_EQ(ParseError("1\t2\t3\t4\n1\t2\t3\n"),
            "f.txt:2: expected 4 fields (user, item, rating, timestamp), "
            "got 3");
  EXPECT_EQ(ParseError("1::2::3::4::5\n", RatingFormat::kMovieLensDat),
            "f.txt:1: expected 4 fields (user, item, rating, timestamp), "
            "got 5");
  EXPECT_EQ(ParseError("userId,movieId,rating,timestamp\n1,2,3\n"),
            "f.txt:2: expected 4 fields (user, item, rating, timestamp), "
            "got 3");
}

TEST(ReadersMalformedTest, WrongFieldCountGenericFormats) {
  EXPECT_EQ(ParseError("1,2,3\n1,2\n"),
            "f.txt:2: expected 3 or 4 fields (user, item, rating[, "
            "timestamp]), got 2");
  EXPECT_THAT(ParseError("1,2,3,4,5\n"), HasSubstr("got 5"));
  EXPECT_THAT(ParseError("a\tb\tc\td\te\n"), HasSubstr("got 5"));
  EXPECT_THAT(ParseError("1 2 3\n1 2 3 4 5\n"), HasSubstr("f.txt:2: "));
  EXPECT_THAT(ParseError("1 2 3\n1 2 3 4 5\n"), HasSubstr("got 5"));
}

TEST(ReadersMalformedTest, EmptyIds) {
  EXPECT_EQ(ParseError("1,2,3\n,2,3\n"), "f.txt:2: empty user id");
  EXPECT_EQ(ParseError("1,2,3\n1, ,3\n"), "f.txt:2: empty item id");
  EXPECT_EQ(ParseError("\t2\t3\t4\n", RatingFormat::kMovieLensTab),
            "f.txt:1: empty user id");
  EXPECT_EQ(ParseError("1::::3::4\n"), "f.txt:1: empty item id");
}

TEST(ReadersMalformedTest, LongIds) {
  const std::string long_id(257, 'x');
  EXPECT_EQ(ParseError(long_id + ",i,3\n"),
            "f.txt:1: user id longer than 256 bytes");
  EXPECT_EQ(ParseError("u," + long_id + ",3\n"),
            "f.txt:1: item id longer than 256 bytes");
}

TEST(ReadersMalformedTest, BadRatings) {
  EXPECT_EQ(ParseError("1,2,3\n1,2,abc\n"),
            "f.txt:2: rating 'abc' is not a number");
  EXPECT_EQ(ParseError("1,2,3\n1,2,\n"), "f.txt:2: rating '' is not a number");
  EXPECT_EQ(ParseError("1,2,3\n1,2,4x\n"),
            "f.txt:2: rating '4x' is not a number");
  EXPECT_EQ(ParseError("1\t2\tnan\t4\n", RatingFormat::kMovieLensTab),
            "f.txt:1: rating 'nan' is not finite");
  EXPECT_EQ(ParseError("1,2,3\n1,2,inf\n"),
            "f.txt:2: rating 'inf' is not finite");
  EXPECT_EQ(ParseError("1,2,3\n1,2,-Infinity\n"),
            "f.txt:2: rating '-Infinity' is not finite");
  EXPECT_EQ(ParseError("1,2,3\n1,2,1e999\n"),
            "f.txt:2: rating '1e999' is not finite");
}

TEST(ReadersMalformedTest, RatingsMustBePlainDecimalNumbers) {
  // strtod-style parsers take hex ("0x4" as 4); a rating file never means it.
  EXPECT_EQ(ParseError("1,2,3\n1,2,0x4\n"),
            "f.txt:2: rating '0x4' is not a plain decimal number (such as 4 "
            "or 3.5)");
  EXPECT_EQ(ParseError("1\t2\t0X1p2\t4\n", RatingFormat::kMovieLensTab),
            "f.txt:1: rating '0X1p2' is not a plain decimal number (such as 4 "
            "or 3.5)");
  EXPECT_EQ(ParseError("1 2 0x4\n", RatingFormat::kWhitespace),
            "f.txt:1: rating '0x4' is not a plain decimal number (such as 4 "
            "or 3.5)");
  EXPECT_EQ(ParseError("1::2::0x4::0\n"),
            "f.txt:1: rating '0x4' is not a plain decimal number (such as 4 "
            "or 3.5)");
  // Not taken for a header on the first line either.
  EXPECT_EQ(ParseError("1,2,0x4\n", RatingFormat::kCsv),
            "f.txt:1: rating '0x4' is not a plain decimal number (such as 4 "
            "or 3.5)");
  EXPECT_EQ(ParseError("1,2,NaN\n"), "f.txt:1: rating 'NaN' is not finite");
  EXPECT_EQ(ParseError("1,2,INF\n"), "f.txt:1: rating 'INF' is not finite");
  EXPECT_EQ(ParseError("1,2,3\n1,2,.\n"),
            "f.txt:2: rating '.' is not a number");
  EXPECT_EQ(ParseError("1,2,3\n1,2,4.5.1\n"),
            "f.txt:2: rating '4.5.1' is not a number");
  EXPECT_EQ(ParseError("1,2,3\n1,2,+-4\n"),
            "f.txt:2: rating '+-4' is not a number");
  // The plain forms.
  const ReadResult r = MustParse("a,b,4.\na,c,.5\na,d,007\na,e,-0.5E+1\n");
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.rows[0].rating, 4.0);
  EXPECT_EQ(r.rows[1].rating, 0.5);
  EXPECT_EQ(r.rows[2].rating, 7.0);
  EXPECT_EQ(r.rows[3].rating, -5.0);
}

TEST(ReadersMalformedTest, PlainDecimalSyntax) {
  double v = 0;
  for (const char* ok : {"4", "+4", "-1", "3.5", "4.", ".5", "1e0", "2.5E-1"}) {
    EXPECT_TRUE(ParsePlainDecimal(ok, &v)) << ok;
  }
  EXPECT_TRUE(ParsePlainDecimal("2.5E-1", &v));
  EXPECT_EQ(v, 0.25);
  for (const char* bad :
       {"", " 4", "4 ", "0x4", "0X4", "0x1p2", "inf", "nan", "-infinity", ".",
        "e5", "1e", "1e+", "+", "--1", "4,5", "1_000", "\xd9\xa4"}) {
    EXPECT_FALSE(ParsePlainDecimal(bad, &v)) << bad;
  }
}

TEST(ReadersMalformedTest, LongValuesAreShortenedInMessages) {
  const std::string junk(1000, 'z');
  const std::string message = ParseError("1,2,3\n1,2," + junk + "\n");
  EXPECT_THAT(message, HasSubstr("...' is not a number"));
  EXPECT_LT(message.size(), 100u);
}

TEST(ReadersMalformedTest, BadTimestamps) {
  EXPECT_EQ(ParseError("1\t2\t3\tx\n"),
            "f.txt:1: timestamp 'x' is not an integer");
  EXPECT_EQ(ParseError("1,2,3,4\n1,2,3,1.5\n"),
            "f.txt:2: timestamp '1.5' is not an integer");
  EXPECT_EQ(ParseError("1::2::3::\n"),
            "f.txt:1: timestamp '' is not an integer");
}

TEST(ReadersMalformedTest, ErrorNamesTheSource) {
  auto result = ParseRatings("1,2,3\n1,2,x\n", "data/ratings.csv", Options());
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(Message(result.status()), StartsWith("data/ratings.csv:2: "));
}

// ----------------------------------------------------------------- lenient

TEST(ReadersLenientTest, SkipsCountsAndDescribes) {
  const std::string text =
      "1,1,5\n"
      "1,2\n"
      ",3,4\n"
      "2,2,abc\n"
      "2,3,nan\n"
      "2,4,1,t\n"
      "3,3,2\n";
  auto result = ParseRatings(text, "x.csv", Options(RatingFormat::kAuto, true));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->skipped, 5);
  ASSERT_EQ(result->rows.size(), 2u);
  EXPECT_EQ(result->rows[0].line, 1);
  EXPECT_EQ(result->rows[1].line, 7);
  EXPECT_THAT(
      result->problems,
      ElementsAre(
          "x.csv:2: expected 3 or 4 fields (user, item, rating[, timestamp]), "
          "got 2",
          "x.csv:3: empty user id", "x.csv:4: rating 'abc' is not a number",
          "x.csv:5: rating 'nan' is not finite",
          "x.csv:6: timestamp 't' is not an integer"));
}

TEST(ReadersLenientTest, KeepsOnlyTwentyProblems) {
  std::string text = "1,1,5\n";
  for (int i = 0; i < 50; ++i) text += "bad line\n";
  text += "2,2,4\n";
  auto result = ParseRatings(text, "x", Options(RatingFormat::kCsv, true));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->skipped, 50);
  EXPECT_EQ(result->problems.size(), 20u);
  EXPECT_EQ(result->problems.front(),
            "x:2: expected 3 or 4 fields (user, item, rating[, timestamp]), "
            "got 1");
  EXPECT_THAT(result->problems.back(), StartsWith("x:21: "));
  EXPECT_EQ(result->rows.size(), 2u);
}

TEST(ReadersLenientTest, StrictFailsOnFirstProblem) {
  auto result = ParseRatings("1,1,5\n1,2\n,3,4\n", "x", Options());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(result.status()), StartsWith("x:2: expected 3 or 4"));
}

// ------------------------------------------------------------------- files

TEST(ReadersRatingsFileTest, ReadsAFile) {
  std::string text;
  for (int i = 0; i < 1000; ++i) {
    text += std::to_string(i % 37) + "\t" + std::to_string(i) + "\t" +
            std::to_string(1 + i % 5) + "\t88125094" + std::to_string(i % 10) +
            "\n";
  }
  const TempFile file("u.data", text);
  const std::string& path = file.path();
  auto result = ReadRatingsFile(path, ReadOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->format, RatingFormat::kMovieLensTab);
  ASSERT_EQ(result->rows.size(), 1000u);
  EXPECT_EQ(result->rows[999].user, std::to_string(999 % 37));
  EXPECT_EQ(result->rows[999].item, "999");
  EXPECT_EQ(result->rows[999].rating, 1.0 + 999 % 5);
  EXPECT_EQ(result->rows[999].line, 1000);
}

TEST(ReadersRatingsFileTest, MessagesNameThePath) {
  const TempFile file("bad.csv", "1,2,3\n1,2,x\n");
  const std::string& path = file.path();
  auto result = ReadRatingsFile(path, ReadOptions());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(Message(result.status()), path + ":2: rating 'x' is not a number");
}

TEST(ReadersRatingsFileTest, MissingFileIsNotFound) {
  const std::string path = testing::TempDir() + "/readers_test_missing.csv";
  auto result = ReadRatingsFile(path, ReadOptions());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(result.status()), StartsWith("cannot open " + path));
  EXPECT_THAT(Message(result.status()), HasSubstr("No such file"));
}

TEST(ReadersRatingsFileTest, UnreadableFileIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root can read any file";
  const TempFile file("secret.csv", "1,2,3\n");
  const std::string& path = file.path();
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  auto result = ReadRatingsFile(path, ReadOptions());
  ::chmod(path.c_str(), 0644);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(Message(result.status()), HasSubstr(path));
}

TEST(ReadersRatingsFileTest, DirectoryIsAnError) {
  auto result = ReadRatingsFile(testing::TempDir(), ReadOptions());
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(Message(result.status()), HasSubstr(testing::TempDir()));
}

TEST(ReadersRatingsFileTest, EmptyFile) {
  const TempFile file("empty.txt", "");
  const std::string& path = file.path();
  auto result = ReadRatingsFile(path, ReadOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->rows.empty());
}

// ------------------------------------------------------------------- items

TEST(ReadersItemsTest, UItemWithGenresAndLatin1) {
  const std::string text =
      "1|Toy Story (1995)|01-Jan-1995||http://x|0|0|0|1|1|1|0|0|0|0|0|0|0|0|"
      "0|0|0|0|0\n"
      "2|Cit\xe9 des enfants perdus (1995)|01-Jan-1995||http://y|0|0|0|0|0|0|"
      "0|0|0|0|0|0|0|0|0|1|0|0|1\n"
      "267|unknown||||1|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0\n";
  auto items = ParseItems(text, "u.item");
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 3u);
  EXPECT_EQ((*items)[0].item, "1");
  EXPECT_EQ((*items)[0].title, "Toy Story (1995)");
  EXPECT_EQ((*items)[0].genres, "Animation|Children's|Comedy");
  EXPECT_EQ((*items)[1].title, "Cit\xc3\xa9 des enfants perdus (1995)");
  EXPECT_EQ((*items)[1].genres, "Sci-Fi|Western");
  EXPECT_EQ((*items)[2].item, "267");
  EXPECT_EQ((*items)[2].genres, "unknown");
}

TEST(ReadersItemsTest, UItemErrors) {
  auto short_line = ParseItems("1|Title|x|y|z|0|1\n", "u.item");
  ASSERT_FALSE(short_line.ok());
  EXPECT_EQ(short_line.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(short_line.status()),
              StartsWith("u.item:1: expected 24 fields"));
  EXPECT_THAT(Message(short_line.status()), HasSubstr("got 7"));

  auto bad_flag =
      ParseItems("\n|T||||0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0\n", "u.item");
  ASSERT_FALSE(bad_flag.ok());
  EXPECT_EQ(Message(bad_flag.status()), "u.item:2: empty item id");

  auto flag =
      ParseItems("5|T||||0|2|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0\n", "u.item");
  ASSERT_FALSE(flag.ok());
  EXPECT_EQ(Message(flag.status()),
            "u.item:1: genre flag Action is '2', expected 0 or 1");
}

TEST(ReadersItemsTest, MoviesDat) {
  const std::string text =
      "1::Toy Story (1995)::Animation|Children's|Comedy\r\n"
      "2::Cit\xe9 (1995)::Drama\r\n"
      "3::Caf\xc3\xa9 (2000)::(no genres listed)\r\n";
  auto items = ParseItems(text, "movies.dat");
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 3u);
  EXPECT_EQ((*items)[0].item, "1");
  EXPECT_EQ((*items)[0].title, "Toy Story (1995)");
  EXPECT_EQ((*items)[0].genres, "Animation|Children's|Comedy");
  EXPECT_EQ((*items)[1].title, "Cit\xc3\xa9 (1995)");  // latin-1 converted
  EXPECT_EQ((*items)[2].title, "Caf\xc3\xa9 (2000)");  // UTF-8 kept
  EXPECT_EQ((*items)[2].genres, "");
}

TEST(ReadersItemsTest, MoviesDatErrors) {
  auto items = ParseItems("1::A::Drama\n2::B\n", "movies.dat");
  ASSERT_FALSE(items.ok());
  EXPECT_EQ(Message(items.status()),
            "movies.dat:2: expected 3 fields (id, title, genres), got 2");
}

TEST(ReadersItemsTest, MoviesCsvWithQuotes) {
  const std::string text =
      "movieId,title,genres\r\n"
      "1,Toy Story (1995),Adventure|Animation\r\n"
      "11,\"American President, The (1995)\",Comedy|Drama\r\n"
      "\r\n"
      "12,\"The \"\"Great\"\" One\",(no genres listed)\r\n"
      "13,\"Two\nLines\",Drama\n"
      "14,\"Caf\xc3\xa9\",\"Drama\"";
  auto items = ParseItems(text, "movies.csv");
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 5u);
  EXPECT_EQ((*items)[0].item, "1");
  EXPECT_EQ((*items)[0].title, "Toy Story (1995)");
  EXPECT_EQ((*items)[0].genres, "Adventure|Animation");
  EXPECT_EQ((*items)[1].item, "11");
  EXPECT_EQ((*items)[1].title, "American President, The (1995)");
  EXPECT_EQ((*items)[1].genres, "Comedy|Drama");
  EXPECT_EQ((*items)[2].title, "The \"Great\" One");
  EXPECT_EQ((*items)[2].genres, "");
  EXPECT_EQ((*items)[3].title, "Two\nLines");
  EXPECT_EQ((*items)[4].title, "Caf\xc3\xa9");
  EXPECT_EQ((*items)[4].genres, "Drama");
}

TEST(ReadersItemsTest, MoviesCsvErrors) {
  auto count = ParseItems("movieId,title,genres\n1,A,Drama\n\n2,B\n", "m.csv");
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(Message(count.status()),
            "m.csv:4: expected 3 fields (movieId, title, genres), got 2");

  auto unterminated =
      ParseItems("movieId,title,genres\n1,\"A,Drama\n2,B,C\n", "m.csv");
  ASSERT_FALSE(unterminated.ok());
  EXPECT_EQ(Message(unterminated.status()),
            "m.csv:2: unterminated quoted field");

  auto after_quote =
      ParseItems("movieId,title,genres\n1,\"A\"x,Drama\n", "m.csv");
  ASSERT_FALSE(after_quote.ok());
  EXPECT_EQ(Message(after_quote.status()),
            "m.csv:2: unexpected character after closing quote");

  // Line numbers count the line breaks inside quoted fields.
  auto later =
      ParseItems("movieId,title,genres\n1,\"A\nB\",Drama\n,C,D\n", "m.csv");
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(Message(later.status()), "m.csv:4: empty item id");
}

TEST(ReadersItemsTest, UnrecognizedFormat) {
  auto items = ParseItems("\nhello world\n", "x.txt");
  ASSERT_FALSE(items.ok());
  EXPECT_EQ(items.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(items.status()),
              StartsWith("x.txt:2: unrecognized item file format"));
}

TEST(ReadersItemsTest, EmptyTextHasNoItems) {
  auto items = ParseItems("\n\n", "x");
  ASSERT_TRUE(items.ok()) << items.status();
  EXPECT_TRUE(items->empty());
}

TEST(ReadersItemsFileTest, ReadsEachKind) {
  const TempFile uitem_file(
      "u.item",
      "7|Tw\xe9lve|01-Jan-1995||u|0|0|0|0|0|0|0|0|1|0|0|0|0|0|0|0|0|0|0\n");
  const TempFile dat_file("movies.dat", "7::Tw\xe9lve (1995)::Drama|War\n");
  const TempFile csv_file("movies.csv",
                          "movieId,title,genres\n7,\"Twelve, The\",Drama\n");
  const std::string& uitem = uitem_file.path();
  const std::string& dat = dat_file.path();
  const std::string& csv = csv_file.path();
  for (const std::string& path : {uitem, dat, csv}) {
    auto items = ReadItemsFile(path);
    ASSERT_TRUE(items.ok()) << path << ": " << items.status();
    ASSERT_EQ(items->size(), 1u) << path;
    EXPECT_EQ((*items)[0].item, "7");
    EXPECT_THAT((*items)[0].genres, StartsWith("Drama"));
  }
  EXPECT_EQ((*ReadItemsFile(uitem))[0].title, "Tw\xc3\xa9lve");
  EXPECT_EQ((*ReadItemsFile(dat))[0].title, "Tw\xc3\xa9lve (1995)");
  EXPECT_EQ((*ReadItemsFile(dat))[0].genres, "Drama|War");
  EXPECT_EQ((*ReadItemsFile(csv))[0].title, "Twelve, The");
}

TEST(ReadersItemsFileTest, ErrorsNameThePath) {
  const TempFile file("bad.dat", "1::A\n");
  const std::string& path = file.path();
  auto items = ReadItemsFile(path);
  ASSERT_FALSE(items.ok());
  EXPECT_THAT(Message(items.status()), StartsWith(path + ":1: expected 3"));

  const std::string missing = testing::TempDir() + "/readers_test_nope.item";
  auto none = ReadItemsFile(missing);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(none.status()), StartsWith("cannot open " + missing));
}

}  // namespace
}  // namespace rbmrec

namespace rbmrec {
namespace {

// ------------------------------------------- UTF-8, control bytes, quoting

TEST(ReadersUtf8Test, InvalidUtf8IsRejectedWithLineColumnAndOffset) {
  // Line 3 starts at byte 16; the bad byte is its 2nd (0-based offset 17).
  const std::string text =
      "1\t2\t3\t0\n1\t3\t4\t0\n1\xff\t4\t5\t0\n5\t6\t1\t0\n";
  const std::string message = ParseError(text, RatingFormat::kMovieLensTab);
  EXPECT_THAT(message, StartsWith("f.txt:3: invalid UTF-8: byte 0xFF at "
                                  "column 2 (file offset 17)"));
}

TEST(ReadersUtf8Test, OffsetCountsTheByteOrderMark) {
  const std::string message = ParseError(
      "\xEF\xBB\xBF"
      "a\xe9,b,4\n",
      RatingFormat::kCsv);
  EXPECT_THAT(message, StartsWith("f.txt:1: invalid UTF-8: byte 0xE9 at "
                                  "column 2 (file offset 4)"));
}

TEST(ReadersUtf8Test, TruncatedAndOverlongSequencesAreInvalid) {
  EXPECT_THAT(ParseError("a,b\xc3,4\n", RatingFormat::kCsv),
              HasSubstr("byte 0xC3 at column 4"));
  EXPECT_THAT(ParseError("a,\xc0\xaf,4\n", RatingFormat::kCsv),
              HasSubstr("byte 0xC0 at column 3"));
  // Surrogate U+D800 encoded in UTF-8.
  EXPECT_THAT(ParseError("a,\xed\xa0\x80,4\n", RatingFormat::kCsv),
              HasSubstr("byte 0xED at column 3"));
}

TEST(ReadersUtf8Test, ValidMultibyteIdsAreKept) {
  const ReadResult r = MustParse(
      "Jos\xc3\xa9,\xe2\x82\xac"
      "1,4\n",
      RatingFormat::kCsv);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].user, "Jos\xc3\xa9");
  EXPECT_EQ(r.rows[0].item,
            "\xe2\x82\xac"
            "1");
}

TEST(ReadersUtf8Test, LenientSkipsAndCountsInvalidLines) {
  auto result = ParseRatings("1\t2\t3\t0\n\xfe\t2\t3\t0\n4\t5\t1\t0\n", "f",
                             Options(RatingFormat::kMovieLensTab, true));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->rows.size(), 2u);
  EXPECT_EQ(result->skipped, 1);
  ASSERT_EQ(result->problems.size(), 1u);
  EXPECT_THAT(result->problems[0], StartsWith("f:2: invalid UTF-8"));
}

TEST(ReadersControlTest, IdsWithControlCharactersAreRejected) {
  EXPECT_EQ(ParseError("a\x1b[31m,b,4\n", RatingFormat::kCsv),
            "f.txt:1: user id contains the control character 0x1B at byte 2");
  EXPECT_EQ(ParseError("a,b\x7f,4\n", RatingFormat::kCsv),
            "f.txt:1: item id contains the control character 0x7F at byte 2");
  EXPECT_EQ(ParseError(std::string("a,b\0c,4\n", 8), RatingFormat::kCsv),
            "f.txt:1: item id contains the control character 0x00 at byte 2");
  // A CR inside a line (not before the newline) is a control character too.
  EXPECT_THAT(ParseError("a\rb,c,4\n", RatingFormat::kCsv),
              HasSubstr("control character 0x0D"));
}

TEST(ReadersCsvTest, QuotesAreNotPartOfIds) {
  const ReadResult r = MustParse(
      "user,item,rating\n\"ok1\",\"i,1\",4\n\"say \"\"hi\"\"\",x, 5 \n",
      RatingFormat::kCsv);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].user, "ok1");
  EXPECT_EQ(r.rows[0].item, "i,1");
  EXPECT_EQ(r.rows[0].rating, 4);
  EXPECT_EQ(r.rows[1].user, "say \"hi\"");
  EXPECT_EQ(r.rows[1].item, "x");
  EXPECT_EQ(r.rows[1].rating, 5);
}

TEST(ReadersCsvTest, QuotedFieldsKeepInnerSpacesAndQuotedRatingParses) {
  const ReadResult r =
      MustParse(" \" a b \" ,i,\"3.5\",\"99\"\n", RatingFormat::kCsv);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].user, " a b ");
  EXPECT_EQ(r.rows[0].rating, 3.5);
  EXPECT_EQ(r.rows[0].timestamp, 99);
}

TEST(ReadersCsvTest, MalformedQuotingIsRejected) {
  EXPECT_EQ(ParseError("\"abc,i,4\n", RatingFormat::kCsv),
            "f.txt:1: field 1: quoted field has no closing quote");
  EXPECT_EQ(ParseError("\"a\"b,i,4\n", RatingFormat::kCsv),
            "f.txt:1: field 1: unexpected character after closing quote");
  EXPECT_EQ(ParseError("u,a\"b,4\n", RatingFormat::kCsv),
            "f.txt:1: field 2: quote inside an unquoted field");
}

TEST(ReadersCsvTest, AQuotedFieldMaySpanLines) {
  // RFC 4180: a quoted field holds line breaks. The record counts from the
  // line it starts on, and later records keep their own line numbers.
  const ReadResult r =
      MustParse("\"user\nid\",\"item\r\nid\",rating\r\nu1,i1,4\r\nu2,i2,5\n",
                RatingFormat::kCsv);
  EXPECT_EQ(r.header_line, 1);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].user, "u1");
  EXPECT_EQ(r.rows[0].line, 4);
  EXPECT_EQ(r.rows[1].line, 5);
  // An id with a line break breaks the id rule (no control characters): one
  // bad record, named by its first line, and the next record is read as is.
  const std::string text = "u1,i1,4\n\"u\n2\",i2,5\nu3,\"i\n\n3\",2\nu4,i4,1\n";
  EXPECT_EQ(ParseError(text, RatingFormat::kCsv),
            "f.txt:2: user id contains a line break at byte 2 (the record "
            "spans lines 2-3)");
  auto lenient = ParseRatings(text, "x.csv", Options(RatingFormat::kCsv, true));
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_EQ(lenient->skipped, 2);
  EXPECT_THAT(lenient->problems,
              ElementsAre("x.csv:2: user id contains a line break at byte 2 "
                          "(the record spans lines 2-3)",
                          "x.csv:4: item id contains a line break at byte 2 "
                          "(the record spans lines 4-6)"));
  ASSERT_EQ(lenient->rows.size(), 2u);
  EXPECT_EQ(lenient->rows[0].line, 1);
  EXPECT_EQ(lenient->rows[1].user, "u4");
  EXPECT_EQ(lenient->rows[1].line, 7);
}

TEST(ReadersCsvTest, AnUnclosedQuoteFailsItsLineAndReadingGoesOn) {
  // No closing quote up to the end of the file: that first line is the bad
  // record; the lines after it are records of their own.
  const std::string text = "u1,i1,4\n\"u2,i2,5\nu3,i3,3\n";
  EXPECT_EQ(ParseError(text, RatingFormat::kCsv),
            "f.txt:2: field 1: quoted field has no closing quote");
  auto lenient = ParseRatings(text, "x.csv", Options(RatingFormat::kCsv, true));
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_EQ(lenient->skipped, 1);
  ASSERT_EQ(lenient->rows.size(), 2u);
  EXPECT_EQ(lenient->rows[1].user, "u3");
  EXPECT_EQ(lenient->rows[1].line, 3);
  // An open quote that would swallow more than a record can hold (ids are at
  // most 256 bytes) is unclosed too, not a record of thousands of lines.
  std::string many = "\"u0,i,4\n";
  for (int i = 1; i < 2000; ++i) many += "u" + std::to_string(i) + ",i,4\n";
  many += "\",i,4\n";
  auto bounded = ParseRatings(many, "x.csv", Options(RatingFormat::kCsv, true));
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_EQ(bounded->rows.size(), 1999u);
  EXPECT_EQ(bounded->skipped, 2);
  EXPECT_EQ(bounded->rows[0].line, 2);
}

TEST(ReadersCsvTest, MovieLensCsvWithQuotes) {
  const ReadResult r =
      MustParse("userId,movieId,rating,timestamp\n1,\"31\",2.5,1260759144\n",
                RatingFormat::kAuto);
  EXPECT_EQ(r.format, RatingFormat::kMovieLensCsv);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].item, "31");
}

TEST(ReadersTimestampTest, TimestampsAreKept) {
  const ReadResult tab = MustParse("196\t242\t3\t881250949\n");
  ASSERT_EQ(tab.rows.size(), 1u);
  EXPECT_EQ(tab.rows[0].timestamp, 881250949);
  const ReadResult dat = MustParse("1::1193::5::978300760\n");
  EXPECT_EQ(dat.rows[0].timestamp, 978300760);
  const ReadResult csv = MustParse("a,b,4\nc,d,5,17\n", RatingFormat::kCsv);
  EXPECT_EQ(csv.rows[0].timestamp, 0);  // none in the file
  EXPECT_EQ(csv.rows[1].timestamp, 17);
}

TEST(ReadersItemsTest, ItemIdsAreCheckedLikeRatingIds) {
  auto control = ParseItems("1\x1b::T::Drama\n", "movies.dat");
  ASSERT_FALSE(control.ok());
  EXPECT_EQ(Message(control.status()),
            "movies.dat:1: item id contains the control character 0x1B at "
            "byte 2");
  auto latin1 = ParseItems("1::T::Drama\n\xe9::T::Drama\n", "movies.dat");
  ASSERT_FALSE(latin1.ok());
  EXPECT_EQ(Message(latin1.status()),
            "movies.dat:2: item id is not valid UTF-8");
}

}  // namespace
}  // namespace rbmrec
