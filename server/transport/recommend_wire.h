#ifndef RBMREC_SERVER_TRANSPORT_RECOMMEND_WIRE_H_
#define RBMREC_SERVER_TRANSPORT_RECOMMEND_WIRE_H_

// Recommend's request read from its wire bytes with its two id lists left
// in place: a search-result candidate set or an exclusion list of hundreds
// of ids costs a view per id, not a parsed string each (an arena string, its
// cleanup entry and a UTF-8 pass: ~15 us for 500 ids, about an eighth of
// such a call's server CPU).
//
// Contract: pure, thread-safe, no I/O.

#include <string_view>

#include "absl/status/status.h"
#include "proto/rbmrec.pb.h"
#include "server/service/request_plan.h"

namespace rbmrec::server {

// Reads the serialized RecommendRequest `bytes`: exclude_item_ids (field 10)
// and candidate_item_ids (field 11) into *ids as views of `bytes`, in wire
// order; every other field into *rest, as RecommendRequest's own parser
// reads it (unknown fields kept, a later scalar wins). The lists are what a
// full parse would give (IdListsOf), except that their UTF-8 is left to the
// service's id checks, which name the entry ("candidate_item_ids[3]: item_id
// contains invalid UTF-8 at byte 0"). INVALID_ARGUMENT for bytes that are
// not a RecommendRequest (a truncated field, a malformed tag or length, an
// unmatched group). REQUIRES: `bytes` outlives every use of *ids; *rest is
// cleared first.
absl::Status SplitRecommendRequest(std::string_view bytes,
                                   v1::RecommendRequest* rest,
                                   RecommendIdLists* ids);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_TRANSPORT_RECOMMEND_WIRE_H_
