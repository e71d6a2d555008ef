#include "server/fast_predict.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/fit.h"
#include "gtest/gtest.h"

namespace rbmrec::server {
namespace {

TEST(PredictAllFast, MatchesModelPredictAll) {
  Dataset ds;
  for (int u = 0; u < 50; ++u) {
    for (int i = 0; i < 30; ++i) {
      if ((u * 5 + i * 3) % 4 == 0) continue;
      Rating r;
      r.user = ds.users.GetOrAdd(absl::StrCat("u", u));
      r.item = ds.items.GetOrAdd(absl::StrCat("i", i));
      r.k = static_cast<uint8_t>(((i % 2) == (u % 2)) ? 4 : 0);
      ds.ratings.push_back(r);
    }
  }
  ds.items.GetOrAdd("never-rated");  // an untrained item -> fallback row
  TrainOptions o;
  o.hidden = 7;
  o.max_epochs = 5;
  o.threads = 1;
  o.ensemble = 2;
  absl::StatusOr<Model> model = FitModel(ds, o);
  ASSERT_TRUE(model.ok()) << model.status();
  UserRatings user;
  user.items = {0, 3, 7};
  user.ks = {4, 0, 2};
  for (PredictMethod method :
       {PredictMethod::kExact, PredictMethod::kMeanField}) {
    RowMatrixXf want, got;
    model->PredictAll(user.view(), method, &want);
    PredictAllFast(*model, user.view(), method, &got);
    ASSERT_EQ(want.rows(), got.rows());
    ASSERT_EQ(want.cols(), got.cols());
    EXPECT_LT((want - got).cwiseAbs().maxCoeff(), 1e-5f);
  }
}

}  // namespace
}  // namespace rbmrec::server
