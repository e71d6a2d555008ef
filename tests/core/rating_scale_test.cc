#include "core/rating_scale.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rbmrec {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

TEST(RatingScaleTest, DefaultIsOneToFive) {
  const RatingScale scale;
  EXPECT_EQ(scale.K(), 5);
  EXPECT_EQ(scale.min(), 1.0);
  EXPECT_EQ(scale.max(), 5.0);
  EXPECT_EQ(scale.step(), 1.0);
  EXPECT_EQ(scale.ToString(), "1:5:1");
}

TEST(RatingScaleTest, CreateComputesK) {
  auto five = RatingScale::Create(1, 5, 1);
  ASSERT_TRUE(five.ok()) << five.status();
  EXPECT_EQ(five->K(), 5);
  EXPECT_EQ(*five, RatingScale());

  auto ten = RatingScale::Create(0.5, 5, 0.5);
  ASSERT_TRUE(ten.ok()) << ten.status();
  EXPECT_EQ(ten->K(), 10);
  EXPECT_EQ(ten->Value(0), 0.5);
  EXPECT_EQ(ten->Value(9), 5.0);
  EXPECT_EQ(ten->ToString(), "0.5:5:0.5");

  auto two = RatingScale::Create(0, 1, 1);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->K(), 2);

  auto max = RatingScale::Create(0, 254, 1);
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(max->K(), 255);
}

TEST(RatingScaleTest, CreateRejectsBadScales) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    double min, max, step;
    const char* message;
  };
  const Case cases[] = {
      {5, 1, 1, "min must be less than max"},
      {3, 3, 1, "min must be less than max"},
      {1, 5, 0, "step must be positive"},
      {1, 5, -1, "step must be positive"},
      {1, 5, 0.3, "is not an integer"},
      {0, 255, 1, "need 2 to 255"},
      {0, 1000, 1, "more than 255 values"},
      {nan, 5, 1, "must be finite"},
      {1, inf, 1, "must be finite"},
  };
  for (const Case& c : cases) {
    auto scale = RatingScale::Create(c.min, c.max, c.step);
    ASSERT_FALSE(scale.ok()) << c.min << ":" << c.max << ":" << c.step;
    EXPECT_EQ(scale.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(scale.status()), HasSubstr(c.message));
  }
  EXPECT_THAT(Message(RatingScale::Create(1, 5, 0.3).status()),
              HasSubstr("1:5:0.3"));
}

TEST(RatingScaleTest, ParseAcceptsBothForms) {
  auto a = RatingScale::Parse("1:5:1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->K(), 5);

  auto b = RatingScale::Parse("0.5:5:0.5");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->K(), 10);

  auto c = RatingScale::Parse("1:10");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->K(), 10);
  EXPECT_EQ(c->step(), 1.0);

  auto d = RatingScale::Parse(" 0 : 1 : 0.25 ");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->K(), 5);
}

TEST(RatingScaleTest, ParseRejectsGarbage) {
  for (const char* spec : {"", "5", "1:2:3:4", "1::1"}) {
    auto scale = RatingScale::Parse(spec);
    ASSERT_FALSE(scale.ok()) << spec;
    EXPECT_EQ(scale.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(Message(RatingScale::Parse("5").status()),
              HasSubstr("expected MIN:MAX or MIN:MAX:STEP"));
  EXPECT_THAT(Message(RatingScale::Parse("a:5").status()),
              HasSubstr("'a' is not a number"));
  EXPECT_THAT(Message(RatingScale::Parse("5:1").status()),
              HasSubstr("min must be less than max"));
}

TEST(RatingScaleTest, ToStringRoundTrips) {
  for (const char* spec : {"1:5:1", "0.5:5:0.5", "-1:1:0.1", "0:100:1"}) {
    auto scale = RatingScale::Parse(spec);
    ASSERT_TRUE(scale.ok()) << spec << ": " << scale.status();
    EXPECT_EQ(scale->ToString(), spec);
    auto again = RatingScale::Parse(scale->ToString());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, *scale);
  }
}

TEST(RatingScaleTest, IndexOfEveryValue) {
  const RatingScale five;
  for (int k = 0; k < five.K(); ++k) {
    auto index = five.Index(five.Value(k));
    ASSERT_TRUE(index.ok()) << index.status();
    EXPECT_EQ(*index, k);
  }
  auto half = RatingScale::Create(0.5, 5, 0.5);
  ASSERT_TRUE(half.ok());
  for (int k = 0; k < half->K(); ++k) {
    auto index = half->Index(0.5 * (k + 1));
    ASSERT_TRUE(index.ok()) << index.status();
    EXPECT_EQ(*index, k);
  }
}

TEST(RatingScaleTest, IndexToleratesRoundingNoise) {
  const RatingScale five;
  auto index = five.Index(3.0 + 1e-9);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(*index, 2);
  index = five.Index(5.0 + 1e-9);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(*index, 4);
  index = five.Index(1.0 - 1e-9);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(*index, 0);
  EXPECT_FALSE(five.Index(3.0 + 1e-3).ok());
}

TEST(RatingScaleTest, IndexErrorsNameTheValue) {
  const RatingScale five;
  auto off = five.Index(5.5);
  ASSERT_FALSE(off.ok());
  EXPECT_EQ(off.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(off.status()),
              HasSubstr("rating 5.5 is off the scale 1:5:1"));
  EXPECT_THAT(Message(five.Index(0).status()),
              HasSubstr("rating 0 is off the scale 1:5:1"));
  EXPECT_THAT(Message(five.Index(3.3).status()),
              HasSubstr("rating 3.3 is not on a step of the scale 1:5:1"));
  EXPECT_THAT(Message(five.Index(std::nan("")).status()),
              HasSubstr("rating nan is not finite"));
  EXPECT_THAT(
      Message(five.Index(std::numeric_limits<double>::infinity()).status()),
      HasSubstr("rating inf is not finite"));
}

TEST(RatingScaleTest, IndexErrorsShowEnoughDigitsToSeeWhy) {
  const RatingScale five;
  EXPECT_THAT(Message(five.Index(4.000001).status()),
              HasSubstr("rating 4.000001 is not on a step of the scale 1:5:1"));
  EXPECT_THAT(Message(five.Index(5.00001).status()),
              HasSubstr("rating 5.00001 is off the scale 1:5:1"));
  // 16 significant digits where 16 suffice (not 17).
  EXPECT_THAT(Message(five.Index(5.000000000000001 + 1).status()),
              HasSubstr("rating 6.000000000000001 is off"));
}

TEST(RatingScaleTest, StoredValueIsTheDecimalOfTheIndex) {
  const RatingScale five;
  for (int k = 0; k < five.K(); ++k) EXPECT_EQ(five.StoredValue(k), k + 1.0);
  // Within the tolerance: accepted, and snapped to the scale's value.
  auto k = five.Index(4.0000001);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(five.StoredValue(*k), 4.0);

  auto tenths = RatingScale::Create(0.1, 1, 0.1);
  ASSERT_TRUE(tenths.ok()) << tenths.status();
  EXPECT_NE(tenths->Value(2), 0.3);  // 0.30000000000000004
  EXPECT_EQ(tenths->StoredValue(2), 0.3);
  for (int i = 0; i < tenths->K(); ++i) {
    auto back = tenths->Index(tenths->StoredValue(i));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, i);
  }
  // Small steps away from zero: many digits, and each indexes back.
  auto far = RatingScale::Create(1000, 1000.254, 0.001);
  ASSERT_TRUE(far.ok()) << far.status();
  for (int i = 0; i < far->K(); ++i) {
    auto back = far->Index(far->StoredValue(i));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, i);
  }
}

TEST(RatingScaleTest, InferIntegerScale) {
  auto scale = RatingScale::Infer({3, 1, 5, 2, 4, 4});
  ASSERT_TRUE(scale.ok()) << scale.status();
  EXPECT_EQ(scale->ToString(), "1:5:1");
  EXPECT_EQ(scale->K(), 5);

  scale = RatingScale::Infer({2, 3});
  ASSERT_TRUE(scale.ok()) << scale.status();
  EXPECT_EQ(scale->ToString(), "2:3:1");

  scale = RatingScale::Infer({-1, 1, 0});
  ASSERT_TRUE(scale.ok()) << scale.status();
  EXPECT_EQ(scale->K(), 3);
}

TEST(RatingScaleTest, InferHalfStepScale) {
  auto scale = RatingScale::Infer({4.0, 0.5, 3.5, 5.0});
  ASSERT_TRUE(scale.ok()) << scale.status();
  EXPECT_EQ(scale->ToString(), "0.5:5:0.5");
  EXPECT_EQ(scale->K(), 10);

  scale = RatingScale::Infer({1, 2, 2.5});
  ASSERT_TRUE(scale.ok()) << scale.status();
  EXPECT_EQ(scale->ToString(), "1:2.5:0.5");
  EXPECT_EQ(scale->K(), 4);
}

TEST(RatingScaleTest, InferRejectsBadInput) {
  auto empty = RatingScale::Infer({});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(empty.status()), HasSubstr("no ratings"));

  auto odd = RatingScale::Infer({1, 2.3, 5});
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(odd.status()),
              HasSubstr("rating 2.3 is not a multiple of 0.5"));

  auto nan = RatingScale::Infer({1, std::nan(""), 5});
  ASSERT_FALSE(nan.ok());
  EXPECT_THAT(Message(nan.status()), HasSubstr("rating nan is not finite"));

  auto same = RatingScale::Infer({4, 4, 4});
  ASSERT_FALSE(same.ok());
  EXPECT_THAT(Message(same.status()), HasSubstr("every rating is 4"));

  auto wide = RatingScale::Infer({0, 1000});
  ASSERT_FALSE(wide.ok());
  EXPECT_THAT(Message(wide.status()), HasSubstr("255"));
}

}  // namespace
}  // namespace rbmrec
