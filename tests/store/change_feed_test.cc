#include "store/change_feed.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rbmrec::store {
namespace {

using ::testing::HasSubstr;
using Kind = ChangeRecord::Kind;

ChangeRecord Rec(Kind kind, std::string user, std::string item, double rating,
                 std::optional<double> previous = std::nullopt) {
  return ChangeRecord::Make(kind, std::move(user), std::move(item), rating,
                            previous);
}

TEST(ChangeFeedCodecTest, RoundTripsEveryKindAndAnyBytes) {
  const std::vector<ChangeRecord> records = {
      Rec(Kind::kUpsert, "u1", "i1", 4.5),
      Rec(Kind::kUpsert, "u:2", "i\n2", 0.1 + 0.2, 3.0),
      Rec(Kind::kDelete, std::string("u\0x", 3), "12:ab", -1e300),
      Rec(Kind::kUserDeleted, "u1", "", 0),
      Rec(Kind::kItem, "", "item 7", 0),
      Rec(Kind::kView, "u1", "i1", 0),
  };
  const std::vector<std::string> payloads = EncodeChanges("origin-1", records);
  ASSERT_EQ(payloads.size(), 1u);
  auto d = DecodeChanges(payloads[0]);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->origin, "origin-1");
  EXPECT_EQ(d->records, records);  // doubles exactly (%.17g)
}

TEST(ChangeFeedCodecTest, SplitsIntoPayloadsUnderTheLimitInOrder) {
  std::vector<ChangeRecord> records;
  for (int i = 0; i < 2000; ++i) {
    records.push_back(Rec(Kind::kUpsert, "user" + std::to_string(i % 37),
                          "item" + std::to_string(i), 1 + i % 5, 2.0));
  }
  const std::vector<std::string> payloads = EncodeChanges("o", records, 500);
  ASSERT_GT(payloads.size(), 10u);
  std::vector<ChangeRecord> back;
  for (const std::string& p : payloads) {
    EXPECT_LE(p.size(), 500u);
    auto d = DecodeChanges(p);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->origin, "o");
    EXPECT_FALSE(d->records.empty());
    back.insert(back.end(), d->records.begin(), d->records.end());
  }
  EXPECT_EQ(back, records);
  EXPECT_TRUE(EncodeChanges("o", {}).empty());
  // The default limit stays under NOTIFY's 8000 bytes even with the longest
  // ids (256 bytes).
  std::vector<ChangeRecord> big(
      100, Rec(Kind::kUpsert, std::string(256, 'u'), std::string(256, 'i'),
               1.0 / 3, 2.0 / 3));
  for (const std::string& p : EncodeChanges(std::string(40, 'o'), big)) {
    EXPECT_LT(p.size(), 8000u);
  }
}

TEST(ChangeFeedCodecTest, MalformedPayloadsAreRejectedWithTheOffset) {
  const std::string good =
      EncodeChanges("o", {Rec(Kind::kUpsert, "u", "i", 3, 2)})[0];
  ASSERT_TRUE(DecodeChanges(good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    // Every strict prefix but the empty record list is malformed.
    auto d = DecodeChanges(good.substr(0, n));
    if (n == std::string("c11:o").size()) {
      EXPECT_TRUE(d.ok()) << n;  // origin only: no records
      continue;
    }
    EXPECT_FALSE(d.ok()) << "prefix " << n;
  }
  auto bad_kind = DecodeChanges("c11:oZ1:u1:i1:31:");
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_THAT(std::string(bad_kind.status().message()), HasSubstr("kind"));
  EXPECT_THAT(std::string(bad_kind.status().message()), HasSubstr("byte"));
  EXPECT_FALSE(DecodeChanges("c11:oU1:u1:i1:x0:").ok());   // rating
  EXPECT_FALSE(DecodeChanges("c11:oU0:1:i1:30:").ok());    // no user
  EXPECT_FALSE(DecodeChanges("c11:oD1:u1:i1:31:2").ok());  // previous
  EXPECT_FALSE(DecodeChanges("c11:oI1:u1:i0:0:").ok());    // user on I
  EXPECT_FALSE(DecodeChanges("c199999999:o").ok());        // length
  EXPECT_FALSE(DecodeChanges("x1:o").ok());                // format
}

}  // namespace
}  // namespace rbmrec::store
