#include "core/model_file.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/item_regression.h"
#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

// With the item regression (12 x 12) unless `regression` is false; with
// the matrix factorisation (core/mf.h, 4 factors trained on the same
// ratings, a blend set by hand) when `mf`.
Model SmallModel(bool regression = true, bool mf = false) {
  auto s = testing_data::PlantedRatings(30, 12, 2, 0.5, 4);
  TrainOptions o;
  o.hidden = 6;
  o.max_epochs = 2;
  o.ensemble = 2;
  o.item_regression = regression ? -1 : 0;
  o.mf_factors = 0;
  auto m = FitModel(s.train, o);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!mf) return *std::move(m);
  ModelParams params = std::move(*m).TakeParams();
  MfOptions mo;
  mo.factors = 4;
  mo.epochs = 3;
  params.mf = TrainMf(s.train.ByUser(), s.train.scale, mo);
  params.mf.intercept = -0.25f;
  params.mf.rbm_weight = 0.75f;
  params.mf.mf_weight = 0.3f;
  params.options.mf_factors = 4;
  params.summary.mf_seconds = 0.5;
  return Model(std::move(params));
}

void ExpectSameModel(const Model& a, const Model& b) {
  EXPECT_EQ(a.scale(), b.scale());
  EXPECT_TRUE(a.users() == b.users());
  EXPECT_TRUE(a.items() == b.items());
  EXPECT_EQ(a.item_hist(), b.item_hist());
  ASSERT_EQ(a.members().size(), b.members().size());
  for (size_t e = 0; e < a.members().size(); ++e) {
    EXPECT_TRUE(a.members()[e] == b.members()[e]);
  }
  EXPECT_GT(a.item_rbm().F, 0);
  EXPECT_TRUE(a.item_rbm() == b.item_rbm());
  EXPECT_TRUE(a.item_x() == b.item_x());
  EXPECT_EQ(a.item_in_irbm(), b.item_in_irbm());
  EXPECT_EQ(a.params().user_weight, b.params().user_weight);
  EXPECT_EQ(a.params().user_weight_per_log_user,
            b.params().user_weight_per_log_user);
  EXPECT_EQ(a.params().user_weight_per_log_item,
            b.params().user_weight_per_log_item);
  EXPECT_EQ(a.options().item_based, b.options().item_based);
  EXPECT_EQ(a.options().conditional, b.options().conditional);
  EXPECT_EQ(a.summary().rating_epochs, b.summary().rating_epochs);
  EXPECT_EQ(a.options().hidden, b.options().hidden);
  EXPECT_EQ(a.options().seed, b.options().seed);
  EXPECT_EQ(a.options().ensemble, b.options().ensemble);
  EXPECT_EQ(a.options().cd.ToString(), b.options().cd.ToString());
  EXPECT_EQ(a.summary().epochs_run, b.summary().epochs_run);
  EXPECT_TRUE(a.HasRatedRbm());
  EXPECT_TRUE(a.rated_rbm() == b.rated_rbm());
  EXPECT_EQ(a.options().rated_hidden, b.options().rated_hidden);
  EXPECT_EQ(a.summary().rated_epochs, b.summary().rated_epochs);
  EXPECT_EQ(a.summary().rated_valid_ndcg, b.summary().rated_valid_ndcg);
  EXPECT_EQ(a.options().item_regression, b.options().item_regression);
  EXPECT_EQ(a.options().item_lambda, b.options().item_lambda);
  EXPECT_EQ(a.options().mf_factors, b.options().mf_factors);
  EXPECT_EQ(a.options().mf_epochs, b.options().mf_epochs);
  EXPECT_EQ(a.options().mf_lambda, b.options().mf_lambda);
  EXPECT_EQ(a.summary().mf_seconds, b.summary().mf_seconds);
  ASSERT_EQ(a.HasMf(), b.HasMf());
  if (a.HasMf()) {
    const MfParams &x = a.params().mf, &y = b.params().mf;
    EXPECT_EQ(x.factors, y.factors);
    EXPECT_EQ(x.fold_epochs, y.fold_epochs);
    EXPECT_EQ(x.lambda, y.lambda);
    EXPECT_EQ(x.learning_rate, y.learning_rate);
    EXPECT_EQ(x.seed, y.seed);
    EXPECT_TRUE(x.q == y.q);
    EXPECT_EQ(x.trained, y.trained);
    EXPECT_EQ(x.intercept, y.intercept);
    EXPECT_EQ(x.rbm_weight, y.rbm_weight);
    EXPECT_EQ(x.mf_weight, y.mf_weight);
  }
  ASSERT_EQ(a.HasItemRegression(), b.HasItemRegression());
  if (a.HasItemRegression()) {
    EXPECT_EQ(a.item_regression().items, b.item_regression().items);
    EXPECT_EQ(a.item_regression().lambda, b.item_regression().lambda);
    EXPECT_EQ(a.item_regression().inverse, b.item_regression().inverse);
    EXPECT_EQ(a.item_regression().row_offsets, b.item_regression().row_offsets);
    EXPECT_EQ(a.item_regression().row_items, b.item_regression().row_items);
    EXPECT_EQ(a.item_regression().b8, b.item_regression().b8);  // rebuilt
    EXPECT_EQ(a.summary().item_regression_seconds,
              b.summary().item_regression_seconds);
  }
}

uint64_t Fnv1a64(const char* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

TEST(ModelFile, RoundTripIsBitExact) {
  const Model m = SmallModel(true, true);
  ASSERT_TRUE(m.HasItemRegression());
  ASSERT_TRUE(m.HasMf());
  const std::string bytes = SerializeModel(m);
  auto back = DeserializeModel(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameModel(m, *back);
  EXPECT_EQ(SerializeModel(*back), bytes);

  const std::string path = ::testing::TempDir() + "/model_roundtrip.rbm";
  ASSERT_TRUE(SaveModelFile(m, path).ok());
  auto loaded = LoadModelFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(SerializeModel(*loaded), bytes);
  std::remove(path.c_str());
}

TEST(ModelFile, EveryTruncationIsRejected) {
  const std::string bytes = SerializeModel(SmallModel());
  for (size_t n = 0; n < bytes.size(); n += (n < 64 ? 1 : 97)) {
    auto r = DeserializeModel(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(r.ok()) << "accepted a file truncated to " << n << " bytes";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  }
  EXPECT_FALSE(DeserializeModel(bytes + "x").ok());
}

TEST(ModelFile, EveryFlippedByteIsRejected) {
  const std::string bytes = SerializeModel(SmallModel());
  for (size_t i = 0; i < bytes.size(); i += (i < 128 ? 1 : 13)) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    auto r = DeserializeModel(bad);
    ASSERT_FALSE(r.ok()) << "accepted a flip at byte " << i;
  }
  std::string bad = bytes;
  bad[bad.size() / 2] ^= 1;
  EXPECT_NE(DeserializeModel(bad).status().message().find("checksum"),
            std::string::npos);
  bad = bytes;
  bad[0] = 'X';
  EXPECT_NE(DeserializeModel(bad).status().message().find("magic"),
            std::string::npos);
}

TEST(ModelFile, NewerFormatVersionFailsClearly) {
  std::string bytes = SerializeModel(SmallModel());
  const uint32_t v = kModelFormatVersion + 1;
  std::memcpy(&bytes[8], &v, sizeof(v));
  auto r = DeserializeModel(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("newer"), std::string::npos);
}

// The bytes of `current` (this build's format) as an older version's file:
// the payload without its last `tail` bytes (the fields added since), the
// older version in the header and a new checksum.
std::string AsOlderVersion(const std::string& current, uint32_t version,
                           size_t tail) {
  const size_t payload = current.size() - 24 - 8 - tail;
  std::string old = current.substr(0, 24 + payload);
  const uint64_t length = payload;
  std::memcpy(&old[8], &version, sizeof(version));
  std::memcpy(&old[16], &length, sizeof(length));
  const uint64_t sum = Fnv1a64(old.data(), old.size());
  old.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
  return old;
}

// Version 3 added the U/I weight's two slopes (2 floats), version 4 the
// parameter averaging and ordinal sharing options (a float and a byte),
// version 5 the conditional option (a byte) and each member's D (its rows,
// 0 in SmallModel's two members, and no floats), version 6 the item
// regression's options, seconds and items (0 in SmallModel(false)),
// version 8 the matrix factorisation's options, seconds and factors (0 in
// SmallModel without `mf`), version 9 the item regression's column map (0:
// none, or column c is item c, as in SmallModel).
constexpr size_t kVersion9Tail = 4;
constexpr size_t kVersion8Tail = 4 + 4 + 4 + 8 + 4 + kVersion9Tail;
constexpr size_t kVersion6Tail = 4 + 4 + 8 + 4 + kVersion8Tail;
constexpr size_t kVersion5Tail = 1 + 2 * 4 + kVersion6Tail;
constexpr size_t kVersion4Tail = 4 + 1 + kVersion5Tail;
constexpr size_t kVersion3Tail = 2 * 4 + kVersion4Tail;

// A version 1 file (before the rated RBM): a model without it, minus the
// version 2 tail (3 options, 3 summary fields, the rated RBM's (m, K, F =
// 0)) and version 3's. It loads, without the rated RBM and with
// rated_hidden 0.
TEST(ModelFile, VersionOneLoadsWithoutTheRatedRbm) {
  ModelParams params = SmallModel(false).TakeParams();
  params.rated_rbm = RbmParams{};
  constexpr size_t kVersion2Tail = 4 + 4 + 4 + 4 + 8 + 8 + 3 * 4;
  const std::string v1 =
      AsOlderVersion(SerializeModel(Model(std::move(params))), 1,
                     kVersion2Tail + kVersion3Tail);
  auto back = DeserializeModel(v1);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->HasRatedRbm());
  EXPECT_EQ(back->options().rated_hidden, 0);
  EXPECT_GT(back->members().size(), 0u);
  // Written again, it is a current file that says the same.
  auto again = DeserializeModel(SerializeModel(*back));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->HasRatedRbm());
}

// A version 2 file (one global U/I weight in [0, 1]) loads with that weight
// and zero slopes; a version 2 weight outside [0, 1] is corrupt, while
// version 3 takes any intercept within +-10 (the weight is clamped).
TEST(ModelFile, VersionTwoLoadsWithOneGlobalWeight) {
  ModelParams params = SmallModel(false).TakeParams();
  ASSERT_GT(params.item_rbm.F, 0);
  params.user_weight = 0.25f;
  params.user_weight_per_log_user = 0.125f;
  params.user_weight_per_log_item = -0.5f;
  const std::string v3 = SerializeModel(Model(params));
  auto back = DeserializeModel(AsOlderVersion(v3, 2, kVersion3Tail));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->params().user_weight, 0.25f);
  EXPECT_EQ(back->params().user_weight_per_log_user, 0.0f);
  EXPECT_EQ(back->params().user_weight_per_log_item, 0.0f);
  EXPECT_TRUE(back->HasRatedRbm());

  params.user_weight = 1.5f;
  const std::string outside = SerializeModel(Model(params));
  ASSERT_TRUE(DeserializeModel(outside).ok());
  auto bad = DeserializeModel(AsOlderVersion(outside, 2, kVersion3Tail));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("user weight"), std::string::npos);
  params.user_weight_per_log_item = std::nanf("");
  bad = DeserializeModel(SerializeModel(Model(params)));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("slopes"), std::string::npos);
}

// A version 3 file (before parameter averaging and ordinal sharing) loads
// with average 0 and ordinal false; a current file keeps the options, and an
// average outside [0, 1) is corrupt.
TEST(ModelFile, VersionThreeLoadsWithoutAveraging) {
  ModelParams params = SmallModel(false).TakeParams();
  params.options.average = 0.5f;
  params.options.ordinal = true;
  const std::string v4 = SerializeModel(Model(params));
  auto now = DeserializeModel(v4);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->options().average, 0.5f);
  EXPECT_TRUE(now->options().ordinal);
  params.options.ordinal = false;
  auto off = DeserializeModel(SerializeModel(Model(params)));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->options().ordinal);
  auto back = DeserializeModel(AsOlderVersion(v4, 3, kVersion4Tail));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->options().average, 0.0f);
  EXPECT_FALSE(back->options().ordinal);
  EXPECT_EQ(back->params().user_weight_per_log_item,
            params.user_weight_per_log_item);
  params.options.average = 1.0f;
  auto bad = DeserializeModel(SerializeModel(Model(params)));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("average"), std::string::npos);
}

TEST(ModelFile, MissingFileAndUnwritablePath) {
  EXPECT_EQ(LoadModelFile("/nonexistent/dir/m.rbm").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(SaveModelFile(SmallModel(), "/nonexistent/dir/m.rbm").ok());
}

// A conditional model's D (and the option) survive the file bit for bit;
// a D of the wrong shape is corrupt.
TEST(ModelFile, ConditionalRoundTrip) {
  auto s = testing_data::PlantedRatings(30, 12, 2, 0.5, 4);
  TrainOptions o;
  o.hidden = 6;
  o.max_epochs = 2;
  o.ensemble = 2;
  o.conditional = true;
  auto m = FitModel(s.train, o);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->members()[1].conditional());
  EXPECT_GT(m->members()[1].D.norm(), 0);
  const std::string bytes = SerializeModel(*m);
  auto back = DeserializeModel(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameModel(*m, *back);
  EXPECT_TRUE(back->options().conditional);
  EXPECT_TRUE(back->members()[1].D == m->members()[1].D);
  ModelParams params = std::move(*m).TakeParams();
  params.members[0].D.resize(3, params.members[0].F);
  params.members[0].D.setZero();
  auto bad = DeserializeModel(SerializeModel(Model(std::move(params))));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(D)"), std::string::npos);
}

// A version 4 file (before the conditional RBM) loads as plain RBMs, the
// same model as the current file says.
TEST(ModelFile, VersionFourLoadsAsPlainRbms) {
  const Model model = SmallModel(false);
  const std::string v5 = SerializeModel(model);
  auto back = DeserializeModel(AsOlderVersion(v5, 4, kVersion5Tail));
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameModel(model, *back);
  EXPECT_FALSE(back->options().conditional);
  for (const RbmParams& p : back->members()) EXPECT_FALSE(p.conditional());
}

// A version 5 file (before the item regression) loads without it, with
// item_regression 0.
TEST(ModelFile, VersionFiveLoadsWithoutTheItemRegression) {
  const Model model = SmallModel(false);
  auto back =
      DeserializeModel(AsOlderVersion(SerializeModel(model), 5, kVersion6Tail));
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameModel(model, *back);
  EXPECT_FALSE(back->HasItemRegression());
}

// A version 6 file holds all of P; version 7 its lower triangle. Both load
// the same P.
TEST(ModelFile, VersionSixLoadsTheWholeInverse) {
  const Model model = SmallModel();
  ASSERT_TRUE(model.HasItemRegression());
  const ItemRegression& reg = model.item_regression();
  const size_t n = static_cast<size_t>(reg.items);
  const std::string v7 =
      AsOlderVersion(SerializeModel(model), 7, kVersion8Tail);
  // After P: the rows' count, each row's length and their items.
  const size_t after =
      4 * (1 + (reg.row_offsets.size() - 1) + reg.row_items.size());
  const size_t end = v7.size() - 8 - after;        // where P's floats end
  const size_t begin = end - 4 * n * (n + 1) / 2;  // and begin
  std::string v6 = v7.substr(0, begin);
  v6.append(reinterpret_cast<const char*>(reg.inverse.data()), 4 * n * n);
  v6.append(v7, end, after);
  const uint32_t version = 6;
  const uint64_t length = v6.size() - 24;
  std::memcpy(&v6[8], &version, sizeof(version));
  std::memcpy(&v6[16], &length, sizeof(length));
  const uint64_t sum = Fnv1a64(v6.data(), v6.size());
  v6.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
  auto back = DeserializeModel(v6);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameModel(model, *back);
  // The current file is smaller by P's strict upper triangle.
  EXPECT_EQ(v6.size() - v7.size(), 4 * n * (n - 1) / 2);
}

// A stored item regression that is not a valid P is refused, before any
// allocation of its claimed size.
TEST(ModelFile, BadItemRegressionIsRejected) {
  ModelParams params = SmallModel().TakeParams();
  auto reg = std::make_shared<ItemRegression>(*params.item_regression);
  reg->inverse[5 * 12 + 5] = -1.0f;  // a diagonal entry must be > 0
  params.item_regression = reg;
  auto r = DeserializeModel(SerializeModel(Model(std::move(params))));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("item regression"), std::string::npos);
  // More items than the model has.
  params = SmallModel().TakeParams();
  reg = std::make_shared<ItemRegression>(*params.item_regression);
  reg->items = 13;
  reg->inverse.resize(13 * 13, 1.0f);
  params.item_regression = reg;
  r = DeserializeModel(SerializeModel(Model(std::move(params))));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("item regression size"),
            std::string::npos);
}

// An item regression over fewer columns than items (the most rated) is
// stored with its column map and reads back the same; a map that is not
// increasing, names an item the model lacks or has another length is
// refused.
TEST(ModelFile, ItemRegressionOverFewerColumnsRoundTrips) {
  auto s = testing_data::PlantedRatings(30, 12, 2, 0.5, 4);
  ItemRegressionOptions ro;
  ro.columns = 5;
  absl::StatusOr<ItemRegression> fit = FitItemRegression(s.train.ByUser(), ro);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->item_of.size(), 5u);
  const auto with_columns = [&](std::vector<int32_t> item_of) {
    ModelParams params = SmallModel().TakeParams();
    auto reg = std::make_shared<ItemRegression>(*fit);
    reg->item_of = std::move(item_of);
    params.item_regression = reg;
    return SerializeModel(Model(std::move(params)));
  };
  auto back = DeserializeModel(with_columns(fit->item_of));
  ASSERT_TRUE(back.ok()) << back.status();
  const ItemRegression& got = back->item_regression();
  EXPECT_EQ(got.items, 5);
  EXPECT_EQ(got.item_of, fit->item_of);
  EXPECT_EQ(got.inverse, fit->inverse);
  EXPECT_EQ(got.row_items, fit->row_items);
  EXPECT_EQ(got.b8, fit->b8);

  std::vector<int32_t> bad = fit->item_of;
  bad[1] = bad[0];  // not increasing
  std::vector<int32_t> beyond = fit->item_of;
  beyond.back() = 12;  // the model has items 0..11
  std::vector<int32_t> shorter = fit->item_of;
  shorter.pop_back();
  for (const auto& map : {bad, beyond, shorter}) {
    auto r = DeserializeModel(with_columns(map));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find("item regression columns"),
              std::string::npos)
        << r.status();
  }
}

// A version 7 file (before the matrix factorisation) loads without it.
TEST(ModelFile, VersionSevenLoadsWithoutTheFactorisation) {
  const Model model = SmallModel();
  auto back =
      DeserializeModel(AsOlderVersion(SerializeModel(model), 7, kVersion8Tail));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->HasMf());
  EXPECT_EQ(back->options().mf_factors, 0);
  ExpectSameModel(model, *back);
}

// Stored item factors that are not finite, or more rows than the model has
// items, are refused.
TEST(ModelFile, BadFactorisationIsRejected) {
  ModelParams params = SmallModel(true, true).TakeParams();
  params.mf.q(3, 1) = NAN;
  auto r = DeserializeModel(SerializeModel(Model(std::move(params))));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("matrix factorisation factors"),
            std::string::npos);
  params = SmallModel(true, true).TakeParams();
  params.mf.q.conservativeResize(13, Eigen::NoChange);
  params.mf.q.row(12).setZero();
  params.mf.trained.push_back(0);
  r = DeserializeModel(SerializeModel(Model(std::move(params))));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("matrix factorisation rows"),
            std::string::npos);
  params = SmallModel(true, true).TakeParams();
  params.mf.fold_epochs = kMaxMfFoldEpochs + 1;
  r = DeserializeModel(SerializeModel(Model(std::move(params))));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad matrix factorisation"),
            std::string::npos);
}

}  // namespace
}  // namespace rbmrec
