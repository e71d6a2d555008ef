// The CLI end to end against an in-process fake rbmrec.v1.Rbmrec service
// (canned answers; no store, no model), plus the exit codes of usage errors
// and of an unreachable server.

#include "client/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/rbmrec.grpc.pb.h"

namespace rbmrec::client {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// Canned behaviour; ratings must be in [1, 5].
class FakeRbmrec final : public v1::Rbmrec::Service {
 public:
  grpc::Status AddRatings(grpc::ServerContext* context,
                          grpc::ServerReader<v1::AddRatingsRequest>* reader,
                          v1::AddRatingsResponse* response) override {
    v1::AddRatingsRequest batch;
    int64_t b = 0;
    // Fails the call with `reason` and the committed counts, as
    // rbmrec-server does.
    auto fail = [&](grpc::StatusCode code, const std::string& reason,
                    const std::string& message) {
      context->AddTrailingMetadata("rbmrec-error-reason", reason);
      if (send_committed) {
        context->AddTrailingMetadata("rbmrec-committed-batches",
                                     absl::StrCat(b));
        context->AddTrailingMetadata("rbmrec-committed-rows",
                                     absl::StrCat(response->accepted()));
      }
      return grpc::Status(code, message);
    };
    while (reader->Read(&batch)) {
      batch_sizes.push_back(batch.ratings_size());
      if (max_batch > 0 && batch.ratings_size() > max_batch) {
        return fail(grpc::StatusCode::RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED",
                    absl::StrCat("batch ", b, " has ", batch.ratings_size(),
                                 " rows, over the server's limit of ",
                                 max_batch, " rows per batch (--max-batch)"));
      }
      if (disk_full_at_batch >= 0 && b == disk_full_at_batch) {
        return fail(grpc::StatusCode::RESOURCE_EXHAUSTED, "STORAGE_FULL",
                    "database or disk is full");
      }
      if (stop_silently_at_batch >= 0 && b == stop_silently_at_batch) {
        break;  // the old defect: answer OK without reading the rest
      }
      for (int row = 0; row < batch.ratings_size(); ++row) {
        const v1::Rating& r = batch.ratings(row);
        if (r.kind() == v1::Rating::VIEW && r.rating() == 0) {
          response->set_accepted(response->accepted() + 1);
          response->set_views(response->views() + 1);
          views.emplace_back(r.user_id(), r.item_id());
          continue;
        }
        if (r.rating() < 1 || r.rating() > 5) {
          response->set_rejected(response->rejected() + 1);
          v1::RejectedRow* rejected = response->add_rejected_rows();
          rejected->set_batch(b);
          rejected->set_row(row);
          rejected->set_user_id(r.user_id());
          rejected->set_item_id(r.item_id());
          rejected->set_reason(
              absl::StrCat("rating ", r.rating(), " is off the scale 1:5:1"));
          continue;
        }
        response->set_accepted(response->accepted() + 1);
        timestamps.push_back(r.timestamp());
        auto [it, inserted] =
            ratings.insert_or_assign({r.user_id(), r.item_id()}, r.rating());
        if (!inserted) response->set_replaced(response->replaced() + 1);
      }
      ++b;
    }
    response->set_batches(b);
    return grpc::Status::OK;
  }

  grpc::Status PutItems(grpc::ServerContext* context,
                        const v1::PutItemsRequest* req,
                        v1::PutItemsResponse* response) override {
    put_items_calls++;
    if (put_items_fail_at_call == put_items_calls) {
      context->AddTrailingMetadata("rbmrec-error-reason", "DATABASE_LOCKED");
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "database is locked \x1b[2J");
    }
    for (const auto& item : req->items()) items[item.item_id()] = item;
    for (const auto& id : req->hide_item_ids()) items[id].set_hidden(true);
    for (const auto& id : req->unhide_item_ids()) items[id].set_hidden(false);
    response->set_stored(req->items_size() + req->hide_item_ids_size() +
                         req->unhide_item_ids_size());
    return grpc::Status::OK;
  }

  grpc::Status Train(grpc::ServerContext*, const v1::TrainRequest* req,
                     grpc::ServerWriter<v1::TrainProgress>* writer) override {
    train_requests.push_back(*req);
    if (req->options().has_hidden() && req->options().hidden() < 1) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "options.hidden must be >= 1");
    }
    v1::TrainProgress p;
    p.set_max_epochs(3);
    p.set_state(v1::TrainProgress::QUEUED);
    writer->Write(p);
    const int members =
        req->options().has_ensemble() ? req->options().ensemble() : 1;
    for (int i = 0; i < 3 * members; ++i) {
      const int e = i % 3 + 1;  // epochs restart for each ensemble member
      p.set_state(v1::TrainProgress::RUNNING);
      p.set_epoch(e);
      p.set_train_rmse(1.0 - 0.1 * e);
      p.set_validation_rmse(1.05 - 0.1 * e);
      p.set_elapsed_seconds(2.0 * e);
      p.set_eta_seconds(2.0 * (3 - e));
      writer->Write(p);
    }
    p.set_state(fail_training ? v1::TrainProgress::FAILED
                              : v1::TrainProgress::SUCCEEDED);
    if (fail_training) {
      p.set_message(fail_message);
    } else {
      p.set_model_version(7);
      p.set_activated(req->activation() != v1::ACTIVATE_NEVER);
      if (!p.activated()) p.set_message("activation policy: never");
    }
    writer->Write(p);
    return grpc::Status::OK;
  }

  grpc::Status PredictRatings(grpc::ServerContext* context,
                              const v1::PredictRatingsRequest* req,
                              v1::PredictRatingsResponse* response) override {
    predict_requests.push_back(*req);
    if (max_predict_items > 0 && req->item_ids_size() > max_predict_items) {
      // As rbmrec-server answers over its --max-predict-items.
      context->AddTrailingMetadata("rbmrec-error-reason", "LIMIT_EXCEEDED");
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the number of item_ids is ", req->item_ids_size(),
                       ", over the server's limit of ", max_predict_items,
                       " (--max-predict-items)"));
    }
    if (req->user_id() == "nobody") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "user 'nobody' not found");
    }
    if (req->user_id().empty() && req->ratings().empty() &&
        !allow_empty_anonymous) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "user_id is empty and no ad-hoc ratings were given");
    }
    response->set_model_version(req->model_version() > 0 ? req->model_version()
                                                         : 7);
    v1::RatingScale* s = response->mutable_scale();
    s->set_min(1);
    s->set_max(5);
    s->set_step(1);
    for (int v = 1; v <= 5; ++v) s->add_values(v);
    response->set_folded_in(req->user_id().empty());
    for (const std::string& item : req->item_ids()) {
      v1::ItemPrediction* p = response->add_predictions();
      p->set_item_id(item);
      for (double x : {0.1, 0.1, 0.2, 0.3, 0.3}) p->add_probabilities(x);
      p->set_expected_rating(3.6);
      p->set_fallback(item == "new");
      if (item == "50") p->set_title("Star Wars (1977)");
    }
    return grpc::Status::OK;
  }

  grpc::Status Recommend(grpc::ServerContext*, const v1::RecommendRequest* req,
                         v1::RecommendResponse* response) override {
    last_recommend = *req;
    response->set_model_version(7);
    response->set_candidates(42);
    for (int i = 0; i < req->n(); ++i) {
      v1::Recommendation* r = response->add_recommendations();
      r->set_rank(i + 1);
      r->set_item_id(absl::StrCat(100 + i));
      r->set_title(absl::StrCat("Movie ", i));
      r->set_expected_rating(4.5 - 0.1 * i);
      if (req->rank_by() == v1::PROBABILITY_AT_LEAST) {
        r->set_probability_at_least(0.9 - 0.1 * i);
      }
    }
    return grpc::Status::OK;
  }

  // 5 stored ratings of user "196" (items 50..54, the first with a time).
  grpc::Status GetUserRatings(grpc::ServerContext*,
                              const v1::GetUserRatingsRequest* req,
                              v1::GetUserRatingsResponse* response) override {
    last_user_ratings = *req;
    if (req->user_id() != "196") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("user_id '", req->user_id(),
                                       "' not found: no stored ratings"));
    }
    const int64_t limit = req->limit() == 0 ? 100 : req->limit();
    for (int64_t i = req->offset(); i < 5 && i < req->offset() + limit; ++i) {
      v1::UserRatingEntry* e = response->add_ratings();
      e->set_item_id(absl::StrCat(50 + i));
      e->set_title(i == 0 ? "Star Wars (1977)" : "");
      e->set_rating(i == 0 ? 5 : 3.5);
      e->set_timestamp(i == 0 ? 881250949 : 0);
    }
    response->set_total(5);
    return grpc::Status::OK;
  }

  grpc::Status GetItem(grpc::ServerContext*, const v1::GetItemRequest* req,
                       v1::GetItemResponse* response) override {
    if (req->item_id() != "50") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "item_id unknown");
    }
    v1::Item* item = response->mutable_item();
    item->set_item_id("50");
    item->set_title("Star Wars (1977)");
    item->add_categories("Action");
    item->add_categories("Sci-Fi");
    (*item->mutable_attributes())["year"] = "1977";
    for (int64_t c : {0, 10, 20, 30, 40}) response->add_rating_counts(c);
    response->set_ratings(100);
    response->set_mean_rating(4.0);
    response->set_model_version(7);
    for (double v : {1, 2, 3, 4, 5}) response->mutable_scale()->add_values(v);
    return grpc::Status::OK;
  }

  grpc::Status ListModels(grpc::ServerContext*, const v1::ListModelsRequest*,
                          v1::ListModelsResponse* response) override {
    v1::ModelInfo* m = response->add_models();
    m->set_version(7);
    m->set_kind("full");
    m->set_active(true);
    m->set_n_ratings(int64_t{1} << 40);
    return grpc::Status::OK;
  }

  grpc::Status ActivateModel(grpc::ServerContext*,
                             const v1::ActivateModelRequest* req,
                             v1::ModelInfo* response) override {
    if (req->version() != 7) {
      return grpc::Status(
          grpc::StatusCode::NOT_FOUND,
          absl::StrCat("model version ", req->version(), " not found"));
    }
    response->set_version(7);
    response->set_active(true);
    response->set_kind("full");
    return grpc::Status::OK;
  }

  grpc::Status DeleteModel(grpc::ServerContext*,
                           const v1::DeleteModelRequest* req,
                           v1::DeleteModelResponse* response) override {
    if (req->version() == 7) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "model version 7 is active and cannot be deleted");
    }
    if (req->version() == 5 && !req->force()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "model version 5 is pinned; use force");
    }
    response->set_freed_bytes(3 << 20);
    return grpc::Status::OK;
  }

  grpc::Status PinModel(grpc::ServerContext*, const v1::PinModelRequest* req,
                        v1::ModelInfo* response) override {
    response->set_version(req->version());
    response->set_kind("full");
    response->set_pinned(req->pinned());
    return grpc::Status::OK;
  }

  grpc::Status PruneModels(grpc::ServerContext*,
                           const v1::PruneModelsRequest* req,
                           v1::PruneModelsResponse* response) override {
    prune_requests.push_back(*req);
    response->add_deleted_versions(4);
    response->add_deleted_versions(2);
    response->set_freed_bytes(2048);
    return grpc::Status::OK;
  }

  grpc::Status GetStats(grpc::ServerContext*, const v1::GetStatsRequest*,
                        v1::GetStatsResponse* response) override {
    response->set_users(2);
    response->set_ratings(static_cast<int64_t>(ratings.size()));
    response->set_active_model_version(7);
    response->set_model_versions(3);
    response->set_database_bytes(5 << 20);
    return grpc::Status::OK;
  }

  grpc::Status DeleteUser(grpc::ServerContext*,
                          const v1::DeleteUserRequest* req,
                          v1::DeleteUserResponse* response) override {
    deleted_users.push_back(req->user_id());
    if (req->user_id() == "nobody" || req->user_id().rfind("missing", 0) == 0) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no user '", req->user_id(), "'"));
    }
    response->set_deleted_ratings(12);
    return grpc::Status::OK;
  }

  grpc::Status DeleteRatings(grpc::ServerContext*,
                             const v1::DeleteRatingsRequest* req,
                             v1::DeleteRatingsResponse* response) override {
    delete_ratings_requests.push_back(*req);
    // As rbmrec-server answers for a user without stored ratings.
    if (req->user_id() == "nobody") {
      return grpc::Status(
          grpc::StatusCode::NOT_FOUND,
          absl::StrCat("user_id '", req->user_id(), "' not found"));
    }
    response->set_deleted(req->item_ids_size());
    return grpc::Status::OK;
  }

  // Written by handlers; read by the test after the RPC returned.
  std::vector<int> batch_sizes;
  std::vector<std::string> deleted_users;
  std::vector<v1::DeleteRatingsRequest> delete_ratings_requests;
  int max_batch = 0;  // > 0: larger AddRatings batches fail
  // > 0: larger PredictRatings requests fail (--max-predict-items).
  int max_predict_items = 0;
  // >= 0: AddRatings fails with STORAGE_FULL at this (0-based) batch.
  int64_t disk_full_at_batch = -1;
  // >= 0: AddRatings stops reading at this batch and answers OK.
  int64_t stop_silently_at_batch = -1;
  // Whether a failed AddRatings sends the committed counts.
  bool send_committed = true;
  std::vector<int64_t> timestamps;  // of the accepted rows
  std::vector<std::pair<std::string, std::string>> views;  // (user, item)
  std::vector<v1::TrainRequest> train_requests;
  std::vector<v1::PruneModelsRequest> prune_requests;
  std::map<std::pair<std::string, std::string>, double> ratings;
  std::map<std::string, v1::Item> items;
  int put_items_calls = 0;
  int put_items_fail_at_call = 0;  // > 0: that PutItems call fails
  v1::RecommendRequest last_recommend;
  v1::GetUserRatingsRequest last_user_ratings;
  std::vector<v1::PredictRatingsRequest> predict_requests;
  bool fail_training = false;
  std::string fail_message = "disk full";  // of a FAILED training job
  // rbmrec-server refuses an anonymous user without ratings (as the fake
  // does by default); a server that answers with the model's prior instead
  // is simulated by setting this.
  bool allow_empty_anonymous = false;
};

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    if (max_message_bytes_ > 0) {
      builder.SetMaxReceiveMessageSize(max_message_bytes_);
    }
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    server_address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    for (const std::string& f : files_) std::remove(f.c_str());
  }

  // Runs the CLI with --server pointing at the fake.
  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    args.insert(args.begin(), {"--server", server_address_});
    return RunCli(args, env_, out_, err_);
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path =
        absl::StrCat(::testing::TempDir(), "/", getpid(), "_", name);
    std::ofstream(path) << text;
    files_.push_back(path);
    return path;
  }

  // The stdout of the last command parsed as one JSON object.
  google::protobuf::Struct Json() {
    google::protobuf::Struct s;
    const std::string text = out_.str();
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
    auto status = google::protobuf::util::JsonStringToMessage(text, &s);
    EXPECT_TRUE(status.ok()) << status << ": " << text;
    return s;
  }

  int max_message_bytes_ = 0;  // > 0: the server's --max-message-mb, in bytes
  FakeRbmrec service_;
  std::unique_ptr<grpc::Server> server_;
  std::string server_address_;
  Environment env_;
  std::ostringstream out_;
  std::ostringstream err_;
  std::vector<std::string> files_;
};

TEST_F(CommandsTest, HealthIsServing) {
  EXPECT_EQ(Run({"health"}), kExitOk);
  EXPECT_EQ(out_.str(), "SERVING\n");
  EXPECT_EQ(Run({"--json", "health"}), kExitOk);
  EXPECT_EQ(Json().fields().at("status").string_value(), "SERVING");
  // An unknown service is NOT_FOUND from the health service.
  EXPECT_EQ(Run({"health", "no.such.Service"}), kExitRpc);
  EXPECT_THAT(err_.str(), StartsWith("error: NOT_FOUND: rpc Health.Check: "));
}

TEST_F(CommandsTest, ImportMapsRejectedRowsToFileLines) {
  const std::string file =
      WriteFile("u.data",
                "1\t10\t5\t881250949\n1\t11\t7\t881250949\n\n2\t10\t4\t0\n"
                "2\t10\t3\t0\n");
  // A rejected row: exit 3 unless --allow-rejected.
  EXPECT_EQ(Run({"import", file, "--batch", "2", "--format", "ml100k"}),
            kExitRejected)
      << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("error: the server rejected 1 rows"));
  EXPECT_THAT(err_.str(), HasSubstr("--allow-rejected"));
  EXPECT_THAT(service_.batch_sizes, ElementsAre(2, 2));
  EXPECT_THAT(out_.str(),
              HasSubstr("accepted 3, rejected 1, replaced 1 in 2 batches"));
  EXPECT_THAT(out_.str(),
              HasSubstr(absl::StrCat(
                  file, ":2: user '1' item '11': rating 7 is off the scale")));
  EXPECT_THAT(err_.str(), HasSubstr("read 4 ratings from"));
  EXPECT_EQ(service_.ratings.at({"2", "10"}), 3);
  EXPECT_EQ(Run({"import", file, "--batch", "2", "--format", "ml100k",
                 "--allow-rejected"}),
            kExitOk)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("rejected 1"));
}

TEST_F(CommandsTest, ImportOverTheServersBatchLimitSaysWhatToDo) {
  service_.max_batch = 2;
  const std::string file =
      WriteFile("u.data", "1\t10\t5\t0\n1\t11\t4\t0\n2\t10\t4\t0\n");
  EXPECT_EQ(Run({"import", file, "--batch", "3", "--format", "ml100k"}),
            kExitRpc);
  EXPECT_THAT(err_.str(),
              HasSubstr("hint: this import sent batches of 3 rows; use "
                        "--batch with the server's limit"));
  EXPECT_THAT(err_.str(), HasSubstr("error: RESOURCE_EXHAUSTED"));
  EXPECT_THAT(err_.str(), HasSubstr("committed: 0 rows in the first 0 of 1 "
                                    "batches sent are certainly stored"));
  EXPECT_THAT(err_.str(), HasSubstr("re-running the same import is safe"));
  EXPECT_THAT(err_.str(), Not(HasSubstr("disk")));
  EXPECT_EQ(Run({"import", file, "--batch", "2", "--format", "ml100k"}),
            kExitOk)
      << err_.str();
}

TEST_F(CommandsTest, ImportJson) {
  const std::string file = WriteFile("r.csv", "u,i,r\na,x,4\nb,y,9\n");
  EXPECT_EQ(Run({"--json", "import", file, "--format", "csv"}), kExitRejected)
      << err_.str();
  const google::protobuf::Struct j = Json();
  EXPECT_EQ(j.fields().at("rows_sent").number_value(), 2);
  EXPECT_EQ(j.fields().at("accepted").number_value(), 1);
  EXPECT_EQ(j.fields().at("rejected").number_value(), 1);
  EXPECT_EQ(j.fields().at("rows_read").number_value(), 2);
  const auto& rows = j.fields().at("rejected_rows").list_value();
  ASSERT_EQ(rows.values_size(), 1);
  EXPECT_EQ(rows.values(0).struct_value().fields().at("line").number_value(),
            3);
  EXPECT_EQ(rows.values(0).struct_value().fields().at("user_id").string_value(),
            "b");
}

TEST_F(CommandsTest, ImportInputErrorsExitOne) {
  EXPECT_EQ(Run({"import", "/nonexistent/u.data"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("/nonexistent/u.data"));
  const std::string bad = WriteFile("bad.data", "1\t2\t5\t0\nnot a line\n");
  EXPECT_EQ(Run({"import", bad, "--format", "ml100k"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr(":2"));
  EXPECT_THAT(service_.batch_sizes, IsEmpty());  // nothing was sent
  // --lenient skips the line and imports the rest.
  EXPECT_EQ(Run({"import", bad, "--format", "ml100k", "--lenient"}), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("skipped 1 malformed line(s)"));
  EXPECT_THAT(service_.batch_sizes, ElementsAre(1));
  EXPECT_EQ(Run({"import", bad, "--format", "xml"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--format"));
}

TEST_F(CommandsTest, ItemsImport) {
  const std::string file =
      WriteFile("movies.dat",
                "1::Toy Story (1995)::Animation|Children's|Comedy\n"
                "2::Jumanji (1995)::Adventure|Children's|Fantasy\n"
                "3::Heat (1995)::Action\n");
  EXPECT_EQ(Run({"items", "import", file, "--batch", "2"}), kExitOk)
      << err_.str();
  EXPECT_EQ(service_.put_items_calls, 2);
  ASSERT_EQ(service_.items.size(), 3u);
  EXPECT_EQ(service_.items.at("2").title(), "Jumanji (1995)");
  EXPECT_EQ(service_.items.at("3").attributes().at("genres"), "Action");
  EXPECT_THAT(service_.items.at("1").categories(),
              ElementsAre("Animation", "Children's", "Comedy"));
  EXPECT_THAT(out_.str(), HasSubstr("stored 3 items"));
}

// u.item's 19 genre flags become genre names (the ML-100k list).
TEST_F(CommandsTest, ItemsImportReadsUItemGenreFlagsAsCategories) {
  const std::string file = WriteFile(
      "u.item",
      "1|Toy Story (1995)|01-Jan-1995||http://x|0|0|0|1|1|1|0|0|0|0|0|0|0|0|"
      "0|0|0|0|0\n"
      "2|GoldenEye (1995)|01-Jan-1995||http://x|0|1|1|0|0|0|0|0|0|0|0|0|0|0|"
      "0|0|1|0|0\n");
  EXPECT_EQ(Run({"items", "import", file}), kExitOk) << err_.str();
  ASSERT_EQ(service_.items.size(), 2u);
  EXPECT_THAT(service_.items.at("1").categories(),
              ElementsAre("Animation", "Children's", "Comedy"));
  EXPECT_THAT(service_.items.at("2").categories(),
              ElementsAre("Action", "Adventure", "Thriller"));
  EXPECT_FALSE(service_.items.at("2").hidden());
}

TEST_F(CommandsTest, ItemsHideAndUnhide) {
  EXPECT_EQ(Run({"items", "hide", "50", "181"}), kExitOk) << err_.str();
  EXPECT_TRUE(service_.items.at("50").hidden());
  EXPECT_TRUE(service_.items.at("181").hidden());
  EXPECT_THAT(out_.str(), HasSubstr("hid 2 items"));
  EXPECT_EQ(Run({"items", "unhide", "50"}), kExitOk) << err_.str();
  EXPECT_FALSE(service_.items.at("50").hidden());
}

TEST_F(CommandsTest, RecommendFiltersAndPage) {
  const std::string file = WriteFile("pool.txt", "10\n11, 12\n");
  EXPECT_EQ(Run({"recommend", "1", "-n", "3", "--category", "Comedy",
                 "--category", "Drama", "--all-categories", "Crime,Film-Noir",
                 "--exclude", "5,6", "--candidates", file, "--offset", "20"}),
            kExitOk)
      << err_.str();
  const v1::RecommendRequest& r = service_.last_recommend;
  EXPECT_THAT(r.categories(), ElementsAre("Comedy", "Drama"));
  EXPECT_THAT(r.required_categories(), ElementsAre("Crime", "Film-Noir"));
  EXPECT_THAT(r.exclude_item_ids(), ElementsAre("5", "6"));
  EXPECT_THAT(r.candidate_item_ids(), ElementsAre("10", "11", "12"));
  EXPECT_EQ(r.offset(), 20);
  EXPECT_THAT(out_.str(), HasSubstr("model v7, 42 candidates\n"));
  EXPECT_EQ(Run({"recommend", "1", "--candidates", "7,8"}), kExitOk);
  EXPECT_THAT(service_.last_recommend.candidate_item_ids(),
              ElementsAre("7", "8"));
  EXPECT_EQ(Run({"recommend", "1", "--offset", "-1"}), kExitUsage);
}

TEST_F(CommandsTest, ItemsImportFailureSaysWhatIsStored) {
  service_.put_items_fail_at_call = 2;
  const std::string file = WriteFile("movies2.dat",
                                     "1::A (1995)::Drama\n"
                                     "2::B (1995)::Drama\n"
                                     "3::C (1995)::Drama\n");
  EXPECT_EQ(Run({"items", "import", file, "--batch", "2"}), kExitRpc);
  // The server's message is escaped on the terminal.
  EXPECT_THAT(err_.str(), HasSubstr("error: UNAVAILABLE: rpc PutItems: "
                                    "database is locked \\x1b[2J\n"));
  EXPECT_THAT(err_.str(), HasSubstr("hint: another process holds the "
                                    "server's database write lock; retry"));
  EXPECT_THAT(err_.str(),
              HasSubstr("committed: the first 2 items of the file (1 "
                        "requests) are certainly stored"));
  EXPECT_THAT(err_.str(), HasSubstr("re-running the same import is safe"));
  EXPECT_EQ(service_.items.size(), 2u);
}

TEST_F(CommandsTest, TrainPrintsEpochTableAndVersion) {
  EXPECT_EQ(Run({"train", "--epochs", "3"}), kExitOk) << err_.str();
  const std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n');
  ASSERT_GE(lines.size(), 5u);
  EXPECT_THAT(lines[0], HasSubstr("epoch  train RMSE  valid RMSE"));
  EXPECT_THAT(lines[1], HasSubstr("1/3      0.9000      0.9500"));
  EXPECT_THAT(lines[3], HasSubstr("3/3      0.7000      0.7500"));
  EXPECT_THAT(lines[4], StartsWith("published model v7 after 3 epochs"));
}

TEST_F(CommandsTest, TrainTableHasARowPerEpochOfEveryEnsembleMember) {
  EXPECT_EQ(Run({"train", "--ensemble", "2"}), kExitOk) << err_.str();
  const std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n');
  ASSERT_EQ(lines.size(), 9u);  // header, 6 rows, result, ""
  EXPECT_THAT(lines[4], HasSubstr("1/3"));
  EXPECT_THAT(lines[6], HasSubstr("3/3"));
  EXPECT_THAT(lines[7], StartsWith("published model v7"));
}

TEST_F(CommandsTest, TrainJsonAndFailures) {
  EXPECT_EQ(Run({"--json", "train"}), kExitOk);
  const google::protobuf::Struct j = Json();
  EXPECT_EQ(j.fields()
                .at("result")
                .struct_value()
                .fields()
                .at("state")
                .string_value(),
            "SUCCEEDED");
  EXPECT_EQ(j.fields().at("progress").list_value().values_size(), 5);

  EXPECT_EQ(Run({"train", "--hidden", "0"}), kExitRpc);
  EXPECT_EQ(err_.str(),
            "error: INVALID_ARGUMENT: rpc Train: options.hidden must be >= "
            "1\n");
  EXPECT_EQ(Run({"train", "--hidden", "many"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--hidden: expected an integer"));

  service_.fail_training = true;
  EXPECT_EQ(Run({"train"}), kExitRpc);
  EXPECT_THAT(out_.str(), HasSubstr("training failed after 3 epochs"));
  EXPECT_THAT(err_.str(), HasSubstr("error: training FAILED: disk full"));
}

TEST_F(CommandsTest, TrainFailureMessageIsEscapedOnTheTerminal) {
  service_.fail_training = true;
  service_.fail_message =
      "disk \x1b]0;pwned\x07"
      "full";
  EXPECT_EQ(Run({"train"}), kExitRpc);
  EXPECT_THAT(out_.str() + err_.str(), Not(HasSubstr("\x1b")));
  EXPECT_THAT(err_.str(), HasSubstr("error: training FAILED: disk "
                                    "\\x1b]0;pwned\\x07full\n"));
  EXPECT_THAT(out_.str(), HasSubstr("disk \\x1b]0;pwned\\x07full"));
}

TEST_F(CommandsTest, IdsAreEscapedInOutputAndInErrors) {
  // In the command's own output.
  EXPECT_EQ(Run({"delete-user", "evil\x1b[2Jid"}), kExitOk);
  EXPECT_EQ(out_.str(), "deleted 12 ratings of user evil\\x1b[2Jid\n");
  // In the error naming an unknown user.
  EXPECT_EQ(Run({"delete-user", "missing\x1b]0;title\x07\xc2\x9b"}), kExitRpc);
  EXPECT_EQ(err_.str(),
            "error: NOT_FOUND: user 'missing\\x1b]0;title\\x07\\u009b' not "
            "found (no stored ratings); nothing was deleted\n");
  // In a usage error naming the argument.
  EXPECT_EQ(Run({"models", "activate", "1\x1b[31m"}), kExitUsage);
  EXPECT_THAT(err_.str(),
              AllOf(HasSubstr("1\\x1b[31m"), Not(HasSubstr("\x1b"))));
}

TEST_F(CommandsTest, PredictDrawsDistributions) {
  env_.unicode = false;
  EXPECT_EQ(Run({"predict", "196", "50", "new", "--rate", "1=5"}), kExitOk)
      << err_.str();
  EXPECT_THAT(out_.str(), StartsWith("user 196  model v7  exact\n"));
  EXPECT_THAT(out_.str(), HasSubstr("50  Star Wars (1977)  expected 3.60\n"));
  EXPECT_THAT(out_.str(),
              HasSubstr(absl::StrCat("    5  ", std::string(12, '#'),
                                     std::string(28, ' '), "   30.0%\n")));
  EXPECT_THAT(out_.str(), HasSubstr("new  expected 3.60  (fallback"));
  ASSERT_EQ(service_.predict_requests.size(), 1u);
  EXPECT_EQ(service_.predict_requests[0].ratings(0).item_id(), "1");

  EXPECT_EQ(Run({"--json", "predict", "-", "50", "--method", "meanfield",
                 "--rate", "1=4"}),
            kExitOk);
  const google::protobuf::Struct j = Json();
  EXPECT_EQ(j.fields().at("model_version").number_value(), 7);
  EXPECT_TRUE(j.fields().at("folded_in").bool_value());
  EXPECT_EQ(service_.predict_requests.back().method(), v1::MEAN_FIELD);
  EXPECT_EQ(service_.predict_requests.back().user_id(), "");
}

TEST_F(CommandsTest, RpcErrorsExitTwoWithCodeAndMessage) {
  EXPECT_EQ(Run({"predict", "nobody", "50"}), kExitRpc);
  EXPECT_EQ(err_.str(),
            "error: NOT_FOUND: rpc PredictRatings: user 'nobody' not found\n");
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(Run({"--json", "models", "activate", "99"}), kExitRpc);
  const google::protobuf::Struct j = Json();
  const auto& error = j.fields().at("error").struct_value().fields();
  EXPECT_EQ(error.at("code").string_value(), "NOT_FOUND");
  EXPECT_EQ(error.at("message").string_value(),
            "rpc ActivateModel: model version 99 not found");
  EXPECT_EQ(error.at("exit_code").number_value(), 2);
}

TEST_F(CommandsTest, RecommendTable) {
  EXPECT_EQ(Run({"recommend", "196", "-n", "3", "--by", "prob"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("rank  item  title    expected  P(>=4)\n"));
  EXPECT_THAT(out_.str(), HasSubstr("   3  102   Movie 2      4.30   70.0%\n"));
}

TEST_F(CommandsTest, RatingsTablePagesAndErrors) {
  EXPECT_EQ(Run({"ratings", "196"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("user 196: 5 stored ratings\n"));
  EXPECT_THAT(out_.str(), HasSubstr("item  title             rating  time\n"));
  EXPECT_THAT(out_.str(),
              HasSubstr("50    Star Wars (1977)       5  1997-12-04 15:55:49 "
                        "UTC\n"));
  EXPECT_THAT(out_.str(), HasSubstr("51                         3.5  -\n"));
  EXPECT_EQ(service_.last_user_ratings.limit(), 0);  // the server's page
  EXPECT_EQ(Run({"ratings", "196", "--offset", "1", "--limit", "2"}), kExitOk);
  EXPECT_EQ(service_.last_user_ratings.offset(), 1);
  EXPECT_EQ(service_.last_user_ratings.limit(), 2);
  EXPECT_THAT(out_.str(), StartsWith("user 196: 5 stored ratings, showing "
                                     "2-3\n"));
  EXPECT_EQ(Run({"ratings", "196", "--offset", "9"}), kExitOk);
  EXPECT_EQ(out_.str(), "user 196: 5 stored ratings, none from offset 9\n");
  EXPECT_EQ(Run({"--json", "ratings", "196", "--limit", "1"}), kExitOk);
  EXPECT_EQ(Json().fields().at("total").number_value(), 5);
  EXPECT_EQ(Run({"ratings", "196", "--limit", "0"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--limit"));
  EXPECT_EQ(Run({"ratings", "196", "--offset", "-1"}), kExitUsage);
  EXPECT_EQ(Run({"ratings", "nobody"}), kExitRpc);
  EXPECT_THAT(err_.str(), HasSubstr("NOT_FOUND"));
}

TEST_F(CommandsTest, ItemShowsTheRowAndTheHistogram) {
  EXPECT_EQ(Run({"item", "50"}), kExitOk);
  const std::string out = out_.str();
  EXPECT_THAT(out, StartsWith("item 50  Star Wars (1977)\n"
                              "  categories  Action, Sci-Fi\n"
                              "  hidden      no\n"
                              "  year: 1977\n"
                              "model v7: 100 ratings, mean 4.00\n"));
  // One bar line per rating value: the label, the count, the share.
  EXPECT_THAT(out, HasSubstr("      40   40.0%\n"));
  EXPECT_THAT(out, HasSubstr("       0    0.0%\n"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 10);
  EXPECT_EQ(Run({"--json", "item", "50"}), kExitOk);
  EXPECT_EQ(Json().fields().at("ratings").number_value(), 100);
  EXPECT_EQ(Run({"item", "99"}), kExitRpc);
  EXPECT_EQ(Run({"item"}), kExitUsage);
}

TEST_F(CommandsTest, EvaluateSkipsUsersTheServerCannotPredict) {
  const std::string file =
      WriteFile("test.data", "1\t10\t5\t0\nnobody\t10\t3\t0\n1\t11\t4\t0\n");
  EXPECT_EQ(Run({"--json", "evaluate", file, "--format", "ml100k"}), kExitOk)
      << err_.str();
  const google::protobuf::Struct j = Json();
  EXPECT_EQ(j.fields().at("n").number_value(), 2);
  EXPECT_EQ(j.fields().at("n_skipped").number_value(), 1);
  EXPECT_EQ(j.fields().at("n_fallback").number_value(), 0);
  EXPECT_NEAR(j.fields().at("rmse").number_value(),
              std::sqrt((1.4 * 1.4 + 0.4 * 0.4) / 2), 1e-9);
  EXPECT_THAT(err_.str(), HasSubstr("warning: skipped 1 ratings of 1 users"));
  EXPECT_EQ(Run({"evaluate", file, "--format", "ml100k"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("n_skipped   1\n"));
}

TEST_F(CommandsTest, EvaluateGroupsByUserAndFallsBackForUnknownUsers) {
  service_.allow_empty_anonymous = true;
  const std::string file =
      WriteFile("test.data", "1\t10\t5\t0\nnobody\t10\t3\t0\n1\t11\t4\t0\n");
  EXPECT_EQ(Run({"--json", "evaluate", file, "--format", "ml100k"}), kExitOk)
      << err_.str();
  const google::protobuf::Struct j = Json();
  EXPECT_EQ(j.fields().at("n").number_value(), 3);
  EXPECT_EQ(j.fields().at("n_fallback").number_value(), 1);
  EXPECT_EQ(j.fields().at("users").number_value(), 2);
  EXPECT_EQ(j.fields().at("model_version").number_value(), 7);
  EXPECT_NEAR(j.fields().at("rmse").number_value(),
              std::sqrt((1.4 * 1.4 + 0.6 * 0.6 + 0.4 * 0.4) / 3), 1e-9);
  EXPECT_NEAR(j.fields().at("mae").number_value(), (1.4 + 0.6 + 0.4) / 3, 1e-9);
  // One request for user 1 (both items), then nobody: NOT_FOUND, retried as
  // the anonymous user; later requests pin the first answer's version.
  ASSERT_EQ(service_.predict_requests.size(), 3u);
  EXPECT_THAT(service_.predict_requests[0].item_ids(), ElementsAre("10", "11"));
  EXPECT_EQ(service_.predict_requests[0].model_version(), 0);
  EXPECT_EQ(service_.predict_requests[1].user_id(), "nobody");
  EXPECT_EQ(service_.predict_requests[2].user_id(), "");
  EXPECT_EQ(service_.predict_requests[2].model_version(), 7);

  EXPECT_EQ(Run({"evaluate", file, "--format", "ml100k"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("n_fallback  1\n"));
}

TEST_F(CommandsTest, ModelsStatsDeletions) {
  EXPECT_EQ(Run({"models"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("*       v7"));
  EXPECT_EQ(Run({"--json", "models"}), kExitOk);
  // 64-bit integers are JSON numbers.
  EXPECT_THAT(out_.str(), HasSubstr("\"n_ratings\":1099511627776"));
  EXPECT_EQ(Run({"models", "activate", "7"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("activated model v7 (active): full"));
  EXPECT_EQ(Run({"stats"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("active model    v7\n"));
  EXPECT_THAT(out_.str(), HasSubstr("model versions  3\n"));
  EXPECT_THAT(out_.str(), HasSubstr("database size   5.0 MiB\n"));
  EXPECT_EQ(Run({"--json", "stats"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"ratings\":0,"));
  EXPECT_EQ(Json().fields().at("database_bytes").number_value(), 5 << 20);
  EXPECT_EQ(Run({"delete-user", "196"}), kExitOk);
  EXPECT_EQ(out_.str(), "deleted 12 ratings of user 196\n");
  EXPECT_EQ(Run({"delete-user", "nobody"}), kExitRpc);
  EXPECT_EQ(Run({"--json", "delete-ratings", "196", "1", "2"}), kExitOk);
  EXPECT_EQ(out_.str(), "{\"deleted\":2}\n");
}

TEST_F(CommandsTest, ImportSendsTimestampsAndUnquotedCsvIds) {
  const std::string file =
      WriteFile("t.csv", "\"ok1\",\"i,1\",4,881250949\nb,y,5\n");
  EXPECT_EQ(Run({"import", file, "--format", "csv"}), kExitOk) << err_.str();
  EXPECT_THAT(service_.timestamps, ElementsAre(881250949, 0));
  EXPECT_EQ(service_.ratings.count({"ok1", "i,1"}), 1u);
}

TEST_F(CommandsTest, ImportKindViewSendsViewsWithoutRatings) {
  const std::string file = WriteFile("v.csv", "a,x,4,10\nb,y,5,11\n");
  EXPECT_EQ(Run({"import", file, "--format", "csv", "--kind", "view"}), kExitOk)
      << err_.str();
  EXPECT_THAT(service_.views,
              ElementsAre(std::pair<std::string, std::string>("a", "x"),
                          std::pair<std::string, std::string>("b", "y")));
  EXPECT_TRUE(service_.ratings.empty());
  EXPECT_THAT(err_.str(), HasSubstr("read 2 views from"));
  EXPECT_THAT(out_.str(), HasSubstr("views 2"));
  EXPECT_EQ(Run({"import", file, "--kind", "click"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--kind: expected rating or view"));
}

TEST_F(CommandsTest, ImportRejectsInvalidUtf8BeforeSendingAnything) {
  std::string text;
  for (int i = 1; i <= 5; ++i) absl::StrAppend(&text, i, "\t10\t4\t0\n");
  text += "6\xff\t10\t4\t0\n7\t10\t4\t0\n";
  const std::string file = WriteFile("bad_utf8.data", text);
  EXPECT_EQ(Run({"import", file, "--batch", "2"}), kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr(":6: invalid UTF-8: byte 0xFF at column 2"));
  EXPECT_THAT(service_.batch_sizes, IsEmpty());
}

TEST_F(CommandsTest, ImportFailurePrintsWhatIsCommittedAndTheReasonsHint) {
  service_.disk_full_at_batch = 2;
  const std::string file =
      WriteFile("full.data",
                "1\t10\t5\t0\n1\t11\t4\t0\n2\t10\t4\t0\n2\t11\t4\t0\n"
                "\n3\t10\t4\t0\n3\t11\t4\t0\n");
  EXPECT_EQ(Run({"import", file, "--batch", "2"}), kExitRpc);
  EXPECT_THAT(err_.str(), HasSubstr("error: RESOURCE_EXHAUSTED: rpc "
                                    "AddRatings: database or disk is full"));
  EXPECT_THAT(err_.str(), HasSubstr("hint: the server's disk"));
  EXPECT_THAT(err_.str(), Not(HasSubstr("--batch")));
  // Batches 0 and 1 (lines 1-4) are stored; line 5 is empty.
  EXPECT_THAT(err_.str(), HasSubstr("committed: 4 rows in the first 2 of"));
  EXPECT_THAT(err_.str(), HasSubstr("full.data up to line 4)"));
  EXPECT_THAT(err_.str(), HasSubstr("re-running the same import is safe"));

  EXPECT_EQ(Run({"--json", "import", file, "--batch", "2"}), kExitRpc);
  const google::protobuf::Struct j = Json();
  const auto& error = j.fields().at("error").struct_value().fields();
  EXPECT_EQ(error.at("code").string_value(), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(error.at("reason").string_value(), "STORAGE_FULL");
  EXPECT_EQ(error.at("committed_rows").number_value(), 4);
  EXPECT_EQ(error.at("committed_batches").number_value(), 2);
}

TEST_F(CommandsTest, ImportFailureWithoutCountsSaysUnknown) {
  service_.disk_full_at_batch = 1;
  service_.send_committed = false;
  const std::string file =
      WriteFile("nocounts.data", "1\t10\t5\t0\n2\t10\t4\t0\n");
  EXPECT_EQ(Run({"--json", "import", file, "--batch", "1"}), kExitRpc);
  EXPECT_THAT(err_.str(), HasSubstr("committed: unknown"));
  EXPECT_THAT(err_.str(), HasSubstr("0 rows are certainly stored"));
  const google::protobuf::Struct j = Json();
  const auto& error = j.fields().at("error").struct_value().fields();
  EXPECT_TRUE(error.at("committed_rows").has_null_value());
}

TEST_F(CommandsTest, ImportCatchesAServerThatStopsReadingEarly) {
  // The server answers OK after 1 of 3 batches: 2 batches are lost.
  service_.stop_silently_at_batch = 1;
  const std::string file =
      WriteFile("silent.data", "1\t10\t5\t0\n2\t10\t4\t0\n3\t10\t4\t0\n");
  EXPECT_EQ(Run({"import", file, "--batch", "1"}), kExitRpc);
  EXPECT_THAT(err_.str(),
              HasSubstr("error: DATA_LOSS: the server counted 1 rows (1 "
                        "accepted + 0 rejected) in 1 batches, but this import "
                        "sent 3 rows in 3 batches: 2 rows are unaccounted"));
  EXPECT_THAT(err_.str(), HasSubstr("committed: 1 rows in the first 1 "
                                    "batches are certainly stored"));
  EXPECT_THAT(err_.str(), HasSubstr("re-running the same import is safe"));
  EXPECT_EQ(Run({"--json", "import", file, "--batch", "1"}), kExitRpc);
  const google::protobuf::Struct j = Json();  // one object: the error
  EXPECT_EQ(
      j.fields().at("error").struct_value().fields().at("code").string_value(),
      "DATA_LOSS");
}

TEST_F(CommandsTest, RejectedRowsAreEscapedOnTheTerminal) {
  // The fake does not check ids; a real server would reject these.
  const std::string file = WriteFile("esc.csv", "u\\x,i,9\n");
  EXPECT_EQ(Run({"import", file, "--format", "csv", "--allow-rejected"}),
            kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("user 'u\\\\x' item 'i'"));
}

TEST_F(CommandsTest, TrainActivationPolicy) {
  EXPECT_EQ(Run({"train", "--activate", "never"}), kExitOk) << err_.str();
  ASSERT_EQ(service_.train_requests.size(), 1u);
  EXPECT_EQ(service_.train_requests[0].activation(), v1::ACTIVATE_NEVER);
  EXPECT_THAT(out_.str(), HasSubstr("published model v7"));
  EXPECT_THAT(out_.str(), HasSubstr("NOT activated"));
  EXPECT_EQ(
      Run({"train", "--activate", "if-better", "--learning-rate", "0.01"}),
      kExitOk);
  EXPECT_EQ(service_.train_requests[1].activation(), v1::ACTIVATE_IF_BETTER);
  EXPECT_EQ(service_.train_requests[1].options().learning_rate(), 0.01);
  EXPECT_THAT(out_.str(), HasSubstr("now active"));
  EXPECT_EQ(Run({"train"}), kExitOk);
  EXPECT_EQ(service_.train_requests[2].activation(),
            v1::ACTIVATION_POLICY_UNSPECIFIED);
  EXPECT_EQ(Run({"--json", "train", "--activate", "always"}), kExitOk);
  EXPECT_TRUE(Json()
                  .fields()
                  .at("result")
                  .struct_value()
                  .fields()
                  .at("activated")
                  .bool_value());
  EXPECT_EQ(Run({"train", "--activate", "sometimes"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--activate: expected always, if-better "
                                    "or never, got 'sometimes'"));
}

TEST_F(CommandsTest, ModelsDeletePinUnpinPrune) {
  EXPECT_EQ(Run({"models", "delete", "3"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "deleted model v3 (freed 3.0 MiB)\n");
  EXPECT_EQ(Run({"models", "delete", "7"}), kExitRpc);
  EXPECT_THAT(err_.str(), HasSubstr("FAILED_PRECONDITION"));
  EXPECT_EQ(Run({"models", "delete", "5"}), kExitRpc);
  EXPECT_EQ(Run({"models", "delete", "5", "--force"}), kExitOk);
  EXPECT_EQ(Run({"models", "delete", "0"}), kExitUsage);

  EXPECT_EQ(Run({"models", "pin", "4"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("pinned model v4 (pinned): full"));
  EXPECT_EQ(Run({"--json", "models", "unpin", "4"}), kExitOk);
  EXPECT_FALSE(Json().fields().at("pinned").bool_value());
  EXPECT_EQ(Json().fields().at("version").number_value(), 4);

  EXPECT_EQ(Run({"models", "prune", "--keep-full", "2"}), kExitOk);
  EXPECT_EQ(out_.str(), "deleted 2 model versions (v4, v2), freed 2.0 KiB\n");
  ASSERT_EQ(service_.prune_requests.size(), 1u);
  EXPECT_TRUE(service_.prune_requests[0].has_keep_full());
  EXPECT_EQ(service_.prune_requests[0].keep_full(), 2);
  EXPECT_FALSE(service_.prune_requests[0].has_keep_online());
  EXPECT_EQ(Run({"--json", "models", "prune"}), kExitOk);
  EXPECT_EQ(out_.str(), "{\"deleted_versions\":[4,2],\"freed_bytes\":2048}\n");
  EXPECT_EQ(Run({"models", "prune", "--keep-online", "-1"}), kExitUsage);
}

TEST_F(CommandsTest, EvaluateWithNothingScoredFailsSayingWhy) {
  // Every rating is of a user the server cannot predict for.
  const std::string file =
      WriteFile("nobody.data", "nobody\t10\t5\t0\nnobody\t11\t3\t0\n");
  EXPECT_EQ(Run({"evaluate", file, "--format", "ml100k"}), kExitRpc);
  EXPECT_EQ(out_.str(), "");  // no RMSE 0.0000
  EXPECT_THAT(err_.str(),
              HasSubstr(absl::StrCat(
                  "error: FAILED_PRECONDITION: no rating of ", file,
                  " could be evaluated: all 2 were skipped: 2 ratings of 1 "
                  "users with no stored ratings")));
  EXPECT_EQ(Run({"--json", "evaluate", file, "--format", "ml100k"}), kExitRpc);
  const google::protobuf::Struct j = Json();
  const auto& error = j.fields().at("error").struct_value().fields();
  EXPECT_EQ(error.at("code").string_value(), "FAILED_PRECONDITION");
  EXPECT_EQ(error.at("exit_code").number_value(), kExitRpc);

  // Every rating is off the server's rating scale (1:5:1), or of a user
  // it cannot predict for: both reasons are counted.
  const std::string off =
      WriteFile("off.csv", "1,10,7\n1,11,0\n1,12,4.5\nnobody,10,3\n");
  EXPECT_EQ(Run({"evaluate", off, "--format", "csv"}), kExitRpc);
  EXPECT_THAT(
      err_.str(),
      HasSubstr(absl::StrCat(
          "could be evaluated: all 4 were skipped: 1 ratings of 1 users with "
          "no stored ratings (the server does not predict for a user without "
          "ratings); 3 ratings off the server's rating scale 1:5:1 (the "
          "first: ",
          off, ":1: rating 7)")));
}

TEST_F(CommandsTest, EvaluateSkipsRatingsOffTheScale) {
  const std::string file =
      WriteFile("mixed.csv", "1,10,5\n1,11,7\n1,12,4.5\n1,13,3\n");
  EXPECT_EQ(Run({"--json", "evaluate", file, "--format", "csv"}), kExitOk)
      << err_.str();
  const google::protobuf::Struct j = Json();
  EXPECT_EQ(j.fields().at("n").number_value(), 2);
  EXPECT_EQ(j.fields().at("n_skipped").number_value(), 2);
  EXPECT_EQ(j.fields().at("n_skipped_off_scale").number_value(), 2);
  EXPECT_EQ(j.fields().at("n_skipped_no_ratings").number_value(), 0);
  // Scored: 5 and 3 against 3.6.
  EXPECT_NEAR(j.fields().at("rmse").number_value(),
              std::sqrt((1.4 * 1.4 + 0.6 * 0.6) / 2), 1e-9);
  EXPECT_THAT(err_.str(),
              HasSubstr(absl::StrCat(
                  "warning: skipped 2 ratings off the server's rating scale "
                  "1:5:1 (the first: ",
                  file, ":2: rating 7); RMSE and MAE exclude them")));
  EXPECT_EQ(Run({"evaluate", file, "--format", "csv"}), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("n_skipped   2 (2 off the rating scale)"));
}

TEST_F(CommandsTest, EvaluateKeepsToTheServersItemLimit) {
  // The server takes 2 items per request (--max-predict-items 2); the
  // default batch is 1000.
  service_.max_predict_items = 2;
  std::string text;
  for (int i = 0; i < 5; ++i) absl::StrAppend(&text, "1,", 10 + i, ",4\n");
  absl::StrAppend(&text, "2,10,5\n");
  const std::string file = WriteFile("limit.csv", text);
  EXPECT_EQ(Run({"--json", "evaluate", file, "--format", "csv"}), kExitOk)
      << err_.str();
  EXPECT_EQ(Json().fields().at("n").number_value(), 6);
  EXPECT_THAT(err_.str(),
              HasSubstr("note: rpc PredictRatings: the number of item_ids is "
                        "5, over the server's limit of 2 "
                        "(--max-predict-items); going on with 2 items per "
                        "request (--batch 2 avoids this retry)\n"));
  EXPECT_THAT(err_.str(), Not(HasSubstr("error")));
  std::vector<int> sizes;
  for (const auto& r : service_.predict_requests) {
    sizes.push_back(r.item_ids_size());
  }
  // One refused request, then requests of at most 2 items.
  EXPECT_THAT(sizes, ElementsAre(5, 2, 2, 1, 1));
}

TEST_F(CommandsTest, FilesWithoutRatingsFailSayingSo) {
  const std::string empty = WriteFile("empty.csv", "");
  EXPECT_EQ(Run({"import", empty}), kExitUsage);
  EXPECT_EQ(err_.str(),
            absl::StrCat("error: INVALID_ARGUMENT: no ratings in ", empty,
                         ": it is empty (no line holds a rating); nothing was "
                         "sent\n"));
  const std::string blank = WriteFile("blank.csv", "\n  \n");
  EXPECT_EQ(Run({"import", blank}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("it is empty"));
  const std::string header = WriteFile("header.csv", "user,item,rating\n");
  EXPECT_EQ(Run({"import", header}), kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr(absl::StrCat("no ratings in ", header,
                                     ": it holds only a header (line 1)")));
  const std::string bad = WriteFile("allbad.csv", "a,b\nc,d\n");
  EXPECT_EQ(Run({"import", bad, "--format", "csv", "--lenient"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("all 2 records are malformed (skipped "
                                    "by --lenient)"));
  EXPECT_THAT(service_.batch_sizes, IsEmpty());
  EXPECT_EQ(Run({"--json", "import", header}), kExitUsage);
  EXPECT_EQ(Json()
                .fields()
                .at("error")
                .struct_value()
                .fields()
                .at("code")
                .string_value(),
            "INVALID_ARGUMENT");
  // evaluate too.
  EXPECT_EQ(Run({"evaluate", header}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("only a header (line 1); nothing to "
                                    "evaluate"));
  EXPECT_THAT(service_.predict_requests, IsEmpty());
}

TEST_F(CommandsTest, DeleteRatingsOfAnUnknownUserIsNotFound) {
  EXPECT_EQ(Run({"delete-ratings", "nobody", "1"}), kExitRpc);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(),
            "error: NOT_FOUND: user 'nobody' not found (no stored ratings); "
            "nothing was deleted\n");
  EXPECT_EQ(Run({"--json", "delete-ratings", "nobody", "1"}), kExitRpc);
  const google::protobuf::Struct j = Json();
  const auto& error = j.fields().at("error").struct_value().fields();
  EXPECT_EQ(error.at("code").string_value(), "NOT_FOUND");
  EXPECT_EQ(error.at("exit_code").number_value(), kExitRpc);
  // delete-user says the same.
  EXPECT_EQ(Run({"delete-user", "nobody"}), kExitRpc);
  EXPECT_EQ(err_.str(),
            "error: NOT_FOUND: user 'nobody' not found (no stored ratings); "
            "nothing was deleted\n");
}

TEST_F(CommandsTest, IdArgumentsAreTrimmedLikeImportedIds) {
  const std::string file = WriteFile("ids.csv", " u ,\t1 ,4\n");
  ASSERT_EQ(Run({"import", file, "--format", "csv"}), kExitOk) << err_.str();
  ASSERT_EQ(service_.ratings.count({"u", "1"}), 1u);  // as stored
  EXPECT_EQ(Run({"delete-ratings", " u ", " 1\t"}), kExitOk) << err_.str();
  ASSERT_EQ(service_.delete_ratings_requests.size(), 1u);
  EXPECT_EQ(service_.delete_ratings_requests[0].user_id(), "u");
  EXPECT_THAT(service_.delete_ratings_requests[0].item_ids(), ElementsAre("1"));
  EXPECT_EQ(out_.str(), "deleted 1 ratings of user u\n");
  EXPECT_EQ(Run({"delete-user", "\tu "}), kExitOk);
  EXPECT_THAT(service_.deleted_users, ElementsAre("u"));
  EXPECT_EQ(Run({"predict", " u ", " 1 "}), kExitOk) << err_.str();
  EXPECT_EQ(Run({"recommend", " u", "-n", "1"}), kExitOk) << err_.str();
  ASSERT_EQ(service_.predict_requests.size(), 1u);
  EXPECT_EQ(service_.predict_requests[0].user_id(), "u");
  EXPECT_THAT(service_.predict_requests[0].item_ids(), ElementsAre("1"));
  // Nothing left is a usage error, not an empty (or anonymous) id.
  EXPECT_EQ(Run({"delete-ratings", "  ", "1"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("USER: the id is empty"));
  EXPECT_EQ(Run({"predict", " ", "1"}), kExitUsage);
  EXPECT_EQ(service_.delete_ratings_requests.size(), 1u);
  EXPECT_EQ(service_.predict_requests.size(), 1u);
}

// A server started with a small --max-message-mb.
class SmallMessageCommandsTest : public CommandsTest {
 protected:
  SmallMessageCommandsTest() { max_message_bytes_ = 4096; }
};

TEST_F(SmallMessageCommandsTest, ImportOverTheMessageLimitSaysHowMuchToLower) {
  std::string text;
  for (int i = 0; i < 1000; ++i) {
    absl::StrAppend(&text, "user", i, ",item", i, ",4\n");
  }
  const std::string file = WriteFile("big.csv", text);
  EXPECT_EQ(Run({"import", file, "--format", "csv", "--batch", "500"}),
            kExitRpc);
  EXPECT_THAT(err_.str(), HasSubstr("error: RESOURCE_EXHAUSTED"));
  const std::string marker = "lower --batch from 500 to ";
  const size_t at = err_.str().find(marker);
  ASSERT_NE(at, std::string::npos) << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("hint: a batch of 500 rows was "));
  EXPECT_THAT(err_.str(), HasSubstr("over the server's limit of 4.0 KiB per "
                                    "message (its --max-message-mb)"));
  int suggested = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      err_.str().substr(
          at + marker.size(),
          err_.str().find(' ', at + marker.size()) - at - marker.size()),
      &suggested))
      << err_.str();
  EXPECT_GT(suggested, 10);
  EXPECT_LT(suggested, 500);
  // The batch size it names works.
  EXPECT_EQ(Run({"import", file, "--format", "csv", "--batch",
                 absl::StrCat(suggested)}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(service_.ratings.size(), 1000u);
}

// ---------------------------------------------------------------------------
// No server needed.

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

CliResult RunOffline(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  Environment env;
  const int code = RunCli(args, env, out, err);
  return {code, out.str(), err.str()};
}

TEST(RunCliTest, UsageErrorsExitOneNamingTheArgument) {
  CliResult r = RunOffline({"bogus"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(
      r.err,
      "error: unknown command 'bogus'\n(run 'rbmrec --help' for usage)\n");
  EXPECT_EQ(r.out, "");

  r = RunOffline({"import", "f", "--bogus"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, AllOf(HasSubstr("--bogus"),
                           HasSubstr("run 'rbmrec import --help'")));

  r = RunOffline({"recommend", "u", "-n", "x"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("-n: expected an integer, got 'x'"));

  r = RunOffline({"models", "activate", "zero"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("VERSION: expected an integer, got 'zero'"));

  r = RunOffline({"models", "activate", "0"});
  EXPECT_EQ(r.code, kExitUsage);

  r = RunOffline({});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("missing command"));
}

TEST(RunCliTest, JsonUsageErrorIsOneObject) {
  CliResult r = RunOffline({"--json", "import"});
  EXPECT_EQ(r.code, kExitUsage);
  google::protobuf::Struct s;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &s).ok())
      << r.out;
  const auto& error = s.fields().at("error").struct_value().fields();
  EXPECT_EQ(error.at("code").string_value(), "INVALID_ARGUMENT");
  EXPECT_EQ(error.at("message").string_value(),
            "'rbmrec import': missing argument FILE");
  EXPECT_EQ(error.at("exit_code").number_value(), 1);
}

TEST(RunCliTest, HelpExitsZeroOnStdout) {
  CliResult r = RunOffline({"--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_THAT(r.out, HasSubstr("Commands:"));
  EXPECT_EQ(r.err, "");
  r = RunOffline({"evaluate", "--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_THAT(r.out, StartsWith("Reads held-out ratings from FILE"));
  EXPECT_THAT(r.out, HasSubstr("\nUsage: rbmrec evaluate [OPTIONS] FILE\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  --lenient "));
  EXPECT_EQ(r.err, "");
  r = RunOffline({"items", "--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_THAT(r.out, HasSubstr("\n  items import FILE "));
  r = RunOffline({"import", "--bogus", "--help"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("unknown flag --bogus for 'rbmrec import'"));
}

TEST(RunCliTest, UnreachableServerExitsTwo) {
  CliResult r =
      RunOffline({"--server", "127.0.0.1:1", "--timeout", "5", "stats"});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err, StartsWith("error: UNAVAILABLE: rpc GetStats: "));
}

TEST(SourceLineTest, MapsBatchAndRowToLine) {
  std::vector<RawRating> rows(5);
  for (int i = 0; i < 5; ++i) rows[static_cast<size_t>(i)].line = 10 + 2 * i;
  EXPECT_EQ(SourceLine(rows, 2, 0, 0), 10);
  EXPECT_EQ(SourceLine(rows, 2, 1, 1), 16);
  EXPECT_EQ(SourceLine(rows, 2, 2, 0), 18);
  EXPECT_EQ(SourceLine(rows, 2, 2, 1), 0);  // past the end
  EXPECT_EQ(SourceLine(rows, 2, 0, 2), 0);  // row outside the batch
  EXPECT_EQ(SourceLine(rows, 2, -1, 0), 0);
}

TEST(GroupByUserTest, FirstAppearanceOrder) {
  std::vector<RawRating> rows(4);
  rows[0].user = "b";
  rows[1].user = "a";
  rows[2].user = "b";
  rows[3].user = "c";
  const std::vector<UserGroup> groups = GroupByUser(rows);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].user, "b");
  EXPECT_THAT(groups[0].rows, ElementsAre(0u, 2u));
  EXPECT_EQ(groups[1].user, "a");
  EXPECT_THAT(groups[2].rows, ElementsAre(3u));
}

TEST(ClientTest, StatusConversionKeepsCodeAndPrefixesRpc) {
  const absl::Status s = FromGrpcStatus(
      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "busy"), "Train");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "rpc Train: busy");
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK, "Train").ok());
}

TEST(ClientTest, ImportRejectsBadBatchSize) {
  RbmrecClient client("127.0.0.1:1", absl::Seconds(1));
  EXPECT_EQ(client.ImportRatings({}, 0, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rbmrec::client
