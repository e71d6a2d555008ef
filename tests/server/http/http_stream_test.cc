// The server-streaming calls over HTTP: RecommendAll as server-sent events
// (every user's answer equal to their Recommend, the order, resuming, the
// errors before and after the first event), and EventStream's bounded
// buffer (a reader that does not read holds the call's writer, never more
// than EventStream::kMaxPendingBytes of events).

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/http/event_stream.h"
#include "tests/server/http/http_fixture.h"

namespace rbmrec::server::http {
namespace {

namespace pb = ::google::protobuf;

// The messages of a server-sent event stream of RecommendAllResponse; an
// "event: error" event's data goes to `error`.
std::vector<v1::RecommendAllResponse> ParseEvents(const std::string& body,
                                                  std::string* error) {
  std::vector<v1::RecommendAllResponse> out;
  for (absl::string_view event : absl::StrSplit(body, "\n\n")) {
    if (event.empty()) continue;
    if (absl::ConsumePrefix(&event, "event: error\ndata: ")) {
      *error = std::string(event);
      continue;
    }
    EXPECT_TRUE(absl::ConsumePrefix(&event, "data: ")) << event;
    v1::RecommendAllResponse m;
    EXPECT_TRUE(pb::util::JsonStringToMessage(std::string(event), &m).ok())
        << event;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> Items(const v1::RecommendResponse& r) {
  std::vector<std::string> items;
  for (const v1::Recommendation& x : r.recommendations()) {
    items.push_back(x.item_id());
  }
  return items;
}

class HttpStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    http_.Start();
    ASSERT_EQ(Post("/v1/ratings", SomeRatingsJson()).status, 200);
    HttpReply trained = Post("/v1/train", kTinyTrainJson);
    ASSERT_TRUE(absl::StrContains(trained.body, "SUCCEEDED")) << trained.body;
  }
  HttpReply Post(const std::string& target, const std::string& body) {
    return Call(http_.port(), "POST", target, body);
  }
  InProcessHttp http_;
};

TEST_F(HttpStreamTest, RecommendAllStreamsEveryUsersRecommend) {
  HttpReply all = Post("/v1/recommendations:all", R"({"template":{"n":3}})");
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_EQ(all.headers["content-type"], "text/event-stream");
  std::string error;
  std::vector<v1::RecommendAllResponse> messages =
      ParseEvents(all.body, &error);
  EXPECT_EQ(error, "");
  std::vector<std::string> users;
  for (const v1::RecommendAllResponse& m : messages) {
    EXPECT_EQ(m.model_version(), 1);
    for (const v1::UserRecommendations& u : m.users()) {
      users.push_back(u.user_id());
      // The same list as the user's own Recommend.
      HttpReply one =
          Call(http_.port(), "GET",
               absl::StrCat("/v1/users/", u.user_id(), "/recommendations?n=3"));
      ASSERT_EQ(one.status, 200) << one.body;
      v1::RecommendResponse expected;
      ASSERT_TRUE(pb::util::JsonStringToMessage(one.body, &expected).ok());
      EXPECT_EQ(Items(u.response()), Items(expected)) << u.user_id();
      EXPECT_EQ(u.response().recommendations_size(), 3);
    }
  }
  // Every stored user once, in increasing id order (by bytes).
  std::vector<std::string> stored;
  for (int u = 0; u < 20; ++u) stored.push_back(absl::StrCat("u", u));
  std::sort(stored.begin(), stored.end());
  EXPECT_EQ(users, stored);

  // Listed users in the request's order, resumed after one of them; the
  // generic route answers the same.
  for (const char* target :
       {"/v1/recommendations:all", "/v1/rbmrec.v1.Rbmrec/RecommendAll"}) {
    HttpReply listed = Post(
        target,
        R"({"template":{"n":1},"userIds":["u7","u2","u9"],"startAfterUser":"u7"})");
    ASSERT_EQ(listed.status, 200) << listed.body;
    messages = ParseEvents(listed.body, &error);
    ASSERT_EQ(messages.size(), 1u);
    ASSERT_EQ(messages[0].users_size(), 2);
    EXPECT_EQ(messages[0].users(0).user_id(), "u2");
    EXPECT_EQ(messages[0].users(1).user_id(), "u9");
  }
}

TEST_F(HttpStreamTest, RecommendAllErrorsBeforeTheFirstEventArePlainAnswers) {
  HttpReply named =
      Post("/v1/recommendations:all", R"({"template":{"n":3,"userId":"u1"}})");
  EXPECT_EQ(named.status, 400) << named.body;
  EXPECT_EQ(named.headers["content-type"], "application/json");
  EXPECT_TRUE(absl::StrContains(named.body, "template.user_id must be empty"))
      << named.body;
  HttpReply resume = Post("/v1/recommendations:all",
                          R"({"userIds":["u1"],"startAfterUser":"u2"})");
  EXPECT_EQ(resume.status, 400) << resume.body;
  EXPECT_TRUE(absl::StrContains(resume.body, "start_after_user 'u2'"))
      << resume.body;
  HttpReply version =
      Post("/v1/recommendations:all", R"({"template":{"modelVersion":"9"}})");
  EXPECT_EQ(version.status, 404) << version.body;
}

// Streams whose readers do not read hold their slots; the one past
// max_streams is refused with 429 LIMIT_EXCEEDED, and other calls go on.
TEST(HttpStreams, StreamsOverTheLimitAreRefused) {
  InProcessHttp http;
  HttpServerOptions o;
  o.max_streams = 2;
  http.Start(o);
  auto post = [&http](const std::string& target, const std::string& body) {
    return Call(http.port(), "POST", target, body);
  };
  ASSERT_EQ(post("/v1/ratings", SomeRatingsJson()).status, 200);
  ASSERT_EQ(post("/v1/train", kTinyTrainJson).status, 200);
  // 8000 users of ~500 bytes each: far more than the stream's buffer and
  // the sockets' (the readers' receive buffers are 4 KB).
  std::string users;
  for (int i = 0; i < 8000; ++i) {
    absl::StrAppend(&users, i == 0 ? "" : ",", "\"u", i % 20, "\"");
  }
  const std::string body =
      absl::StrCat(R"({"template":{"n":10},"userIds":[)", users, "]}");
  const std::string request = absl::StrCat(
      "POST /v1/recommendations:all HTTP/1.1\r\nHost: x\r\n"
      "Content-Length: ",
      body.size(), "\r\n\r\n", body);
  std::vector<int> held;
  for (size_t i = 0; i < o.max_streams; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    const int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(http.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    char first[16];  // the stream has started: its status line
    ASSERT_GT(recv(fd, first, sizeof first, 0), 0);
    held.push_back(fd);
  }
  HttpReply refused = post("/v1/recommendations:all", R"({"userIds":["u1"]})");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_TRUE(absl::StrContains(refused.body, "LIMIT_EXCEEDED"))
      << refused.body;
  EXPECT_EQ(Call(http.port(), "GET", "/v1/stats").status, 200);
  for (int fd : held) close(fd);
  // Their calls see the readers gone and end; a new stream is served.
  HttpReply again;
  for (int i = 0; i < 100 && again.status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    again = post("/v1/recommendations:all", R"({"userIds":["u1"]})");
  }
  EXPECT_EQ(again.status, 200) << again.body;
}

// A streaming entry writing `count` messages of 10 KB, then failing.
struct BigWriter {
  std::atomic<int> written{0};
  Dispatcher::Entry Entry(int count) {
    Dispatcher::Entry e;
    e.input = v1::RecommendAllRequest::descriptor();
    e.output = v1::UserRecommendations::descriptor();
    e.streaming = [this, count](const pb::Message&,
                                const Dispatcher::Writer& write) {
      v1::UserRecommendations m;
      m.set_user_id(std::string(10 << 10, 'x'));
      for (int i = 0; i < count; ++i) {
        if (!write(m)) return absl::CancelledError("the reader went away");
        ++written;
      }
      return absl::DataLossError("the store failed part way");
    };
    return e;
  }
};

TEST(EventStream, ASlowReaderHoldsTheWriterAndErrorsComeInBand) {
  BigWriter writer;
  const Dispatcher::Entry entry = writer.Entry(200);  // 2 MB in all
  std::shared_ptr<EventStream> stream =
      EventStream::Start(entry, std::make_unique<v1::RecommendAllRequest>());
  std::atomic<int> wakes{0};
  stream->SetWake([&wakes] { ++wakes; });
  ASSERT_TRUE(stream->AwaitStart().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Nothing read: the writer waits with about kMaxPendingBytes queued.
  const int held = writer.written.load();
  EXPECT_LE(held * (10 << 10), EventStream::kMaxPendingBytes + (20 << 10));
  EXPECT_FALSE(stream->Done());
  // Reading everything lets the call run to its end.
  std::string body;
  char buf[16 << 10];
  while (true) {
    const int before = wakes.load();
    const size_t n = stream->Read(buf, sizeof buf, [] {});
    if (n == EventStream::kEnd) break;
    if (n == EventStream::kSuspended) {
      while (wakes.load() == before) std::this_thread::yield();
      continue;
    }
    body.append(buf, n);
  }
  EXPECT_EQ(writer.written.load(), 200);
  EXPECT_EQ(std::count(body.begin(), body.end(), '\n'), 2 * 200 + 3);
  EXPECT_TRUE(absl::StrContains(body, "event: error\ndata: {\"error\":"));
  EXPECT_TRUE(absl::StrContains(body, "the store failed part way"));
  EXPECT_TRUE(absl::StrContains(body, R"("status":"DATA_LOSS")"))
      << body.substr(body.size() - 300);
}

TEST(EventStream, DetachReleasesABlockedWriter) {
  BigWriter writer;
  const Dispatcher::Entry entry = writer.Entry(1000);
  std::shared_ptr<EventStream> stream =
      EventStream::Start(entry, std::make_unique<v1::RecommendAllRequest>());
  ASSERT_TRUE(stream->AwaitStart().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stream->Detach(/*forget_wake=*/true);
  stream->Join();  // returns: the writer saw the reader go
  EXPECT_TRUE(stream->Done());
  EXPECT_LT(writer.written.load(), 100);
  char buf[64];
  EXPECT_EQ(stream->Read(buf, sizeof buf, [] {}), EventStream::kEnd);
}

}  // namespace
}  // namespace rbmrec::server::http
