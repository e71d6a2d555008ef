// Recommend's filters and pages over the item catalogue (categories,
// hidden items), on the synthetic data of service_fixture.h.

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/error_reason.h"
#include "gtest/gtest.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server::testing {
namespace {

// Item i: categories "half-<i / 20>" and "mod4-<i % 4>".
v1::PutItemsRequest Catalogue() {
  v1::PutItemsRequest req;
  for (int i = 0; i < kItems; ++i) {
    v1::Item* item = req.add_items();
    item->set_item_id(I(i));
    item->set_title(absl::StrCat("Item ", i));
    item->add_categories(absl::StrCat("half-", i / 20));
    item->add_categories(absl::StrCat("mod4-", i % 4));
  }
  return req;
}

int Index(const std::string& id) { return std::stoi(id.substr(1)); }

class FiltersTest : public ServiceFixture {
 protected:
  void SetUp() override {
    ServiceOptions o = DefaultOptions();
    o.recommend_candidates = 0;  // exact over all items: pages concatenate
    o.limits.max_filter_items = 5;
    o.limits.max_categories = 3;
    Start(nullptr, o);
    LoadSynthetic();
    ASSERT_TRUE(service_->PutItems(Catalogue()).ok());
    TrainDone();
  }
  v1::RecommendResponse Rec(v1::RecommendRequest req) {
    if (req.user_id().empty()) req.set_user_id(U(3));
    absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::RecommendResponse();
  }
  // Items user 3 did not rate (all are trained on this data).
  static int Unrated(const std::function<bool(int)>& pass) {
    int n = 0;
    for (int i = 0; i < kItems; ++i) n += !Rated(3, i) && pass(i);
    return n;
  }
};

TEST_F(FiltersTest, AnyOfAndAllOfCategories) {
  v1::RecommendRequest req;
  req.set_n(40);
  req.add_categories("mod4-1");
  req.add_categories("mod4-2");
  v1::RecommendResponse r = Rec(req);
  const int any = Unrated([](int i) { return i % 4 == 1 || i % 4 == 2; });
  EXPECT_EQ(r.candidates(), any);
  ASSERT_EQ(r.recommendations_size(), any);
  for (const std::string& id : Ids(r)) {
    EXPECT_TRUE(Index(id) % 4 == 1 || Index(id) % 4 == 2) << id;
  }

  req.clear_categories();
  req.add_required_categories("half-0");
  req.add_required_categories("mod4-0");
  r = Rec(req);
  const int all = Unrated([](int i) { return i < 20 && i % 4 == 0; });
  EXPECT_EQ(r.candidates(), all);
  ASSERT_EQ(r.recommendations_size(), all);
  for (const std::string& id : Ids(r)) {
    EXPECT_TRUE(Index(id) < 20 && Index(id) % 4 == 0) << id;
  }

  // A category no item has: nothing, not an error.
  req.clear_required_categories();
  req.add_categories("no-such-genre");
  r = Rec(req);
  EXPECT_EQ(r.candidates(), 0);
  EXPECT_EQ(r.recommendations_size(), 0);
}

TEST_F(FiltersTest, HiddenItemsAreNeverRecommendedButStillPredicted) {
  v1::RecommendRequest req;
  req.set_n(5);
  const v1::RecommendResponse before = Rec(req);
  ASSERT_EQ(before.recommendations_size(), 5);
  const std::string top = before.recommendations(0).item_id();

  v1::PutItemsRequest hide;
  hide.add_hide_item_ids(top);
  ASSERT_TRUE(service_->PutItems(hide).ok());
  v1::RecommendResponse after = Rec(req);
  EXPECT_EQ(after.candidates(), before.candidates() - 1);
  const std::vector<std::string> ids = Ids(after);
  const std::vector<std::string> was = Ids(before);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), top), 0);
  EXPECT_EQ(std::vector<std::string>(ids.begin(), ids.begin() + 4),
            std::vector<std::string>(was.begin() + 1, was.end()));
  absl::StatusOr<v1::PredictRatingsResponse> p = PredictS(U(3), top);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->predictions(0).fallback());
  EXPECT_EQ(p->predictions(0).title(), absl::StrCat("Item ", Index(top)))
      << "hiding keeps the title";

  v1::PutItemsRequest show;
  show.add_unhide_item_ids(top);
  ASSERT_TRUE(service_->PutItems(show).ok());
  EXPECT_EQ(Ids(Rec(req)), Ids(before));

  // Item.hidden through PutItems too.
  v1::PutItemsRequest put;
  v1::Item* item = put.add_items();
  item->set_item_id(top);
  item->set_hidden(true);
  ASSERT_TRUE(service_->PutItems(put).ok());
  EXPECT_EQ(Rec(req).candidates(), before.candidates() - 1);
}

TEST_F(FiltersTest, ExclusionsAndCandidateSets) {
  v1::RecommendRequest req;
  req.set_n(6);
  const v1::RecommendResponse all = Rec(req);
  ASSERT_EQ(all.recommendations_size(), 6);
  req.add_exclude_item_ids(all.recommendations(0).item_id());
  req.add_exclude_item_ids(all.recommendations(2).item_id());
  req.add_exclude_item_ids("unknown-item");  // ignored
  v1::RecommendResponse r = Rec(req);
  const std::vector<std::string> got = Ids(r);
  EXPECT_EQ(r.candidates(), all.candidates() - 2);
  std::vector<std::string> want = Ids(all);
  want.erase(want.begin() + 2);
  want.erase(want.begin());
  EXPECT_EQ(std::vector<std::string>(got.begin(), got.begin() + 4), want);

  // Only among the candidates: the unfiltered order restricted to them.
  v1::RecommendRequest only;
  only.set_n(10);
  const std::vector<std::string> pool = {
      all.recommendations(5).item_id(), all.recommendations(1).item_id(),
      all.recommendations(3).item_id(), "unknown-item"};
  for (const std::string& id : pool) only.add_candidate_item_ids(id);
  r = Rec(only);
  EXPECT_EQ(r.candidates(), 3);
  EXPECT_EQ(Ids(r), (std::vector<std::string>{pool[1], pool[2], pool[0]}));
  EXPECT_EQ(r.recommendations(0).rank(), 1);
}

TEST_F(FiltersTest, PagesConcatenateToTheUnpagedList) {
  for (const bool filtered : {false, true}) {
    v1::RecommendRequest req;
    if (filtered) req.add_categories("half-1");
    req.set_n(15);
    const v1::RecommendResponse whole = Rec(req);
    ASSERT_GE(whole.recommendations_size(), filtered ? 6 : 15);
    std::vector<std::string> paged;
    for (int offset = 0; offset < 20; offset += 4) {
      req.set_n(4);
      req.set_offset(offset);
      const v1::RecommendResponse page = Rec(req);
      EXPECT_EQ(page.candidates(), whole.candidates());
      for (int r = 0; r < page.recommendations_size(); ++r) {
        EXPECT_EQ(page.recommendations(r).rank(), offset + r + 1);
        paged.push_back(page.recommendations(r).item_id());
      }
    }
    paged.resize(std::min<size_t>(paged.size(), 15));
    EXPECT_EQ(paged, Ids(whole)) << "filtered " << filtered;
  }
}

TEST_F(FiltersTest, LimitsAndInvalidFiltersNameTheField) {
  auto fails = [&](const v1::RecommendRequest& req, absl::StatusCode code,
                   const std::string& field) {
    absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(req);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), code) << r.status();
    EXPECT_NE(r.status().message().find(field), std::string::npos)
        << r.status();
    if (code == absl::StatusCode::kResourceExhausted) {
      EXPECT_EQ(ReasonOf(r.status()), kReasonLimitExceeded);
    }
  };
  v1::RecommendRequest base;
  base.set_user_id(U(3));
  v1::RecommendRequest req = base;
  for (int i = 0; i < 6; ++i) req.add_exclude_item_ids(I(i));
  fails(req, absl::StatusCode::kResourceExhausted, "exclude_item_ids");
  req = base;
  for (int i = 0; i < 6; ++i) req.add_candidate_item_ids(I(i));
  fails(req, absl::StatusCode::kResourceExhausted, "candidate_item_ids");
  req = base;
  for (int i = 0; i < 2; ++i) req.add_categories(absl::StrCat("c", i));
  for (int i = 0; i < 2; ++i) req.add_required_categories("x");
  fails(req, absl::StatusCode::kResourceExhausted, "categories");
  req = base;
  req.set_n(10);
  req.set_offset(995);
  fails(req, absl::StatusCode::kResourceExhausted, "offset + n");
  req = base;
  req.set_offset(-1);
  fails(req, absl::StatusCode::kInvalidArgument, "offset");
  req = base;
  req.add_required_categories("ok");
  req.add_required_categories("bad\x1b[31m");
  fails(req, absl::StatusCode::kInvalidArgument, "required_categories[1]");
  req = base;
  req.add_exclude_item_ids("");
  fails(req, absl::StatusCode::kInvalidArgument, "exclude_item_ids[0]");
}

TEST_F(FiltersTest, PutItemsChecksCategoriesNamingTheField) {
  v1::PutItemsRequest req;
  v1::Item* item = req.add_items();
  item->set_item_id("x");
  item->add_categories("fine");
  item->add_categories("");
  absl::StatusOr<v1::PutItemsResponse> r = service_->PutItems(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "items[0]: categories[1] is empty");
  item->set_categories(1, "line\nbreak");
  r = service_->PutItems(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("items[0]: categories[1] contains"),
            std::string::npos)
      << r.status();
  item->set_categories(1, std::string(200, 'a'));
  r = service_->PutItems(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ReasonOf(r.status()), kReasonLimitExceeded);
  req.clear_items();
  req.add_hide_item_ids("ok");
  req.add_hide_item_ids("");
  r = service_->PutItems(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hide_item_ids[1]"), std::string::npos);
}

}  // namespace
}  // namespace rbmrec::server::testing
