#ifndef RBMREC_SERVER_SERVICE_PROTO_CONVERT_H_
#define RBMREC_SERVER_SERVICE_PROTO_CONVERT_H_

// Conversions between the service's values and the rbmrec.v1 protos (and
// the JSON the store keeps of item attributes). Pure functions, no checks
// (server/service/request_checks.h and server/service/request_plan.h check
// requests); thread-safe.

#include <string>

#include "absl/status/status.h"
#include "core/rating_scale.h"
#include "proto/rbmrec.pb.h"
#include "server/models/training_jobs.h"
#include "store/store.h"

namespace rbmrec::server {

namespace v1 = ::rbmrec::v1;

// min, max, step and every value of `scale`.
void FillScale(const RatingScale& scale, v1::RatingScale* out);
// True when p is a distribution over K values (finite, >= 0, sum 1 within
// 1e-3): the service never hands out another one.
bool SaneDistribution(const float* p, int K);
// The JSON object of item attributes (keys sorted, '"', '\' and control
// characters escaped), "" when empty.
// The inverse of AttributesJson: `json` (a stored attributes object, or ""
// for none) into item->attributes. Internal when the stored text is not a
// JSON object of strings.
absl::Status ParseAttributesJson(const std::string& json, v1::Item* item);
std::string AttributesJson(
    const google::protobuf::Map<std::string, std::string>& attributes);
// The store's counts and sizes into GetStats' fields.
void FillStats(const store::Stats& stats, v1::GetStatsResponse* out);
// The training slot into GetStats' `training`.
void FillTraining(const TrainingJobs::SlotStatus& slot,
                  v1::TrainingStatus* out);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_PROTO_CONVERT_H_
