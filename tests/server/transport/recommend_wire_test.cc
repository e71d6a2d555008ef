// SplitRecommendRequest (server/transport/recommend_wire.h): the same request
// as a full parse, with the id lists as views of the bytes.

#include "server/transport/recommend_wire.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/service/request_plan.h"

namespace rbmrec::server {
namespace {

using google::protobuf::util::MessageDifferencer;

std::vector<std::string> Strings(const std::vector<std::string_view>& v) {
  return std::vector<std::string>(v.begin(), v.end());
}
std::vector<std::string> Strings(
    const google::protobuf::RepeatedPtrField<std::string>& v) {
  return std::vector<std::string>(v.begin(), v.end());
}

// The split of `bytes` against protobuf's own parse of them.
void ExpectSameAsFullParse(const std::string& bytes) {
  v1::RecommendRequest full;
  ASSERT_TRUE(full.ParseFromString(bytes));
  v1::RecommendRequest rest;
  RecommendIdLists ids;
  ASSERT_TRUE(SplitRecommendRequest(bytes, &rest, &ids).ok());
  EXPECT_EQ(Strings(ids.exclude), Strings(full.exclude_item_ids()));
  EXPECT_EQ(Strings(ids.candidates), Strings(full.candidate_item_ids()));
  // Views into the bytes, not copies.
  for (const std::string_view id : ids.candidates) {
    EXPECT_GE(id.data(), bytes.data());
    EXPECT_LE(id.data() + id.size(), bytes.data() + bytes.size());
  }
  v1::RecommendRequest others = full;
  others.clear_exclude_item_ids();
  others.clear_candidate_item_ids();
  EXPECT_TRUE(MessageDifferencer::Equals(rest, others))
      << rest.DebugString() << "\nvs\n"
      << others.DebugString();
}

TEST(SplitRecommendRequest, EveryFieldAsAFullParseGivesIt) {
  v1::RecommendRequest r;
  r.set_user_id("user-7");
  r.set_n(25);
  r.set_offset(10);
  r.set_model_version(3);
  r.set_threshold(4);
  r.set_rank_by(v1::PROBABILITY_AT_LEAST);
  r.add_categories("Horror");
  r.add_required_categories("Comedy");
  v1::ItemRating* adhoc = r.add_ratings();
  adhoc->set_item_id("i9");
  adhoc->set_rating(5);
  for (int i = 0; i < 300; ++i) r.add_candidate_item_ids(absl::StrCat(i));
  r.add_exclude_item_ids("17");
  r.add_exclude_item_ids(std::string(200, 'x'));  // a 2-byte length
  ExpectSameAsFullParse(r.SerializeAsString());
  ExpectSameAsFullParse(v1::RecommendRequest().SerializeAsString());  // empty
}

TEST(SplitRecommendRequest, ListsKeepTheirWireOrderAcrossInterleavedFields) {
  // Built field by field: a, user_id, b, exclude x, n, c.
  auto field = [](const v1::RecommendRequest& r) {
    return r.SerializeAsString();
  };
  v1::RecommendRequest a, user, b, x, n, c;
  a.add_candidate_item_ids("a");
  user.set_user_id("u1");
  b.add_candidate_item_ids("b");
  x.add_exclude_item_ids("x");
  n.set_n(3);
  c.add_candidate_item_ids("c");
  const std::string bytes =
      field(a) + field(user) + field(b) + field(x) + field(n) + field(c);
  v1::RecommendRequest rest;
  RecommendIdLists ids;
  ASSERT_TRUE(SplitRecommendRequest(bytes, &rest, &ids).ok());
  EXPECT_EQ(Strings(ids.candidates), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Strings(ids.exclude), (std::vector<std::string>{"x"}));
  EXPECT_EQ(rest.user_id(), "u1");
  EXPECT_EQ(rest.n(), 3);
  ExpectSameAsFullParse(bytes);
}

TEST(SplitRecommendRequest, RandomRequestsMatchTheFullParse) {
  std::mt19937 rng(7);
  for (int t = 0; t < 200; ++t) {
    v1::RecommendRequest r;
    const int parts = static_cast<int>(rng() % 12);
    std::string bytes;
    for (int p = 0; p < parts; ++p) {
      v1::RecommendRequest f;
      switch (rng() % 6) {
        case 0:
          f.add_candidate_item_ids(std::string(rng() % 140, 'c'));
          break;
        case 1:
          f.add_exclude_item_ids(absl::StrCat("e", rng() % 1000));
          break;
        case 2:
          f.set_user_id(absl::StrCat("u", rng() % 50));
          break;
        case 3:
          f.set_n(static_cast<int32_t>(rng() % 100));
          break;
        case 4:
          f.add_categories(absl::StrCat("g", rng() % 5));
          break;
        default:
          f.set_offset(static_cast<int32_t>(rng() % 7));
          break;
      }
      bytes += f.SerializeAsString();  // concatenation merges, as on the wire
    }
    ExpectSameAsFullParse(bytes);
  }
}

TEST(SplitRecommendRequest, AListFieldOfAnotherWireTypeIsAnUnknownField) {
  // Field 11 as a varint: the full parse keeps it as an unknown field, and
  // so does the split; it is no candidate.
  const std::string bytes = std::string("\x58\x05", 2) +  // 11 << 3 | 0, 5
                            v1::RecommendRequest().SerializeAsString();
  ExpectSameAsFullParse(bytes);
  v1::RecommendRequest rest;
  RecommendIdLists ids;
  ASSERT_TRUE(SplitRecommendRequest(bytes, &rest, &ids).ok());
  EXPECT_TRUE(ids.candidates.empty());
  EXPECT_EQ(rest.SerializeAsString(), bytes);  // kept, byte for byte
}

TEST(SplitRecommendRequest, MalformedBytesAreInvalidArgument) {
  v1::RecommendRequest r;
  r.set_user_id("u1");
  r.add_candidate_item_ids("abcdef");
  const std::string good = r.SerializeAsString();
  const std::vector<std::string> bad = {
      good.substr(0, good.size() - 2),             // an id cut short
      std::string("\x5a\xff\xff\xff\xff\xff", 6),  // field 11, bad length
      std::string("\x0a\x05u1", 4),                // user_id cut short
      std::string("\x00", 1),                      // tag 0
      std::string("\x0c", 1),                      // an end group, unmatched
      std::string("\x5a\x80", 2),                  // length's varint cut
  };
  for (const std::string& bytes : bad) {
    v1::RecommendRequest full;
    EXPECT_FALSE(full.ParseFromString(bytes)) << "must not parse";
    v1::RecommendRequest rest;
    RecommendIdLists ids;
    const absl::Status s = SplitRecommendRequest(bytes, &rest, &ids);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("not a valid RecommendRequest"),
              std::string::npos)
        << s;
  }
}

TEST(SplitRecommendRequest, InvalidUtf8InAnIdIsLeftToTheIdChecks) {
  v1::RecommendRequest r;
  r.set_user_id("u1");
  r.add_candidate_item_ids("ok");
  r.add_candidate_item_ids("bad-\xff");
  const std::string bytes = r.SerializePartialAsString();
  v1::RecommendRequest rest;
  RecommendIdLists ids;
  ASSERT_TRUE(SplitRecommendRequest(bytes, &rest, &ids).ok());
  ASSERT_EQ(ids.candidates.size(), 2u);
  // The service's check names the entry.
  const absl::StatusOr<RecommendCheck> checked =
      CheckRecommend(rest, ids, RequestLimits{}, RatingScale());
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(checked.status().message().find("candidate_item_ids[1]"),
            std::string::npos)
      << checked.status();
  // Invalid UTF-8 in another string field fails the split itself.
  v1::RecommendRequest user;
  user.set_user_id("\xff");
  const absl::Status s =
      SplitRecommendRequest(user.SerializePartialAsString(), &rest, &ids);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace rbmrec::server
