#include "core/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace rbmrec {
namespace {

TEST(Utf8Test, SequenceLengths) {
  EXPECT_EQ(Utf8SequenceLength(""), 0u);
  EXPECT_EQ(Utf8SequenceLength("a"), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xC3\xA9"), 2u);          // é
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xAC"), 3u);      // €
  EXPECT_EQ(Utf8SequenceLength("\xF0\x9F\x98\x80"), 4u);  // 😀
  EXPECT_EQ(Utf8SequenceLength("\xC3"), 0u);              // truncated
  EXPECT_EQ(Utf8SequenceLength("\xC0\xAF"), 0u);          // overlong
  EXPECT_EQ(Utf8SequenceLength("\xE0\x80\xAF"), 0u);      // overlong
  EXPECT_EQ(Utf8SequenceLength("\xED\xA0\x80"), 0u);      // surrogate
  EXPECT_EQ(Utf8SequenceLength("\xF4\x90\x80\x80"), 0u);  // > U+10FFFF
  EXPECT_EQ(Utf8SequenceLength("\x80"), 0u);              // continuation
  EXPECT_EQ(Utf8SequenceLength("\xE9t"), 0u);             // Latin-1 é
}

TEST(Utf8Test, Decode) {
  EXPECT_EQ(DecodeUtf8("a", 1), 0x61u);
  EXPECT_EQ(DecodeUtf8("\xC3\xA9", 2), 0xE9u);
  EXPECT_EQ(DecodeUtf8("\xE2\x82\xAC", 3), 0x20ACu);
  EXPECT_EQ(DecodeUtf8("\xF0\x9F\x98\x80", 4), 0x1F600u);
}

TEST(Utf8Test, FirstInvalid) {
  EXPECT_EQ(FirstInvalidUtf8(""), std::string_view::npos);
  EXPECT_EQ(FirstInvalidUtf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(FirstInvalidUtf8("caf\xC3\xA9 \xE2\x82\xAC"),
            std::string_view::npos);
  EXPECT_EQ(FirstInvalidUtf8("caf\xE9"), 3u);
  EXPECT_EQ(FirstInvalidUtf8(std::string_view("a\0b\xFF", 4)), 3u);
  EXPECT_TRUE(IsValidUtf8("\xC3\xA9"));
  EXPECT_FALSE(IsValidUtf8("\xC3"));
}

TEST(Utf8Test, KindsOfCodePoints) {
  for (uint32_t cp : {0x00u, 0x1Bu, 0x1Fu, 0x7Fu, 0x80u, 0x9Bu, 0x9Fu}) {
    EXPECT_EQ(KindOf(cp), CodePointKind::kControl) << cp;
  }
  for (uint32_t cp : {0x2028u, 0x2029u}) {
    EXPECT_EQ(KindOf(cp), CodePointKind::kSeparator) << cp;
  }
  for (uint32_t cp = 0x202A; cp <= 0x202E; ++cp) {
    EXPECT_EQ(KindOf(cp), CodePointKind::kBidiFormatting) << cp;
  }
  for (uint32_t cp = 0x2066; cp <= 0x2069; ++cp) {
    EXPECT_EQ(KindOf(cp), CodePointKind::kBidiFormatting) << cp;
  }
  for (uint32_t cp : {0x200Eu, 0x200Fu, 0x061Cu}) {
    EXPECT_EQ(KindOf(cp), CodePointKind::kBidiMark) << cp;
  }
  for (uint32_t cp : {0x20u, 0x7Eu, 0xA0u, 0xE9u, 0x061Bu, 0x05D0u, 0x200Du,
                      0x2027u, 0x202Fu, 0x2065u, 0x206Au, 0x1F600u}) {
    EXPECT_EQ(KindOf(cp), CodePointKind::kOrdinary) << cp;
  }
}

TEST(Utf8Test, TextFlawsOfIdsAndTitles) {
  auto flaw = [](std::string_view s, TextRules rules) {
    const TextFlaw f = FirstTextFlaw(s, rules);
    return f.found() ? DescribeTextFlaw(f) : std::string("none");
  };
  for (TextRules rules : {TextRules::kId, TextRules::kTitle}) {
    EXPECT_EQ(flaw("", rules), "none");
    EXPECT_EQ(flaw("caf\xC3\xA9 \xF0\x9F\x98\x80", rules), "none");
    EXPECT_EQ(flaw("a\tb", rules), "the control character U+0009 at byte 1");
    EXPECT_EQ(flaw("x\xC2\x9B", rules),
              "the control character U+009B at byte 1");
    EXPECT_EQ(flaw("\xE2\x80\xA8", rules),
              "the line separator U+2028 at byte 0");
    EXPECT_EQ(flaw("ab\xE2\x80\xA9", rules),
              "the paragraph separator U+2029 at byte 2");
    EXPECT_EQ(flaw("x\xE2\x80\xAE", rules),
              "the bidirectional formatting character U+202E at byte 1");
    EXPECT_EQ(flaw("x\xE2\x81\xA9", rules),
              "the bidirectional formatting character U+2069 at byte 1");
    EXPECT_EQ(flaw("caf\xE9", rules), "invalid UTF-8 at byte 3");
    EXPECT_EQ(flaw("\xED\xA0\x80", rules), "invalid UTF-8 at byte 0");
  }
  // The marks: not in ids, allowed in titles.
  EXPECT_EQ(flaw("a\xE2\x80\x8F", TextRules::kId),
            "the bidirectional mark U+200F at byte 1");
  EXPECT_EQ(flaw("\xD8\x9C", TextRules::kId),
            "the bidirectional mark U+061C at byte 0");
  EXPECT_EQ(flaw("a\xE2\x80\x8E\xE2\x80\x8F\xD8\x9C", TextRules::kTitle),
            "none");
}

}  // namespace
}  // namespace rbmrec
