#include "core/model_file.h"

#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

Model SmallModel() {
  auto s = testing_data::PlantedRatings(30, 12, 2, 0.5, 4);
  TrainOptions o;
  o.hidden = 6;
  o.max_epochs = 2;
  o.ensemble = 2;
  auto m = FitModel(s.train, o);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
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
  EXPECT_EQ(a.user_weight(), b.user_weight());
  EXPECT_EQ(a.options().item_based, b.options().item_based);
  EXPECT_EQ(a.summary().rating_epochs, b.summary().rating_epochs);
  EXPECT_EQ(a.options().hidden, b.options().hidden);
  EXPECT_EQ(a.options().seed, b.options().seed);
  EXPECT_EQ(a.options().ensemble, b.options().ensemble);
  EXPECT_EQ(a.options().cd.ToString(), b.options().cd.ToString());
  EXPECT_EQ(a.summary().epochs_run, b.summary().epochs_run);
}

TEST(ModelFile, RoundTripIsBitExact) {
  const Model m = SmallModel();
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

TEST(ModelFile, MissingFileAndUnwritablePath) {
  EXPECT_EQ(LoadModelFile("/nonexistent/dir/m.rbm").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(SaveModelFile(SmallModel(), "/nonexistent/dir/m.rbm").ok());
}

}  // namespace
}  // namespace rbmrec
