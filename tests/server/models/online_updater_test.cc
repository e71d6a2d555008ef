// OnlineUpdater: incremental applies give the same model as whole copies,
// and online publishes stay within retention.

#include "server/models/online_updater.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/service/service.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server {
namespace {

using testing::I;
using testing::Row;
using testing::ServiceFixture;
using testing::U;

class OnlineUpdaterTest : public ServiceFixture {
 protected:
  // Rounds of writes, each applied before the next; returns the served
  // model.
  std::shared_ptr<const Model> RunRounds(int rounds) {
    for (int r = 0; r < rounds; ++r) {
      v1::AddRatingsRequest b;
      for (int u = 0; u < 5; ++u) {
        *b.add_ratings() = Row(U(u + r), I((u * 3 + r) % 40), 1 + (u + r) % 5);
      }
      if (r == 2) *b.add_ratings() = Row(U(0), "i-new", 4);  // a new item
      EXPECT_TRUE(service_->AddRatings({b}).ok());
      service_->FlushOnlineForTest();
    }
    return service_->registry_for_test().Current().model;
  }
};

TEST_F(OnlineUpdaterTest, IncrementalAppliesEqualWholeCopies) {
  LoadSynthetic();
  TrainDone();
  const std::shared_ptr<const Model> incremental = RunRounds(8);
  const OnlineUpdater& online = service_->online_for_test();
  EXPECT_EQ(online.applies(), 8);
  // Whole copies: the first apply after training, the one after the new
  // item changed the shapes, and the one after that (its spare has the old
  // shape); all the others are incremental.
  EXPECT_LE(online.full_copies(), 4);
  EXPECT_GT(online.updates(), 0);

  // The same writes on a fresh service where every apply copies (the spare
  // is never usable when it is held elsewhere): hold every served model.
  Start(nullptr);
  LoadSynthetic();
  TrainDone();
  std::vector<std::shared_ptr<const Model>> held;
  for (int r = 0; r < 8; ++r) {
    held.push_back(service_->registry_for_test().Current().model);
    v1::AddRatingsRequest b;
    for (int u = 0; u < 5; ++u) {
      *b.add_ratings() = Row(U(u + r), I((u * 3 + r) % 40), 1 + (u + r) % 5);
    }
    if (r == 2) *b.add_ratings() = Row(U(0), "i-new", 4);
    ASSERT_TRUE(service_->AddRatings({b}).ok());
    service_->FlushOnlineForTest();
  }
  EXPECT_EQ(service_->online_for_test().full_copies(), 8);
  // Everything online updates change, bit for bit (the training summary's
  // wall time differs between the two services).
  const std::shared_ptr<const Model> served =
      service_->registry_for_test().Current().model;
  const Model& whole = *served;
  ASSERT_EQ(whole.num_items(), incremental->num_items());
  ASSERT_EQ(whole.members().size(), incremental->members().size());
  for (size_t e = 0; e < whole.members().size(); ++e) {
    EXPECT_TRUE(whole.members()[e] == incremental->members()[e])
        << "member " << e;
  }
  EXPECT_TRUE(whole.item_hist() == incremental->item_hist());
  EXPECT_TRUE(whole.item_x() == incremental->item_x());
  EXPECT_TRUE(whole.item_hT() == incremental->item_hT());
  EXPECT_TRUE(whole.item_in_irbm() == incremental->item_in_irbm());
  EXPECT_TRUE(whole.item_rbm() == incremental->item_rbm());
}

TEST_F(OnlineUpdaterTest, HistogramDeltasComeFromPreviousRatings) {
  LoadSynthetic();
  TrainDone();
  const std::shared_ptr<const Model> held =
      service_->registry_for_test().Current().model;
  const Model& before = *held;
  const int32_t item = before.items().Find("i3");
  ASSERT_GE(item, 0);
  const int K = before.K();
  std::vector<uint32_t> hist(before.item_hist().begin() + item * K,
                             before.item_hist().begin() + (item + 1) * K);
  // u0's stored rating of i3 is replaced twice in one batch (1, then 2) and
  // a new user rates i3 5: -1 at the old value, +1 at 2 and at 5.
  ASSERT_TRUE(testing::Rated(0, 3));
  const double old = testing::PlantedRating(0, 3);
  v1::AddRatingsRequest b;
  *b.add_ratings() = Row(U(0), I(3), 1);
  *b.add_ratings() = Row(U(0), I(3), 2);
  *b.add_ratings() = Row("newcomer", I(3), 5);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  service_->FlushOnlineForTest();
  const std::shared_ptr<const Model> now =
      service_->registry_for_test().Current().model;
  const Model& after = *now;
  std::vector<uint32_t> want = hist;
  uint32_t& removed = want[static_cast<size_t>(*before.scale().Index(old))];
  if (removed > 0) --removed;  // clamped at 0
  want[static_cast<size_t>(*before.scale().Index(2))] += 1;
  want[static_cast<size_t>(*before.scale().Index(5))] += 1;
  std::vector<uint32_t> got(after.item_hist().begin() + item * K,
                            after.item_hist().begin() + (item + 1) * K);
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace rbmrec::server
