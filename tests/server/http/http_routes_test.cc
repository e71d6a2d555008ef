// The HTTP routes, request mapping, status mapping and OpenAPI document,
// without a listener.

#include <string>

#include "absl/strings/match.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/rbmrec.pb.h"
#include "server/http/http_status.h"
#include "server/http/openapi.h"
#include "server/http/request_mapping.h"
#include "server/http/routes.h"

namespace rbmrec::server::http {
namespace {

const google::protobuf::ServiceDescriptor& Service() {
  return *v1::RecommendRequest::descriptor()->file()->FindServiceByName(
      "Rbmrec");
}

Router BuildRouter() {
  absl::StatusOr<Router> router = Router::Build(Service());
  EXPECT_TRUE(router.ok()) << router.status();
  return router.ok() ? std::move(*router) : Router();
}

TEST(PathTemplate, ParsesAndMatchesVariablesAndVerbs) {
  absl::StatusOr<PathTemplate> t =
      PathTemplate::Parse("/v1/users/{user_id}:predict");
  ASSERT_TRUE(t.ok()) << t.status();
  Bindings b;
  EXPECT_TRUE(t->Match("/v1/users/42:predict", &b));
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].first, "user_id");
  EXPECT_EQ(b[0].second, "42");
  EXPECT_FALSE(t->Match("/v1/users/42", &b));
  EXPECT_FALSE(t->Match("/v1/users/:predict", &b));
  EXPECT_FALSE(t->Match("/v1/users/4/2:predict", &b));
  absl::StatusOr<PathTemplate> rest = PathTemplate::Parse("/v1/{name=**}");
  ASSERT_TRUE(rest.ok());
  EXPECT_TRUE(rest->Match("/v1/a/b/c", &b));
  EXPECT_EQ(b[0].second, "a/b/c");
  EXPECT_FALSE(PathTemplate::Parse("v1/x").ok());
  EXPECT_FALSE(PathTemplate::Parse("/v1/{x").ok());
  EXPECT_FALSE(PathTemplate::Parse("/v1/{x=a/*}").ok());
  EXPECT_FALSE(PathTemplate::Parse("/v1/**/x").ok());
}

TEST(Router, FindsAnnotatedAndGenericRoutes) {
  const Router router = BuildRouter();
  struct Case {
    const char* method;
    const char* path;
    const char* rpc;
  } cases[] = {
      {"GET", "/v1/users/u1/recommendations", "Recommend"},
      {"POST", "/v1/users/u1:predict", "PredictRatings"},
      {"GET", "/v1/models", "ListModels"},
      {"GET", "/v1/stats", "GetStats"},
      {"POST", "/v1/ratings", "AddRatings"},
      {"POST", "/v1/models/3:activate", "ActivateModel"},
      {"POST", "/v1/models/3:pin", "PinModel"},
      {"DELETE", "/v1/models/3", "DeleteModel"},
      {"DELETE", "/v1/users/u1", "DeleteUser"},
      {"PUT", "/v1/items", "PutItems"},
      {"POST", "/v1/items", "PutItems"},
      {"POST", "/v1/train", "Train"},
      {"GET", "/v1/users/u1/ratings", "GetUserRatings"},
      {"POST", "/v1/users/u1/ratings:delete", "DeleteRatings"},
      {"GET", "/v1/items/i1", "GetItem"},
      {"GET", "/v1/items/i1/similar", "SimilarItems"},
      {"POST", "/v1/rbmrec.v1.Rbmrec/GetStats", "GetStats"},
      {"POST", "/v1/rbmrec.v1.Rbmrec/PruneModels", "PruneModels"},
  };
  for (const Case& c : cases) {
    Router::Lookup found = router.Find(c.method, c.path);
    ASSERT_NE(found.route, nullptr) << c.method << " " << c.path;
    EXPECT_EQ(found.route->method->name(), c.rpc) << c.path;
  }
  // Every rpc has the generic route.
  for (int i = 0; i < Service().method_count(); ++i) {
    const std::string path =
        "/v1/rbmrec.v1.Rbmrec/" + Service().method(i)->name();
    EXPECT_NE(router.Find("POST", path).route, nullptr) << path;
  }
  Router::Lookup wrong = router.Find("POST", "/v1/stats");
  EXPECT_EQ(wrong.route, nullptr);
  EXPECT_EQ(wrong.allowed, std::vector<std::string>{"GET"});
  Router::Lookup none = router.Find("GET", "/v1/nothing");
  EXPECT_EQ(none.route, nullptr);
  EXPECT_TRUE(none.allowed.empty());
}

TEST(RequestMapping, QueryParametersByNameWithTypes) {
  const Router router = BuildRouter();
  Router::Lookup found = router.Find("GET", "/v1/users/u%201/recommendations");
  ASSERT_NE(found.route, nullptr);
  v1::RecommendRequest request;
  absl::Status s = BuildRequest(
      *found.route, found.bindings,
      {{"n", "7"}, {"threshold", "3.5"}, {"modelVersion", "2"}}, "", &request);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(request.user_id(), "u%201");
  EXPECT_EQ(request.n(), 7);
  EXPECT_DOUBLE_EQ(request.threshold(), 3.5);
  EXPECT_EQ(request.model_version(), 2);

  v1::RecommendRequest bad;
  s = BuildRequest(*found.route, found.bindings, {{"n", "ten"}}, "", &bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "'ten' is not an int32")) << s;
  s = BuildRequest(*found.route, found.bindings, {{"colour", "red"}}, "", &bad);
  EXPECT_TRUE(
      absl::StrContains(s.message(), "unknown query parameter 'colour'"))
      << s;
  s = BuildRequest(*found.route, found.bindings, {{"user_id", "x"}}, "", &bad);
  EXPECT_TRUE(absl::StrContains(s.message(), "set by the path")) << s;
  s = BuildRequest(*found.route, found.bindings, {{"ratings", "x"}}, "", &bad);
  EXPECT_TRUE(absl::StrContains(s.message(), "message field")) << s;
  s = BuildRequest(*found.route, found.bindings, {{"n", "1"}}, "{}", &bad);
  EXPECT_TRUE(absl::StrContains(s.message(), "takes no request body")) << s;
  s = BuildRequest(*found.route, found.bindings, {{"n", "\xff"}}, "", &bad);
  EXPECT_FALSE(s.ok());
}

TEST(RequestMapping, RepeatedParametersEnumsAndBodies) {
  const Router router = BuildRouter();
  Router::Lookup found = router.Find("POST", "/v1/users/u2:predict");
  ASSERT_NE(found.route, nullptr);
  v1::PredictRatingsRequest request;
  absl::Status s = BuildRequest(
      *found.route, found.bindings, {},
      R"({"itemIds":["i1","i2"],"method":"MEAN_FIELD","user_id":"ignored"})",
      &request);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(request.user_id(), "u2");  // the path wins
  ASSERT_EQ(request.item_ids_size(), 2);
  EXPECT_EQ(request.method(), v1::MEAN_FIELD);
  // Body "*": no query parameters.
  s = BuildRequest(*found.route, found.bindings, {{"item_ids", "i3"}}, "",
                   &request);
  EXPECT_TRUE(absl::StrContains(s.message(), "in the JSON body")) << s;
  // Malformed JSON names the problem and carries MALFORMED_MESSAGE.
  v1::PredictRatingsRequest bad;
  s = BuildRequest(*found.route, found.bindings, {}, R"({"itemIds": [1,)",
                   &bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "request body")) << s;
  EXPECT_TRUE(absl::StrContains(ErrorJson(s), "MALFORMED_MESSAGE"));
  s = BuildRequest(*found.route, found.bindings, {}, R"({"nosuch": 1})", &bad);
  EXPECT_TRUE(absl::StrContains(s.message(), "nosuch")) << s;
}

// A GET route (no body) over `method`'s request, as a later annotation could
// declare it.
Route GetRoute(const char* method, const char* path) {
  Route r;
  r.http_method = "GET";
  r.method = Service().FindMethodByName(method);
  absl::StatusOr<PathTemplate> t = PathTemplate::Parse(path);
  EXPECT_TRUE(t.ok()) << t.status();
  if (t.ok()) r.path = *t;
  return r;
}

TEST(RequestMapping, RepeatedAndNestedQueryParameters) {
  const Route predict = GetRoute("PredictRatings", "/x/{user_id}");
  v1::PredictRatingsRequest p;
  absl::Status s = BuildRequest(
      predict, {{"user_id", "u1"}},
      {{"item_ids", "a"}, {"itemIds", "b"}, {"method", "2"}}, "", &p);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(p.item_ids_size(), 2);
  EXPECT_EQ(p.item_ids(1), "b");
  EXPECT_EQ(p.method(), v1::MEAN_FIELD);
  s = BuildRequest(predict, {}, {{"method", "SIDEWAYS"}}, "", &p);
  EXPECT_TRUE(absl::StrContains(s.message(), "not a value of Method")) << s;

  const Route train = GetRoute("Train", "/x");
  v1::TrainRequest t;
  s = BuildRequest(train, {},
                   {{"options.hidden", "4"},
                    {"options.learningRate", "0.1"},
                    {"options.ordinal", "false"}},
                   "", &t);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(t.options().has_hidden());
  EXPECT_EQ(t.options().hidden(), 4);
  EXPECT_DOUBLE_EQ(t.options().learning_rate(), 0.1);
  EXPECT_TRUE(t.options().has_ordinal());
  EXPECT_FALSE(t.options().ordinal());
  EXPECT_FALSE(t.options().has_epochs());
  s = BuildRequest(train, {}, {{"options.nosuch", "1"}}, "", &t);
  EXPECT_TRUE(absl::StrContains(s.message(), "options.nosuch")) << s;
  s = BuildRequest(train, {}, {{"options.hidden", "99999999999"}}, "", &t);
  EXPECT_TRUE(absl::StrContains(s.message(), "not an int32")) << s;
}

TEST(HttpStatus, GoogleApiDesignGuideMapping) {
  using C = absl::StatusCode;
  EXPECT_EQ(HttpStatusOf(C::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(C::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusOf(C::kOutOfRange), 400);
  EXPECT_EQ(HttpStatusOf(C::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(C::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusOf(C::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(C::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusOf(C::kAborted), 409);
  EXPECT_EQ(HttpStatusOf(C::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(C::kCancelled), 499);
  EXPECT_EQ(HttpStatusOf(C::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusOf(C::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(C::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatusOf(C::kInternal), 500);
  EXPECT_EQ(HttpStatusOf(C::kDataLoss), 500);
  EXPECT_EQ(HttpStatusOf(C::kUnknown), 500);
  google::protobuf::Struct body;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  ErrorJson(absl::NotFoundError("no \"user\" u9")), &body)
                  .ok());
  const auto& error = body.fields().at("error").struct_value().fields();
  EXPECT_EQ(error.at("code").number_value(), 404);
  EXPECT_EQ(error.at("status").string_value(), "NOT_FOUND");
  EXPECT_EQ(error.at("message").string_value(), "no \"user\" u9");
  EXPECT_EQ(error.count("reason"), 0u);
  // A message quoting invalid UTF-8 still makes a JSON body (U+FFFD).
  google::protobuf::Struct quoted;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  ErrorJson(absl::InvalidArgumentError("id 'a\xc0\xb6"
                                                       "b'")),
                  &quoted)
                  .ok());
  EXPECT_EQ(quoted.fields()
                .at("error")
                .struct_value()
                .fields()
                .at("message")
                .string_value(),
            "id 'a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b'");
}

TEST(OpenApi, ListsTheRoutesAndSchemas) {
  const Router router = BuildRouter();
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  OpenApiJson(Service(), router), &doc)
                  .ok());
  EXPECT_EQ(doc.fields().at("openapi").string_value(), "3.0.3");
  const auto& paths = doc.fields().at("paths").struct_value().fields();
  ASSERT_EQ(paths.count("/v1/users/{user_id}/recommendations"), 1u);
  const auto& get = paths.at("/v1/users/{user_id}/recommendations")
                        .struct_value()
                        .fields()
                        .at("get")
                        .struct_value()
                        .fields();
  std::string names;
  for (const auto& p : get.at("parameters").list_value().values()) {
    names += p.struct_value().fields().at("name").string_value() + ",";
  }
  EXPECT_TRUE(absl::StrContains(names, "user_id,")) << names;
  EXPECT_TRUE(absl::StrContains(names, "n,")) << names;
  EXPECT_TRUE(absl::StrContains(names, "threshold,")) << names;
  EXPECT_EQ(paths.count("/v1/users/{user_id}:predict"), 1u);
  EXPECT_EQ(paths.count("/v1/rbmrec.v1.Rbmrec/Train"), 1u);
  const auto& schemas = doc.fields()
                            .at("components")
                            .struct_value()
                            .fields()
                            .at("schemas")
                            .struct_value()
                            .fields();
  EXPECT_EQ(schemas.count("rbmrec.v1.RecommendResponse"), 1u);
  EXPECT_EQ(schemas.count("rbmrec.v1.Recommendation"), 1u);
  EXPECT_EQ(schemas.count("Error"), 1u);
}

}  // namespace
}  // namespace rbmrec::server::http
