#ifndef RBMREC_SERVER_REQUEST_CHECKS_H_
#define RBMREC_SERVER_REQUEST_CHECKS_H_

// Validation of request fields and proto conversion helpers of the service.
// Pure functions; thread-safe.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/rating_scale.h"
#include "core/trainer.h"
#include "proto/rbmrec.pb.h"
#include "server/model_registry.h"
#include "store/store.h"

namespace rbmrec::server {

namespace v1 = ::rbmrec::v1;

// Hard caps of TrainOptions fields: requests over them fail with
// INVALID_ARGUMENT and reason LIMIT_EXCEEDED, whatever the memory limits.
inline constexpr int kMaxHidden = 10000;
inline constexpr int kMaxEpochs = 100000;
inline constexpr int kMaxBatchSize = 1000000;
inline constexpr int kMaxCdSteps = 1000;
inline constexpr int kMaxEnsemble = 64;
inline constexpr int kMaxTrainThreads = 256;

// `id` cut to store::kMaxIdBytes (for echoing a rejected id).
std::string Truncated(const std::string& id);
// "" when `id` is valid (non-empty, at most store::kMaxIdBytes bytes, no
// control character: ControlCharacterProblem), else why not, naming
// `field` ("user_id is empty").
std::string IdProblem(const std::string& id, absl::string_view field);
// "" when `text` holds no control character (U+0000..U+001F, U+007F,
// U+0080..U+009F), else "FIELD contains the control character U+XXXX at
// byte N". Ids and item metadata (titles, attributes) must pass: a client
// that prints them cannot be sent terminal escape sequences.
std::string ControlCharacterProblem(absl::string_view text,
                                    absl::string_view field);
// "" when `rating` is on `scale` (within RatingScale::Index's tolerance),
// else why not, the value in its shortest round-trip form ("rating
// 4.000001 is not on a step of the scale 1:5:1"). `index` (may be null) is
// set to the rating's index when it is on the scale.
std::string RatingProblem(double rating, const RatingScale& scale,
                          int* index = nullptr);
// RESOURCE_EXHAUSTED + LIMIT_EXCEEDED: "<what> is <value>, over the
// server's limit of <limit> (<flag>)".
absl::Status OverLimit(absl::string_view what, int64_t value, int64_t limit,
                       absl::string_view flag);
// UNSPECIFIED and EXACT: kExact; MEAN_FIELD: kMeanField; other numbers:
// INVALID_ARGUMENT.
absl::StatusOr<PredictMethod> ToMethod(v1::Method m);
void FillScale(const RatingScale& scale, v1::RatingScale* out);
v1::ModelInfo ToProto(const store::ModelInfo& m);
// True when p is a distribution over K values (finite, >= 0, sum 1).
bool SaneDistribution(const float* p, int K);
// The JSON object of item attributes (keys sorted), "" when empty.
std::string AttributesJson(
    const google::protobuf::Map<std::string, std::string>& attributes);

// A Train request converted and checked.
struct TrainJobRequest {
  TrainOptions options;
  Activation policy = Activation::kIfBetter;
};
// Applies the request's options over `defaults` and checks each field:
// INVALID_ARGUMENT naming it ("options.hidden ..."), with reason
// LIMIT_EXCEEDED when over its hard cap; an unknown activation number is
// INVALID_ARGUMENT. threads 0 or above max_threads (0 = hardware threads)
// become that limit. validation_fraction in [0, 0.5]. The float options
// (learning_rate, momentum, weight_decay, average) are checked as sent and
// as the float training uses, which may round onto an open end of the
// range: "options.momentum 0.99999999 rounds to 1 in single precision;
// must be < 1".
absl::StatusOr<TrainJobRequest> TrainJobFromProto(
    const v1::TrainRequest& request, const TrainOptions& defaults,
    Activation default_policy, int max_threads);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_REQUEST_CHECKS_H_
