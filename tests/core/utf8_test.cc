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

}  // namespace
}  // namespace rbmrec
