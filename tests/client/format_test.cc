#include "client/format.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace rbmrec::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(FormatCountTest, GroupsThousands) {
  EXPECT_EQ(FormatCount(0), "0");
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1000), "1,000");
  EXPECT_EQ(FormatCount(1234567), "1,234,567");
  EXPECT_EQ(FormatCount(-1200), "-1,200");
  EXPECT_EQ(FormatCount(std::numeric_limits<int64_t>::min()),
            "-9,223,372,036,854,775,808");
}

TEST(FormatDurationTest, PicksUnits) {
  EXPECT_EQ(FormatDuration(0), "0.0s");
  EXPECT_EQ(FormatDuration(0.42), "0.4s");
  EXPECT_EQ(FormatDuration(9.94), "9.9s");
  EXPECT_EQ(FormatDuration(9.96), "10s");
  EXPECT_EQ(FormatDuration(42.4), "42s");
  EXPECT_EQ(FormatDuration(125), "2m05s");
  EXPECT_EQ(FormatDuration(3725), "1h02m");
  EXPECT_EQ(FormatDuration(-1), "-");
  EXPECT_EQ(FormatDuration(std::numeric_limits<double>::infinity()), "-");
  EXPECT_EQ(FormatDuration(std::nan("")), "-");
}

TEST(FormatRatingTest, DropsNeedlessDigits) {
  EXPECT_EQ(FormatRating(4), "4");
  EXPECT_EQ(FormatRating(3.5), "3.5");
  EXPECT_EQ(FormatRating(0.25), "0.25");
  EXPECT_EQ(FormatRating(-0.0), "0");
}

TEST(FormatBytesTest, BinaryUnits) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(5 << 20), "5.0 MiB");
}

TEST(FormatTimestampTest, UtcAndUnknown) {
  EXPECT_EQ(FormatTimestampMs(1714564224000), "2024-05-01 11:50:24 UTC");
  EXPECT_EQ(FormatTimestampMs(0), "-");
}

TEST(DisplayWidthTest, CountsCodePoints) {
  EXPECT_EQ(DisplayWidth("abc"), 3u);
  EXPECT_EQ(DisplayWidth("Café"), 4u);
  EXPECT_EQ(DisplayWidth("█▏"), 2u);
}

TEST(TruncateTest, CutsAtCodePoints) {
  EXPECT_EQ(Truncate("short", 10, true), "short");
  EXPECT_EQ(Truncate("abcdefghij", 5, true), "abcd…");
  EXPECT_EQ(Truncate("abcdefghij", 5, false), "ab...");
  EXPECT_EQ(Truncate("ééééé", 3, true), "éé…");
  EXPECT_EQ(DisplayWidth(Truncate("Amélie (Fabuleux destin)", 7, true)), 7u);
}

TEST(RenderBarTest, AsciiRoundsToColumns) {
  EXPECT_EQ(RenderBar(0, 4, false), "    ");
  EXPECT_EQ(RenderBar(0.5, 4, false), "##  ");
  EXPECT_EQ(RenderBar(1, 4, false), "####");
  EXPECT_EQ(RenderBar(2, 4, false), "####");   // clamped
  EXPECT_EQ(RenderBar(-1, 4, false), "    ");  // clamped
  EXPECT_EQ(RenderBar(std::nan(""), 4, false), "    ");
  EXPECT_EQ(RenderBar(0.5, 0, false), "");
}

TEST(RenderBarTest, UnicodeHasEighthResolution) {
  EXPECT_EQ(RenderBar(0.5, 4, true), "██  ");
  EXPECT_EQ(RenderBar(1.0 / 32, 4, true), "▏   ");
  EXPECT_EQ(RenderBar(0.3, 4, true), "█▎  ");  // 9.6 eighths -> 10
  EXPECT_EQ(RenderBar(1, 4, true), "████");
}

TEST(RenderBarTest, AlwaysExactlyWidthColumns) {
  for (int width : {1, 7, 40}) {
    for (int i = 0; i <= 1000; ++i) {
      const double f = i / 1000.0;
      EXPECT_EQ(DisplayWidth(RenderBar(f, width, true)),
                static_cast<size_t>(width))
          << f;
      EXPECT_EQ(RenderBar(f, width, false).size(), static_cast<size_t>(width));
    }
  }
}

TEST(FormatTableTest, AlignsAndTrims) {
  Table t;
  t.header = {"a", "bb"};
  t.align = {Align::kRight, Align::kLeft};
  t.rows = {{"ccc", "d"}, {"e"}};
  EXPECT_EQ(FormatTable(t), "  a  bb\nccc  d\n  e\n");
}

TEST(FormatTableTest, MeasuresUtf8ByCodePoints) {
  Table t;
  t.header = {"title", "n"};
  t.align = {Align::kLeft, Align::kRight};
  t.rows = {{"Amélie", "1"}, {"Heat", "10"}};
  EXPECT_EQ(FormatTable(t), "title    n\nAmélie   1\nHeat    10\n");
}

v1::RatingScale Scale1To5() {
  v1::RatingScale s;
  s.set_min(1);
  s.set_max(5);
  s.set_step(1);
  for (int v = 1; v <= 5; ++v) s.add_values(v);
  return s;
}

TEST(FormatDistributionTest, BarChartWithLabelsAndExpectation) {
  v1::ItemPrediction p;
  p.set_item_id("50");
  p.set_title("Star Wars (1977)");
  for (double x : {0.0, 0.1, 0.2, 0.3, 0.4}) p.add_probabilities(x);
  p.set_expected_rating(4.0);
  TextStyle style;
  style.unicode = false;
  style.bar_width = 10;
  EXPECT_EQ(FormatDistribution(Scale1To5(), p, style),
            "50  Star Wars (1977)  expected 4.00\n"
            "    1                0.0%\n"
            "    2  #            10.0%\n"
            "    3  ##           20.0%\n"
            "    4  ###          30.0%\n"
            "    5  ####         40.0%\n");
}

TEST(FormatDistributionTest, HalfStarLabelsAlignAndFallbackIsNoted) {
  v1::RatingScale scale;
  for (int k = 1; k <= 10; ++k) scale.add_values(0.5 * k);
  v1::ItemPrediction p;
  p.set_item_id("x");
  p.set_fallback(true);
  for (int k = 0; k < 10; ++k) p.add_probabilities(0.1);
  TextStyle style;
  style.bar_width = 10;
  const std::string text = FormatDistribution(scale, p, style);
  EXPECT_THAT(text, HasSubstr("fallback"));
  EXPECT_THAT(text, HasSubstr("\n    0.5  █  "));
  EXPECT_THAT(text, HasSubstr("\n      5  █  "));
}

TEST(FormatPredictionsTest, HeaderNamesUserModelAndMethod) {
  v1::PredictRatingsResponse r;
  r.set_model_version(3);
  r.set_folded_in(true);
  *r.mutable_scale() = Scale1To5();
  r.add_predictions()->set_item_id("50");
  const std::string text =
      FormatPredictions(r, "196", v1::MEAN_FIELD, TextStyle());
  EXPECT_THAT(text, HasSubstr("user 196  model v3  mean-field  (folded in)\n"));
  EXPECT_THAT(FormatPredictions(r, "", v1::METHOD_UNSPECIFIED, TextStyle()),
              HasSubstr("anonymous user  model v3  exact"));
}

TEST(FormatRecommendationsTest, ProbabilityColumnOnlyWhenRankedByIt) {
  v1::RecommendResponse r;
  r.set_model_version(2);
  v1::Recommendation* a = r.add_recommendations();
  a->set_rank(1);
  a->set_item_id("50");
  a->set_title("Star Wars (1977)");
  a->set_expected_rating(4.512);
  a->set_probability_at_least(0.875);
  v1::RecommendRequest by_expected;
  EXPECT_EQ(FormatRecommendations(r, by_expected, TextStyle()),
            "model v2\n"
            "rank  item  title             expected\n"
            "   1  50    Star Wars (1977)      4.51\n");
  v1::RecommendRequest by_prob;
  by_prob.set_rank_by(v1::PROBABILITY_AT_LEAST);
  by_prob.set_threshold(4);
  EXPECT_EQ(FormatRecommendations(r, by_prob, TextStyle()),
            "model v2\n"
            "rank  item  title             expected  P(>=4)\n"
            "   1  50    Star Wars (1977)      4.51   87.5%\n");
  // The item regression's ranking: its score beside P(>= t).
  a->set_item_regression_score(0.4567);
  v1::RecommendRequest by_regression;
  by_regression.set_rank_by(v1::ITEM_REGRESSION_AT_LEAST);
  by_regression.set_threshold(4);
  EXPECT_EQ(FormatRecommendations(r, by_regression, TextStyle()),
            "model v2\n"
            "rank  item  title             expected  P(>=4)  regression\n"
            "   1  50    Star Wars (1977)      4.51   87.5%       0.457\n");
}

TEST(FormatRecommendationsTest, LongTitlesAreTruncated) {
  v1::RecommendResponse r;
  v1::Recommendation* a = r.add_recommendations();
  a->set_title(std::string(100, 't'));
  TextStyle style;
  style.max_title_width = 10;
  EXPECT_THAT(FormatRecommendations(r, v1::RecommendRequest(), style),
              HasSubstr("ttttttttt…"));
  v1::RecommendResponse empty;
  EXPECT_THAT(FormatRecommendations(empty, v1::RecommendRequest(), style),
              HasSubstr("no recommendations"));
}

TEST(TerminalSafeTest, EscapesControlBytesAndInvalidUtf8) {
  EXPECT_EQ(TerminalSafe("Caf\xc3\xa9 (1995)"), "Caf\xc3\xa9 (1995)");
  EXPECT_EQ(TerminalSafe(std::string("a\x1b[31mb\0\r\n\x7f", 11)),
            "a\\x1b[31mb\\x00\\x0d\\x0a\\x7f");
  EXPECT_EQ(TerminalSafe("Caf\xe9"), "Caf\\xe9");  // latin-1 byte
  EXPECT_EQ(TerminalSafe("\xc3"), "\\xc3");        // truncated sequence
  EXPECT_EQ(TerminalSafe("\xc2\x9b"
                         "1m"),
            "\\u009b1m");  // C1 CSI
  EXPECT_EQ(TerminalSafe("a\xe2\x80\xae"
                         "b"),
            "a\\u202eb");  // RLO
  EXPECT_EQ(TerminalSafe("a\\b"), "a\\\\b");
}

TEST(TerminalSafeTest, TablesAndDistributionsEscapeIdsAndTitles) {
  v1::RecommendResponse response;
  v1::Recommendation* r = response.add_recommendations();
  r->set_rank(1);
  r->set_item_id("i\x1b]0;pwned\x07");
  r->set_title("T\x9b");  // a lone byte
  const std::string table =
      FormatRecommendations(response, v1::RecommendRequest(), TextStyle());
  EXPECT_THAT(table, HasSubstr("i\\x1b]0;pwned\\x07  T\\x9b"));
  EXPECT_EQ(table.find('\x1b'), std::string::npos);

  v1::ItemPrediction p;
  p.set_item_id("x\ry");
  p.set_title("\x1b[2J");
  const std::string d = FormatDistribution(Scale1To5(), p, TextStyle());
  EXPECT_THAT(d, StartsWith("x\\x0dy  \\x1b[2J  expected"));
  EXPECT_EQ(FormatPredictions(v1::PredictRatingsResponse(), "u\x1b", v1::EXACT,
                              TextStyle())
                .find('\x1b'),
            std::string::npos);
}

TEST(FormatModelsTest, MarksCorruptVersionsAndSaysWhy) {
  v1::ListModelsResponse r;
  v1::ModelInfo* m = r.add_models();
  m->set_version(3);
  m->set_kind("full");
  m->set_corrupt("checksum mismatch");
  r.add_models()->set_version(2);
  const std::string text = FormatModels(r);
  EXPECT_THAT(text, HasSubstr("full  CORRUPT"));
  EXPECT_THAT(text, HasSubstr("v3 is CORRUPT: checksum mismatch"));
  EXPECT_THAT(text, HasSubstr("rbmrec models delete 3"));
  EXPECT_THAT(text, Not(HasSubstr("v2 is CORRUPT")));
}

TEST(FormatDeleteUserTest, SaysWhatWasErasedAndWhatRemains) {
  v1::DeleteUserResponse r;
  r.set_deleted_ratings(91);
  r.set_erased_from_served_model(true);
  r.set_model_versions_rewritten(3);
  r.set_erasures_since_training(2);
  std::string text = FormatDeleteUser("5", r);
  EXPECT_THAT(text, HasSubstr("deleted 91 ratings of user 5"));
  EXPECT_THAT(text,
              HasSubstr("erased the user from the served model and 3 stored "
                        "model versions"));
  EXPECT_THAT(text, HasSubstr("carry 2 erased users until the next training"));
  r.set_retrain_started(true);
  text = FormatDeleteUser("5", r);
  EXPECT_THAT(text, HasSubstr("a full training started"));
  v1::DeleteUserResponse unknown_to_models;
  unknown_to_models.set_deleted_ratings(4);
  text = FormatDeleteUser("7", unknown_to_models);
  EXPECT_THAT(text, Not(HasSubstr("erased the user")));
}

TEST(FormatModelsTest, MarksActiveVersion) {
  v1::ListModelsResponse r;
  EXPECT_THAT(FormatModels(r), HasSubstr("no models yet"));
  v1::ModelInfo* m = r.add_models();
  m->set_version(2);
  m->set_active(true);
  m->set_kind("full");
  m->set_created_unix_ms(1714564224000);
  m->set_n_users(943);
  m->set_n_items(1682);
  m->set_n_ratings(100000);
  m->set_validation_rmse(0.91234);
  m->set_epochs(40);
  m->set_size_bytes(3 << 20);
  r.add_models()->set_version(1);
  const std::string text = FormatModels(r);
  EXPECT_THAT(text, HasSubstr("*       v2  2024-05-01 11:50:24 UTC  full"));
  EXPECT_THAT(text, HasSubstr("  kind  pinned  users"));
  EXPECT_THAT(text, HasSubstr("full            943"));  // not pinned
  r.mutable_models(0)->set_pinned(true);
  r.mutable_models(0)->set_kind("full\x1b[2J");
  EXPECT_THAT(FormatModels(r), HasSubstr("*       v2  2024-05-01 11:50:24 UTC  "
                                         "full\\x1b[2J  pinned"));
  EXPECT_THAT(text, HasSubstr("100,000"));
  EXPECT_THAT(text, HasSubstr("0.9123"));
  EXPECT_THAT(text, HasSubstr("3.0 MiB"));
  EXPECT_THAT(text, HasSubstr("\n        v1  -"));
}

TEST(FormatStatsTest, IdleAndRunning) {
  v1::GetStatsResponse s;
  s.set_users(943);
  s.set_items(1682);
  s.set_ratings(100000);
  EXPECT_EQ(FormatStats(s),
            "users           943\n"
            "items           1,682\n"
            "ratings         100,000\n"
            "active model    none\n"
            "training        idle\n"
            "online updates  0\n"
            "model versions  0\n"
            "database size   unknown\n");
  s.set_views(2500);  // shown when there are any
  EXPECT_THAT(FormatStats(s), HasSubstr("ratings         100,000\n"
                                        "views           2,500\n"
                                        "active model"));
  s.set_model_versions(12);
  s.set_database_bytes(int64_t{3} << 30);
  EXPECT_THAT(FormatStats(s), HasSubstr("model versions  12\n"
                                        "database size   3.0 GiB\n"));
  s.set_active_model_version(4);
  s.mutable_training()->set_running(true);
  s.mutable_training()->set_epoch(3);
  s.mutable_training()->set_max_epochs(40);
  s.mutable_training()->set_elapsed_seconds(75);
  EXPECT_THAT(FormatStats(s), HasSubstr("active model    v4\n"));
  EXPECT_THAT(FormatStats(s), HasSubstr("running, epoch 3/40, 1m15s"));
  EXPECT_THAT(FormatStats(s), Not(HasSubstr("model error")));
  s.set_model_load_error("active model version 2 could not be loaded: x");
  EXPECT_THAT(FormatStats(s),
              HasSubstr("model error     active model version 2 could not be "
                        "loaded: x\n"));
  EXPECT_THAT(FormatStats(s), Not(HasSubstr("replica")));  // SQLite
  s.set_leader_address("10.0.0.5:50051");
  EXPECT_THAT(FormatStats(s),
              HasSubstr("replica         follower of 10.0.0.5:50051\n"));
  s.set_leader(true);
  EXPECT_THAT(FormatStats(s),
              HasSubstr("replica         leader (10.0.0.5:50051)\n"));
}

TEST(FormatStatsTest, DatabaseFileAndWalApartAgainstTheLimit) {
  // 12 MiB on disk under --db-max-mb 8: the limit is on the file; the WAL
  // is on top of it.
  v1::GetStatsResponse s;
  s.set_database_bytes(12 << 20);
  s.set_database_file_bytes(8 << 20);
  s.set_wal_bytes(4 << 20);
  s.set_database_max_bytes(8 << 20);
  std::string text = FormatStats(s);
  EXPECT_THAT(text, HasSubstr("model versions  0\n"
                              "database file   8.0 MiB of 8.0 MiB (100% of "
                              "the --db-max-mb limit)\n"
                              "database WAL    4.0 MiB (write-ahead log; not "
                              "counted against the limit)\n"));
  EXPECT_THAT(text, Not(HasSubstr("12.0 MiB")));
  EXPECT_THAT(text, Not(HasSubstr("database size")));
  // No limit.
  s.set_database_max_bytes(0);
  s.set_database_file_bytes(6 << 20);
  text = FormatStats(s);
  EXPECT_THAT(text, HasSubstr("database file   6.0 MiB\n"));
  EXPECT_THAT(text, HasSubstr("database WAL    4.0 MiB (write-ahead log)\n"));
  // A server that sends only the total.
  s.set_database_file_bytes(0);
  s.set_wal_bytes(0);
  EXPECT_THAT(FormatStats(s), HasSubstr("database size   12.0 MiB\n"));
}

TEST(TrainFormatTest, EpochRowsLineUpWithHeader) {
  v1::TrainProgress p;
  p.set_state(v1::TrainProgress::RUNNING);
  p.set_epoch(3);
  p.set_max_epochs(40);
  p.set_train_rmse(0.91234);
  p.set_validation_rmse(0.94561);
  p.set_elapsed_seconds(12);
  p.set_eta_seconds(150);
  p.set_rbm("user");
  EXPECT_EQ(
      EpochTableHeader(),
      "rbm               epoch  train RMSE  valid RMSE   elapsed       ETA\n");
  EXPECT_EQ(
      FormatEpochRow(p),
      "user               3/40      0.9123      0.9456       12s     2m30s\n");
  p.set_validation_rmse(0);
  p.set_eta_seconds(0);
  p.set_rbm("item");
  EXPECT_EQ(
      FormatEpochRow(p),
      "item               3/40      0.9123           -       12s         -\n");
  p.set_rbm("rated");
  p.set_train_rmse(0);
  p.set_validation_ndcg(0.51234);
  EXPECT_EQ(
      FormatEpochRow(p),
      "rated              3/40      0.0000  nDCG 0.512       12s         -\n");
  p.set_rbm("factorisation");
  p.set_train_rmse(0.8123);
  p.set_validation_ndcg(0);
  EXPECT_EQ(
      FormatEpochRow(p),
      "factorisation      3/40      0.8123           -       12s         -\n");
}

TEST(TrainFormatTest, Result) {
  v1::TrainProgress p;
  p.set_state(v1::TrainProgress::SUCCEEDED);
  p.set_epoch(12);
  p.set_model_version(5);
  p.set_elapsed_seconds(62);
  p.set_validation_rmse(0.9);
  p.set_activated(true);
  EXPECT_EQ(FormatTrainResult(p),
            "published model v5 after 12 epochs (all RBMs) in 1m02s, "
            "validation RMSE 0.9000; now active\n");
  p.set_activated(false);
  p.set_message("validation RMSE 0.9 is worse than the active model's 0.8");
  EXPECT_EQ(FormatTrainResult(p),
            "published model v5 after 12 epochs (all RBMs) in 1m02s, "
            "validation RMSE 0.9000; NOT activated (the previous active model "
            "stays): validation RMSE 0.9 is worse than the active model's "
            "0.8\n");
  p.set_state(v1::TrainProgress::FAILED);
  p.set_message("out of memory");
  EXPECT_EQ(FormatTrainResult(p),
            "training failed after 12 epochs: out of memory\n");
  EXPECT_EQ(TrainStateName(v1::TrainProgress::CANCELLED), "CANCELLED");
}

TEST(ImportProgressTest, RateAndEta) {
  ImportProgress p;
  p.rows_sent = 45000;
  p.rows_total = 100000;
  p.elapsed_seconds = 1.0;
  EXPECT_EQ(FormatImportProgress(p),
            "sent 45,000/100,000 rows (45%)  45,000 rows/s  ETA 1.2s");
  p.rows_total = 0;
  EXPECT_EQ(FormatImportProgress(p), "sent 45,000 rows  45,000 rows/s");
  p.done_sending = true;
  EXPECT_EQ(FormatImportProgress(p),
            "sent 45,000 rows, waiting for the server to commit");
  p.done_sending = false;
  p.elapsed_seconds = 0;
  EXPECT_EQ(FormatImportProgress(p), "sent 45,000 rows");
}

TEST(EvalMetricsTest, RmseAndMae) {
  EvalMetrics m;
  EXPECT_EQ(m.rmse(), 0);
  EXPECT_EQ(m.mae(), 0);
  m.Add(3.6, 5, false);
  m.Add(3.6, 3, true);
  m.Add(3.6, 4, false);
  EXPECT_EQ(m.n, 3);
  EXPECT_EQ(m.n_fallback, 1);
  EXPECT_NEAR(m.rmse(), std::sqrt((1.96 + 0.36 + 0.16) / 3), 1e-12);
  EXPECT_NEAR(m.mae(), (1.4 + 0.6 + 0.4) / 3, 1e-12);
  m.model_version = 3;
  EXPECT_THAT(FormatEvalMetrics(m), HasSubstr("RMSE        0.9092\n"));
  EXPECT_THAT(FormatEvalMetrics(m), HasSubstr("n_fallback  1\n"));
  EXPECT_THAT(FormatEvalMetrics(m), Not(HasSubstr("n_skipped")));
  m.n_skipped = 3;
  m.n_off_scale = 2;
  EXPECT_THAT(FormatEvalMetrics(m),
              HasSubstr("n_skipped   3 (2 off the rating scale)\n"));
}

// ---------------------------------------------------------------------------
// JSON

TEST(JsonTest, DumpEscapesAndKeepsKeyOrder) {
  Json j = Json::object();
  j["z"] = "a\"b\\c\n\x01\xc3\xa9";
  j["a"] = 1;
  j["b"] = Json::array({1, "x", Json::object(), nullptr});
  j["c"] = false;
  j["d"] = JsonNumber(0.5);
  EXPECT_EQ(DumpJson(j),
            "{\"z\":\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\",\"a\":1,"
            "\"b\":[1,\"x\",{},null],\"c\":false,\"d\":0.5}");
  // Bytes that are not UTF-8 cannot throw: they become U+FFFD.
  EXPECT_EQ(DumpJson(Json("\xe9")), "\"\xef\xbf\xbd\"");
}

TEST(JsonTest, DoublesAreShortestExactAndNonFiniteNull) {
  EXPECT_EQ(DumpJson(JsonNumber(0.1)), "0.1");
  EXPECT_EQ(DumpJson(JsonNumber(1.0 / 3)), "0.3333333333333333");
  EXPECT_EQ(Json::parse(DumpJson(JsonNumber(1e300))).get<double>(), 1e300);
  EXPECT_EQ(DumpJson(JsonNumber(std::nan(""))), "null");
  EXPECT_EQ(DumpJson(JsonNumber(-std::numeric_limits<double>::infinity())),
            "null");
}

TEST(JsonTest, ProtoJsonEmbedsAMessage) {
  v1::RejectedRow row;
  row.set_batch(3);
  row.set_user_id("u");
  EXPECT_EQ(DumpJson(Json{{"row", ProtoJson(row)}}),
            R"({"row":{"batch":3,"row":0,"user_id":"u","item_id":"",)"
            R"("reason":""}})");
}

TEST(JsonTest, ProtoFieldsNamesEnumsAndInt64AsNumbers) {
  v1::PredictRatingsResponse r;
  r.set_model_version(3);
  *r.mutable_scale() = Scale1To5();
  v1::ItemPrediction* p = r.add_predictions();
  p->set_item_id("50");
  p->add_probabilities(0.1);
  p->add_probabilities(0.9);
  p->set_expected_rating(4.9);
  p->set_fallback(true);
  p->set_title("Star \"Wars\"");
  EXPECT_EQ(ProtoToJson(r),
            R"({"model_version":3,"scale":{"min":1,"max":5,"step":1,)"
            R"("values":[1,2,3,4,5]},"predictions":[{"item_id":"50",)"
            R"("probabilities":[0.1,0.9],"expected_rating":4.9,)"
            R"("fallback":true,"title":"Star \"Wars\""}],"folded_in":false})");

  v1::TrainProgress t;
  t.set_state(v1::TrainProgress::SUCCEEDED);
  EXPECT_THAT(ProtoToJson(t), HasSubstr(R"("state":"SUCCEEDED")"));
}

TEST(JsonTest, ProtoOptionalFieldsOnlyWhenSetAndMaps) {
  v1::TrainOptions o;
  EXPECT_EQ(ProtoToJson(o), "{}");
  o.set_hidden(0);
  o.set_seed(std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(ProtoToJson(o), R"({"hidden":0,"seed":18446744073709551615})");

  v1::Item item;
  item.set_item_id("1");
  (*item.mutable_attributes())["b"] = "2";
  (*item.mutable_attributes())["a"] = "1";
  // Map entries in protobuf's order (not sorted).
  EXPECT_THAT(ProtoToJson(item), StartsWith(R"({"item_id":"1","title":"",)"
                                            R"("attributes":{")"));
  EXPECT_THAT(ProtoToJson(item), HasSubstr(R"("a":"1")"));
  EXPECT_THAT(ProtoToJson(item), HasSubstr(R"("b":"2")"));

  v1::GetStatsResponse s;  // unset message field: omitted
  EXPECT_THAT(ProtoToJson(s), Not(HasSubstr("training")));
  s.mutable_training();
  EXPECT_THAT(ProtoToJson(s),
              HasSubstr(R"("training":{"running":false,"epoch":0,)"
                        R"("max_epochs":0,"elapsed_seconds":0,)"
                        R"("validation_rmse":0,"rbm":""})"));
  v1::TrainRequest t;  // unset options omitted, enum by name
  EXPECT_EQ(ProtoToJson(t),
            R"({"activation":"ACTIVATION_POLICY_UNSPECIFIED"})");
}

TEST(JsonTest, Int64InRepeatedFieldsAndStringsThatLookLikeNumbers) {
  v1::PruneModelsResponse prune;
  prune.add_deleted_versions(12);
  prune.add_deleted_versions(int64_t{1} << 53);
  prune.set_freed_bytes(-1);
  EXPECT_EQ(ProtoToJson(prune),
            R"({"deleted_versions":[12,9007199254740992],"freed_bytes":-1})");
  v1::RejectedRow row;  // numeric-looking ids stay strings
  row.set_batch(3);
  row.set_user_id("196");
  row.set_item_id("-5");
  row.set_reason("7");
  EXPECT_EQ(ProtoToJson(row),
            R"({"batch":3,"row":0,"user_id":"196","item_id":"-5",)"
            R"("reason":"7"})");
}

TEST(JsonTest, StringsAreEscaped) {
  v1::Recommendation r;
  r.set_item_id(std::string("a\x1b[31m\0\"\\", 9));
  EXPECT_THAT(ProtoToJson(r),
              HasSubstr(R"("item_id":"a\u001b[31m\u0000\"\\")"));
}

TEST(JsonTest, ProtoJsonParsesBackWithProtobuf) {
  v1::GetStatsResponse s;
  s.set_users(943);
  s.set_ratings(int64_t{1} << 40);
  s.set_active_model_version(7);
  s.mutable_training()->set_running(true);
  s.mutable_training()->set_elapsed_seconds(1.25);
  v1::GetStatsResponse back;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(ProtoToJson(s), &back).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(s, back));

  v1::RecommendRequest request;
  request.set_rank_by(v1::PROBABILITY_AT_LEAST);
  request.set_method(v1::MEAN_FIELD);
  request.add_ratings()->set_item_id("x");
  v1::RecommendRequest request_back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ProtoToJson(request),
                                                          &request_back)
                  .ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(request,
                                                                 request_back));
}

}  // namespace
}  // namespace rbmrec::client
