// Request limits and validation of the service: every option over its
// limit is RESOURCE_EXHAUSTED + LIMIT_EXCEEDED naming the field, value,
// limit and flag; unknown enum numbers and ids with control characters are
// INVALID_ARGUMENT.

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/error_reason.h"
#include "gtest/gtest.h"
#include "server/service/service.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server {
namespace {

using testing::I;
using testing::Row;
using testing::ServiceFixture;

class LimitsTest : public ServiceFixture {
 protected:
  void SetUp() override {
    ServiceOptions o = DefaultOptions();
    o.limits.max_adhoc_ratings = 5;
    o.limits.max_predict_items = 3;
    o.limits.max_recommend_n = 4;
    o.limits.max_batch_rows = 10;
    Start(nullptr, o);
    LoadSyntheticSmall();
    TrainDone();
  }
  void LoadSyntheticSmall() {
    // The synthetic set in batches of at most 10 rows.
    const v1::AddRatingsRequest all = testing::SyntheticBatch();
    std::vector<v1::AddRatingsRequest> batches;
    for (int i = 0; i < all.ratings_size(); ++i) {
      if (i % 10 == 0) batches.emplace_back();
      *batches.back().add_ratings() = all.ratings(i);
    }
    ASSERT_TRUE(service_->AddRatings(batches).ok());
  }
  static void ExpectLimit(const absl::Status& s, const std::string& flag,
                          const std::string& value) {
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_EQ(ReasonOf(s), kReasonLimitExceeded) << s;
    EXPECT_NE(s.message().find(flag), std::string::npos) << s;
    EXPECT_NE(s.message().find(value), std::string::npos) << s;
  }
};

TEST_F(LimitsTest, AdHocRatingsAreLimited) {
  v1::PredictRatingsRequest p;
  p.add_item_ids(I(1));
  for (int i = 0; i < 6; ++i) {
    v1::ItemRating* r = p.add_ratings();
    r->set_item_id(I(i));
    r->set_rating(4);
  }
  ExpectLimit(service_->PredictRatings(p).status(), "--max-adhoc-ratings", "6");
  v1::RecommendRequest rec;
  *rec.mutable_ratings() = p.ratings();
  ExpectLimit(service_->Recommend(rec).status(), "--max-adhoc-ratings", "6");
  p.mutable_ratings()->RemoveLast();  // 5: at the limit
  EXPECT_TRUE(service_->PredictRatings(p).ok());
}

TEST_F(LimitsTest, EveryCountIsLimited) {
  v1::PredictRatingsRequest p;
  p.set_user_id("u0");
  for (int i = 0; i < 4; ++i) p.add_item_ids(I(i));
  ExpectLimit(service_->PredictRatings(p).status(), "--max-predict-items", "4");
  v1::RecommendRequest rec;
  rec.set_user_id("u0");
  rec.set_n(5);
  ExpectLimit(service_->Recommend(rec).status(), "--max-recommend-n", "5");
  v1::AddRatingsRequest b;
  for (int i = 0; i < 11; ++i) *b.add_ratings() = Row("u0", I(i), 3);
  ExpectLimit(service_->AddRatings({b}).status(), "--max-batch", "11");
  v1::PutItemsRequest items;
  for (int i = 0; i < 11; ++i) items.add_items()->set_item_id(I(i));
  ExpectLimit(service_->PutItems(items).status(), "--max-batch", "11");
  v1::DeleteRatingsRequest del;
  del.set_user_id("u0");
  for (int i = 0; i < 4; ++i) del.add_item_ids(I(i));
  ExpectLimit(service_->DeleteRatings(del).status(), "--max-predict-items",
              "4");
}

// A float option sent as a double that rounds onto an open end of its range
// in single precision (what training uses) says so instead of quoting a
// range the value sent was inside.
TEST(TrainJobFromProtoTest, FloatOptionsThatRoundOntoAnOpenEndSaySo) {
  struct Case {
    void (*set)(v1::TrainOptions*);
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](v1::TrainOptions* o) { o->set_momentum(0.99999999); },
       "options.momentum 0.99999999 rounds to 1 in single precision; must be "
       "< 1"},
      {[](v1::TrainOptions* o) { o->set_weight_decay(0.999999999); },
       "options.weight_decay 0.999999999 rounds to 1 in single precision; "
       "must be < 1"},
      {[](v1::TrainOptions* o) { o->set_average(0.99999998); },
       "options.average 0.99999998 rounds to 1 in single precision; must be "
       "< 1"},
      {[](v1::TrainOptions* o) { o->set_learning_rate(1e-50); },
       "options.learning_rate 1e-50 rounds to 0 in single precision; must be "
       "> 0"},
      {[](v1::TrainOptions* o) { o->set_learning_rate(99.999999999); },
       "options.learning_rate 99.999999999 rounds to 100 in single "
       "precision; must be < 100"},
      {[](v1::TrainOptions* o) { o->set_momentum(1.5); },
       "options.momentum must be in [0, 1), got 1.5"},
      {[](v1::TrainOptions* o) { o->set_validation_fraction(0.75); },
       "options.validation_fraction must be in [0, 0.5], got 0.75"},
  };
  for (const Case& c : cases) {
    v1::TrainRequest request;
    c.set(request.mutable_options());
    absl::StatusOr<TrainJobRequest> job =
        TrainJobFromProto(request, TrainOptions(), Activation::kIfBetter, 1);
    ASSERT_FALSE(job.ok()) << c.message;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(job.status().message(), c.message);
  }
  // Just inside the end in single precision too: accepted as that float.
  v1::TrainRequest request;
  request.mutable_options()->set_momentum(0.9999999);
  absl::StatusOr<TrainJobRequest> job =
      TrainJobFromProto(request, TrainOptions(), Activation::kIfBetter, 1);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_LT(job->options.momentum, 1.0f);
}

TEST_F(LimitsTest, UnknownEnumValuesAreInvalid) {
  v1::PredictRatingsRequest p;
  p.set_user_id("u0");
  p.add_item_ids(I(1));
  p.set_method(static_cast<v1::Method>(7));
  absl::Status s = service_->PredictRatings(p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("method 7"), std::string::npos) << s;
  v1::RecommendRequest rec;
  rec.set_user_id("u0");
  rec.set_method(static_cast<v1::Method>(7));
  EXPECT_EQ(service_->Recommend(rec).status().code(),
            absl::StatusCode::kInvalidArgument);
  rec.set_method(v1::MEAN_FIELD);
  rec.set_rank_by(static_cast<v1::RankBy>(9));
  s = service_->Recommend(rec).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("rank_by 9"), std::string::npos) << s;
  rec.set_rank_by(v1::PROBABILITY_AT_LEAST);
  rec.set_threshold(4);
  EXPECT_TRUE(service_->Recommend(rec).ok());
}

TEST_F(LimitsTest, ControlCharactersInIdsAreRejected) {
  for (const std::string& bad :
       {std::string("a\0b", 3), std::string("esc\x1b"), std::string("cr\r"),
        std::string("del\x7f"), std::string("csi\xc2\x9b"),
        std::string("\xc2\x80")}) {
    SCOPED_TRACE(absl::CEscape(bad));
    v1::AddRatingsRequest b;
    *b.add_ratings() = Row(bad, I(1), 3);
    *b.add_ratings() = Row("u0", bad, 3);
    *b.add_ratings() = Row("u0", I(1), 3);
    absl::StatusOr<v1::AddRatingsResponse> r = service_->AddRatings({b});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->accepted(), 1);
    EXPECT_EQ(r->rejected(), 2);
    ASSERT_EQ(r->rejected_rows_size(), 2);
    EXPECT_NE(r->rejected_rows(0).reason().find("user_id contains the control"),
              std::string::npos)
        << r->rejected_rows(0).reason();
    EXPECT_NE(r->rejected_rows(1).reason().find("item_id contains the control"),
              std::string::npos);
    v1::PredictRatingsRequest p;
    p.set_user_id(bad);
    p.add_item_ids(I(1));
    EXPECT_EQ(service_->PredictRatings(p).status().code(),
              absl::StatusCode::kInvalidArgument);
    p.set_user_id("u0");
    p.set_item_ids(0, bad);
    EXPECT_EQ(service_->PredictRatings(p).status().code(),
              absl::StatusCode::kInvalidArgument);
    v1::DeleteUserRequest du;
    du.set_user_id(bad);
    EXPECT_EQ(service_->DeleteUser(du).status().code(),
              absl::StatusCode::kInvalidArgument);
    v1::PutItemsRequest items;
    items.add_items()->set_item_id(bad);
    EXPECT_EQ(service_->PutItems(items).status().code(),
              absl::StatusCode::kInvalidArgument);
    // Item metadata: the title, attribute keys and values.
    for (int field = 0; field < 3; ++field) {
      v1::PutItemsRequest meta;
      v1::Item* item = meta.add_items();
      item->set_item_id(I(2));
      if (field == 0) item->set_title(bad);
      if (field == 1) (*item->mutable_attributes())[bad] = "v";
      if (field == 2) (*item->mutable_attributes())["genre"] = bad;
      absl::Status ms = service_->PutItems(meta).status();
      EXPECT_EQ(ms.code(), absl::StatusCode::kInvalidArgument) << field;
      EXPECT_NE(ms.message().find("contains the control character"),
                std::string::npos)
          << ms;
    }
    v1::DeleteRatingsRequest dr;
    dr.set_user_id(bad);
    EXPECT_EQ(service_->DeleteRatings(dr).status().code(),
              absl::StatusCode::kInvalidArgument);
    dr.set_user_id("u0");
    dr.add_item_ids(I(1));
    dr.add_item_ids(bad);
    absl::Status ds = service_->DeleteRatings(dr).status();
    EXPECT_EQ(ds.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(ds.message().find("item_ids[1]"), std::string::npos) << ds;
    v1::RecommendRequest rec;
    rec.set_user_id(bad);
    EXPECT_EQ(service_->Recommend(rec).status().code(),
              absl::StatusCode::kInvalidArgument);
    // Ad-hoc ratings of Predict and Recommend.
    v1::RecommendRequest adhoc;
    v1::ItemRating* ir = adhoc.add_ratings();
    ir->set_item_id(bad);
    ir->set_rating(3);
    EXPECT_EQ(service_->Recommend(adhoc).status().code(),
              absl::StatusCode::kInvalidArgument);
    v1::PredictRatingsRequest padhoc;
    padhoc.add_item_ids(I(1));
    *padhoc.add_ratings() = *ir;
    EXPECT_EQ(service_->PredictRatings(padhoc).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  // Printable non-ASCII text stays valid.
  v1::PutItemsRequest ok;
  v1::Item* item = ok.add_items();
  item->set_item_id("caf\xc3\xa9");
  item->set_title("Am\xc3\xa9lie (2001)\xc2\xa0");
  EXPECT_TRUE(service_->PutItems(ok).ok());
  EXPECT_TRUE(service_->Serving());
}

// Line and paragraph separators, bidirectional formatting characters and
// marks, and invalid UTF-8 are rejected in ids by every RPC, as control
// characters are, and reach no store.
TEST_F(LimitsTest, IdsWithSeparatorsBidiControlsOrInvalidUtf8AreRejected) {
  struct Case {
    std::string bad;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"ls\xe2\x80\xa8", "contains the line separator U+2028 at byte 2"},
      {"ps\xe2\x80\xa9", "contains the paragraph separator U+2029 at byte 2"},
      {"rlo\xe2\x80\xae"
       "gpj.exe",
       "contains the bidirectional formatting character U+202E at byte 3"},
      {"\xe2\x80\xaa",
       "contains the bidirectional formatting character "
       "U+202A at byte 0"},
      {"lri\xe2\x81\xa6",
       "contains the bidirectional formatting character "
       "U+2066 at byte 3"},
      {"pdi\xe2\x81\xa9",
       "contains the bidirectional formatting character "
       "U+2069 at byte 3"},
      {"lrm\xe2\x80\x8e", "contains the bidirectional mark U+200E at byte 3"},
      {"rlm\xe2\x80\x8f", "contains the bidirectional mark U+200F at byte 3"},
      {"alm\xd8\x9c", "contains the bidirectional mark U+061C at byte 3"},
      {"c1\xc2\x85", "contains the control character U+0085 at byte 2"},
      {"latin1\xe9", "contains invalid UTF-8 at byte 6"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::CEscape(c.bad));
    v1::AddRatingsRequest b;
    *b.add_ratings() = Row(c.bad, I(1), 3);
    *b.add_ratings() = Row("u0", c.bad, 3);
    absl::StatusOr<v1::AddRatingsResponse> r = service_->AddRatings({b});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->accepted(), 0);
    ASSERT_EQ(r->rejected_rows_size(), 2);
    EXPECT_EQ(r->rejected_rows(0).reason(),
              absl::StrCat("batch 0 row 0: user_id ", c.why));
    EXPECT_EQ(r->rejected_rows(1).reason(),
              absl::StrCat("batch 0 row 1: item_id ", c.why));
    v1::PutItemsRequest items;
    items.add_items()->set_item_id(c.bad);
    absl::Status ps = service_->PutItems(items).status();
    EXPECT_EQ(ps.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(ps.message(), absl::StrCat("items[0]: item_id ", c.why));
    v1::PredictRatingsRequest p;
    p.set_user_id(c.bad);
    p.add_item_ids(I(1));
    EXPECT_EQ(service_->PredictRatings(p).status().code(),
              absl::StatusCode::kInvalidArgument);
    v1::RecommendRequest rec;
    rec.set_user_id(c.bad);
    EXPECT_EQ(service_->Recommend(rec).status().code(),
              absl::StatusCode::kInvalidArgument);
    v1::DeleteRatingsRequest dr;
    dr.set_user_id(c.bad);
    EXPECT_EQ(service_->DeleteRatings(dr).status().code(),
              absl::StatusCode::kInvalidArgument);
    v1::DeleteUserRequest du;
    du.set_user_id(c.bad);
    EXPECT_EQ(service_->DeleteUser(du).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  absl::StatusOr<v1::GetStatsResponse> st = service_->GetStats({});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->users(), testing::kUsers);
  EXPECT_EQ(st->items(), testing::kItems);
}

// Titles and attributes are bounded (INVALID_ARGUMENT + LIMIT_EXCEEDED,
// naming items[i], the field, its size and the limit) and may not hold
// what would reorder or break the text around them; nothing of a rejected
// call is stored.
TEST_F(LimitsTest, ItemMetadataIsBoundedAndSafeToShow) {
  auto put = [&](const std::function<void(v1::Item*)>& fill) {
    v1::PutItemsRequest req;
    v1::Item* first = req.add_items();
    first->set_item_id("new-first");
    first->set_title("stored only if the call succeeds");
    v1::Item* item = req.add_items();
    item->set_item_id("new-second");
    fill(item);
    return service_->PutItems(req).status();
  };
  auto expect_limit = [](const absl::Status& s, const std::string& message) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(ReasonOf(s), kReasonLimitExceeded) << s;
    EXPECT_EQ(s.message(), message);
  };
  expect_limit(
      put([](v1::Item* i) { i->set_title(std::string(1 << 20, 't')); }),
      "items[1]: title is 1048576 bytes long (limit 1024)");
  expect_limit(put([](v1::Item* i) {
                 i->set_title(std::string(kMaxTitleBytes + 1, 't'));
               }),
               "items[1]: title is 1025 bytes long (limit 1024)");
  expect_limit(put([](v1::Item* i) {
                 for (int k = 0; k <= kMaxItemAttributes; ++k) {
                   (*i->mutable_attributes())[absl::StrCat("k", k)] = "v";
                 }
               }),
               "items[1]: attributes has 65 entries (limit 64)");
  expect_limit(put([](v1::Item* i) {
                 (*i->mutable_attributes())[std::string(257, 'k')] = "v";
               }),
               "items[1]: an attributes key is 257 bytes long (limit 256)");
  expect_limit(put([](v1::Item* i) {
                 (*i->mutable_attributes())["genre"] = std::string(1025, 'v');
               }),
               "items[1]: attributes['genre'] is 1025 bytes long (limit 1024)");
  auto expect_invalid = [](const absl::Status& s, const std::string& message) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(ReasonOf(s), "") << s;
    EXPECT_EQ(s.message(), message);
  };
  expect_invalid(
      put([](v1::Item* i) {
        i->set_title(
            "The \xe2\x80\xae"
            "end");
      }),
      "items[1]: title contains the bidirectional formatting character "
      "U+202E at byte 4");
  expect_invalid(
      put([](v1::Item* i) { i->set_title("two\xe2\x80\xa8lines"); }),
      "items[1]: title contains the line separator U+2028 at byte 3");
  expect_invalid(put([](v1::Item* i) {
                   (*i->mutable_attributes())["k\xe2\x81\xa7"] = "v";
                 }),
                 "items[1]: an attributes key contains the bidirectional "
                 "formatting character U+2067 at byte 1");
  expect_invalid(put([](v1::Item* i) {
                   (*i->mutable_attributes())["genre"] =
                       "\xc2\x9b"
                       "31m";
                 }),
                 "items[1]: attributes['genre'] contains the control "
                 "character U+009B at byte 0");
  absl::StatusOr<std::vector<std::string>> titles =
      store_->GetTitles({"new-first", "new-second"});
  ASSERT_TRUE(titles.ok()) << titles.status();
  EXPECT_EQ(*titles, std::vector<std::string>({"", ""}));

  // At the limits, and with bidirectional marks in a title: stored.
  absl::Status ok = put([](v1::Item* i) {
    i->set_title(std::string(kMaxTitleBytes, 't'));
    for (int k = 0; k < kMaxItemAttributes; ++k) {
      (*i->mutable_attributes())[absl::StrCat(k, std::string(250, 'k'))] =
          std::string(kMaxAttributeValueBytes, 'v');
    }
  });
  EXPECT_TRUE(ok.ok()) << ok;
  ok = put([](v1::Item* i) {
    i->set_title("\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d (C++)\xe2\x80\x8f");
  });
  EXPECT_TRUE(ok.ok()) << ok;
}

}  // namespace
}  // namespace rbmrec::server
