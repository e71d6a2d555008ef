#ifndef RBMREC_SERVER_SERVICE_REQUEST_CHECKS_H_
#define RBMREC_SERVER_SERVICE_REQUEST_CHECKS_H_

// Checks of request fields shared by the service's RPCs: ids, texts,
// ratings, items, limits, Train options. Each returns "" / OK when the
// value is valid, else a message naming the field (and, over a limit, the
// limit and its flag). Pure functions; thread-safe. The PredictRatings /
// Recommend checks and defaults are in server/service/request_plan.h; proto
// conversions in server/service/proto_convert.h.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/rating_scale.h"
#include "core/trainer.h"
#include "proto/rbmrec.pb.h"
#include "server/models/model_registry.h"
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

// Hard caps of item metadata (PutItems): over them INVALID_ARGUMENT with
// reason LIMIT_EXCEEDED, whatever the server's flags. A title is a line
// shown next to an item; attributes are a handful of short facts.
inline constexpr size_t kMaxTitleBytes = 1024;
inline constexpr int kMaxItemAttributes = 64;
inline constexpr size_t kMaxAttributeKeyBytes = 256;
inline constexpr size_t kMaxAttributeValueBytes = 1024;

// `id` cut to store::kMaxIdBytes (for echoing a rejected id).
std::string Truncated(const std::string& id);
// "" when `id` is valid, else why not, naming `field`. Valid: non-empty, at
// most store::kMaxIdBytes bytes, well-formed UTF-8 of ordinary code points
// only (TextRules::kId, core/utf8.h): no control character (U+0000..U+001F,
// U+007F, U+0080..U+009F), line or paragraph separator (U+2028, U+2029),
// bidirectional formatting character (U+202A..U+202E, U+2066..U+2069) or
// bidirectional mark (U+200E, U+200F, U+061C). Every RPC checks its ids
// with this, and the store checks the ids it creates by the same rules
// (store/checks.h). Messages: "user_id is empty", "user_id is 300 bytes
// long (limit 256)", "user_id contains the bidirectional formatting
// character U+202E at byte 3", "user_id contains invalid UTF-8 at byte 0".
std::string IdProblem(std::string_view id, absl::string_view field);
// "" when `text` (a title, an attribute key or value) passes
// TextRules::kTitle (core/utf8.h): well-formed UTF-8 without control
// characters, line or paragraph separators or bidirectional formatting
// characters; else "FIELD contains ..." as IdProblem says. So a client
// that prints item metadata cannot be sent terminal escape sequences, line
// breaks, or formatting that reorders the text after the field. The
// bidirectional marks (U+200E, U+200F, U+061C) are allowed: titles mixing
// right-to-left and left-to-right words may need them, and they reach no
// further than their neighbours.
std::string TextProblem(absl::string_view text, absl::string_view field);
// "" when `category` (an item's or a Recommend filter's) is valid, else
// why not, naming `field`: non-empty, at most store::kMaxCategoryBytes, and
// the characters IdProblem allows ("categories[2] is empty").
std::string CategoryProblem(const std::string& category,
                            absl::string_view field);
// OK when item `index` of a PutItems request may be stored: its item_id as
// IdProblem says; its title, attribute count, keys and values within the
// caps above (INVALID_ARGUMENT, reason LIMIT_EXCEEDED: "items[3]: title is
// 1048576 bytes long (limit 1024)") and as TextProblem says
// (INVALID_ARGUMENT: "items[3]: title contains the control character
// U+001B at byte 0"); at most store::kMaxItemCategories categories, each
// as CategoryProblem says ("items[3]: categories[2] is empty"; over a size
// cap with reason LIMIT_EXCEEDED).
absl::Status CheckItem(const v1::Item& item, int index);
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
// The stored model version's proto (ListModels, ActivateModel, PinModel).
// A conversion, not a check: it moves to server/service/proto_convert.h once
// the store's typed model metrics land (issue 27).
v1::ModelInfo ToProto(const store::ModelInfo& m);

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

#endif  // RBMREC_SERVER_SERVICE_REQUEST_CHECKS_H_
