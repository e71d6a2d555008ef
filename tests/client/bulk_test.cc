// `rbmrec recommend --all-users`: the output file's lines and resume points
// (client/bulk_file.h), and the command against an in-process fake
// RecommendAll that can fail part way: a resumed run ends with the same
// file as an uninterrupted one.

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/bulk_file.h"
#include "client/commands.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/rbmrec.grpc.pb.h"

namespace rbmrec::client {
namespace {

using ::testing::HasSubstr;

// Users u00..u(n-1), 2 recommendations each; u03 is a cold start.
v1::UserRecommendations UserAnswer(int u) {
  v1::UserRecommendations out;
  out.set_user_id(absl::StrFormat("u%02d", u));
  v1::RecommendResponse* r = out.mutable_response();
  r->set_model_version(7);
  if (u == 3) r->set_fallback(v1::FALLBACK_EMPTY_USER);
  for (int k = 1; k <= 2; ++k) {
    v1::Recommendation* rec = r->add_recommendations();
    rec->set_rank(k);
    rec->set_item_id(absl::StrCat("i", u + k));
    rec->set_title(k == 1 ? "Heat, \"the\" film" : "Plain");
    rec->set_expected_rating(4.5 - k * 0.25);
  }
  return out;
}

class FakeBulk final : public v1::Rbmrec::Service {
 public:
  grpc::Status RecommendAll(
      grpc::ServerContext*, const v1::RecommendAllRequest* request,
      grpc::ServerWriter<v1::RecommendAllResponse>* writer) override {
    requests.push_back(*request);
    int first = 0;
    if (!request->start_after_user().empty()) {
      first = std::stoi(request->start_after_user().substr(1)) + 1;
    }
    v1::RecommendAllResponse message;
    for (int u = first; u < users; ++u) {
      if (u == fail_at_user) {
        fail_at_user = -1;  // once
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server went away");
      }
      *message.add_users() = UserAnswer(u);
      message.set_model_version(7);
      if (message.users_size() == 3 || u + 1 == users) {
        writer->Write(message);
        message.Clear();
      }
    }
    return grpc::Status::OK;
  }
  int users = 10;
  int fail_at_user = -1;
  std::vector<v1::RecommendAllRequest> requests;
};

class BulkCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    server_->Shutdown();
    for (const std::string& f : files_) std::remove(f.c_str());
  }
  std::string Path(const std::string& name) {
    files_.push_back(
        absl::StrCat(::testing::TempDir(), "/", getpid(), "_", name));
    return files_.back();
  }
  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    args.insert(args.begin(), {"--server", address_});
    return RunCli(args, Environment(), out_, err_);
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  FakeBulk service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::vector<std::string> files_;
  std::ostringstream out_, err_;
};

TEST(BulkFileTest, CsvRowsQuoteAndMarkTheFallback) {
  v1::RecommendAllResponse m;
  *m.add_users() = UserAnswer(3);
  EXPECT_EQ(FormatBulkMessage(m, BulkFormat::kCsv),
            "u03,1,i4,\"Heat, \"\"the\"\" film\",4.25,0,0,EMPTY_USER,7\n"
            "u03,2,i5,Plain,4,0,0,EMPTY_USER,7\n");
  const std::string jsonl = FormatBulkMessage(m, BulkFormat::kJsonl);
  EXPECT_THAT(jsonl, ::testing::StartsWith("{\"user_id\":\"u03\""));
  EXPECT_THAT(jsonl, HasSubstr("\"fallback\":\"FALLBACK_EMPTY_USER\""));
  EXPECT_EQ(std::count(jsonl.begin(), jsonl.end(), '\n'), 1);
}

TEST(BulkFileTest, ResumePointDropsTornLinesAndTheLastCsvUser) {
  v1::RecommendAllResponse m;
  for (int u = 0; u < 3; ++u) *m.add_users() = UserAnswer(u);
  const std::string csv =
      BulkCsvHeader() + FormatBulkMessage(m, BulkFormat::kCsv);
  // Complete file: u02's rows are dropped (a torn write could have cut
  // them), resume after u01.
  absl::StatusOr<ResumePoint> p = FindResumePoint(csv, BulkFormat::kCsv);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->last_user, "u01");
  EXPECT_TRUE(p->has_header);
  EXPECT_EQ(csv.substr(p->keep_bytes, 4), "u02,");
  // A torn line: the same point.
  p = FindResumePoint(csv.substr(0, csv.size() - 5), BulkFormat::kCsv);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->last_user, "u01");
  // Only the header or one user: from the start.
  p = FindResumePoint(BulkCsvHeader(), BulkFormat::kCsv);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->last_user, "");
  EXPECT_EQ(p->keep_bytes, BulkCsvHeader().size());
  p = FindResumePoint("", BulkFormat::kCsv);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->has_header);
  EXPECT_EQ(p->keep_bytes, 0u);
  EXPECT_FALSE(FindResumePoint("not,our,header\n", BulkFormat::kCsv).ok());

  const std::string jsonl = FormatBulkMessage(m, BulkFormat::kJsonl);
  p = FindResumePoint(jsonl.substr(0, jsonl.size() - 3), BulkFormat::kJsonl);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->last_user, "u01");  // u02's line is torn
  EXPECT_EQ(jsonl.substr(p->keep_bytes, 14), "{\"user_id\":\"u0");
  p = FindResumePoint(jsonl, BulkFormat::kJsonl);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->last_user, "u02");
  EXPECT_EQ(p->keep_bytes, jsonl.size());
}

TEST_F(BulkCommandTest, FailedRunResumesToTheSameFile) {
  for (const char* format : {"csv", "jsonl"}) {
    SCOPED_TRACE(format);
    const std::string whole = Path(absl::StrCat("whole.", format));
    ASSERT_EQ(Run({"recommend", "--all-users", "--out", whole}), 0)
        << err_.str();
    EXPECT_THAT(out_.str(), HasSubstr("10 users (1 cold-start fallbacks)"));

    const std::string part = Path(absl::StrCat("part.", format));
    service_.fail_at_user = 7;
    EXPECT_EQ(Run({"recommend", "--all-users", "--out", part}), 2);
    EXPECT_THAT(err_.str(), HasSubstr("--resume"));
    EXPECT_THAT(err_.str(), HasSubstr("UNAVAILABLE"));
    // A torn last line, as a crash mid-write leaves it.
    std::string text = Read(part);
    std::ofstream(part, std::ios::binary | std::ios::trunc)
        << text.substr(0, text.size() - 4);
    ASSERT_EQ(Run({"recommend", "--all-users", "--out", part, "--resume"}), 0)
        << err_.str();
    // u05's last line was torn: resumed after u04.
    EXPECT_EQ(service_.requests.back().start_after_user(), "u04");
    EXPECT_EQ(Read(part), Read(whole));
  }
}

TEST_F(BulkCommandTest, FlagsAndTemplate) {
  const std::string users = Path("users.txt");
  std::ofstream(users) << "u05\n\n# comment\n u01 \n";
  const std::string out = Path("list.csv");
  ASSERT_EQ(Run({"recommend", "--all-users", "--out", out, "--users", users,
                 "-n", "2", "--by", "expected"}),
            0)
      << err_.str();
  const v1::RecommendAllRequest& r = service_.requests.back();
  EXPECT_THAT(r.user_ids(), ::testing::ElementsAre("u05", "u01"));
  EXPECT_EQ(r.template_().n(), 2);
  EXPECT_EQ(r.template_().rank_by(), v1::EXPECTED_RATING);
  EXPECT_TRUE(r.template_().user_id().empty());
  EXPECT_EQ(Run({"recommend", "--all-users"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("--out FILE"));
  EXPECT_EQ(Run({"recommend", "1", "--out", out}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("only with --all-users"));
  EXPECT_EQ(Run({"recommend", "--all-users", "1", "--out", out}), 1);
  EXPECT_EQ(Run({"recommend", "--all-users", "--out", out, "--rate", "i1=4"}),
            1);
  EXPECT_EQ(Run({"recommend"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("missing USER"));
}

}  // namespace
}  // namespace rbmrec::client
