// EventsFromChanges: the change feed's records as online-update events. (The
// replicas themselves are tested end to end in replicas_test.sh, and the
// feed and lease in tests/store/store_test.cc.)
#include "server/models/replication.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rbmrec::server {
namespace {

using Kind = store::ChangeRecord::Kind;

store::ChangeRecord Rec(Kind kind, std::string user, std::string item,
                        double rating,
                        std::optional<double> previous = std::nullopt) {
  return store::ChangeRecord::Make(kind, std::move(user), std::move(item),
                                   rating, previous);
}

TEST(EventsFromChanges, UpsertsGiveTheSameEventsAsALocalWrite) {
  const std::vector<store::ChangeRecord> records = {
      Rec(Kind::kUpsert, "u", "a", 4), Rec(Kind::kUpsert, "v", "a", 2, 5),
      Rec(Kind::kUpsert, "u", "a", 5, 4), Rec(Kind::kUpsert, "v", "b", 3, 3)};
  std::vector<store::RatingRow> rows;
  std::vector<std::optional<double>> previous;
  for (const store::ChangeRecord& r : records) {
    rows.push_back({r.user, r.item, r.rating, 0});
    previous.push_back(r.previous);
  }
  const std::vector<OnlineEvent> local = EventsFromUpsert(rows, previous);
  const std::vector<OnlineEvent> remote = EventsFromChanges(records);
  ASSERT_EQ(remote.size(), local.size());
  ASSERT_EQ(remote.size(), 2u);
  for (size_t e = 0; e < remote.size(); ++e) {
    EXPECT_EQ(remote[e].user, local[e].user);
    EXPECT_EQ(remote[e].update, local[e].update);
    ASSERT_EQ(remote[e].deltas.size(), local[e].deltas.size());
    for (size_t d = 0; d < remote[e].deltas.size(); ++d) {
      EXPECT_EQ(remote[e].deltas[d].item, local[e].deltas[d].item);
      EXPECT_EQ(remote[e].deltas[d].rating, local[e].deltas[d].rating);
      EXPECT_EQ(remote[e].deltas[d].delta, local[e].deltas[d].delta);
    }
  }
  // u: a new rating a=5 (4 then 5 in one call: +1 at 5); v: a from 5 to 2
  // (-1 at 5, +1 at 2), b unchanged (no delta, still an update).
  EXPECT_EQ(remote[0].user, "u");
  ASSERT_EQ(remote[0].deltas.size(), 1u);
  EXPECT_EQ(remote[0].deltas[0].rating, 5);
  EXPECT_EQ(remote[0].deltas[0].delta, +1);
  EXPECT_EQ(remote[1].deltas.size(), 2u);
}

TEST(EventsFromChanges, DeletesAndDeletedUsers) {
  const std::vector<OnlineEvent> events = EventsFromChanges({
      Rec(Kind::kDelete, "u", "a", 4),
      Rec(Kind::kDelete, "w", "a", 1),
      Rec(Kind::kUserDeleted, "w", "", 0),
      Rec(Kind::kItem, "", "a", 0),
      Rec(Kind::kUserDeleted, "nobody", "", 0),  // no ratings: no event
      Rec(Kind::kUpsert, "u", "b", 3),
  });
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].user, "u");
  EXPECT_TRUE(events[0].update);  // DeleteRatings: the user is updated
  ASSERT_EQ(events[0].deltas.size(), 1u);
  EXPECT_EQ(events[0].deltas[0].delta, -1);
  EXPECT_EQ(events[0].deltas[0].rating, 4);
  EXPECT_EQ(events[1].user, "w");
  EXPECT_FALSE(events[1].update);  // DeleteUser: nothing left to update
  ASSERT_EQ(events[1].deltas.size(), 1u);
  EXPECT_EQ(events[2].user, "u");  // the later upsert, in order
  ASSERT_EQ(events[2].deltas.size(), 1u);
  EXPECT_EQ(events[2].deltas[0].delta, +1);
}

}  // namespace
}  // namespace rbmrec::server
