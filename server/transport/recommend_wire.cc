#include "server/transport/recommend_wire.h"

#include <climits>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace rbmrec::server {
namespace {

using google::protobuf::internal::WireFormatLite;

absl::Status Malformed(int offset, const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid RecommendRequest: ", what,
                   " at byte ", offset));
}

}  // namespace

absl::Status SplitRecommendRequest(std::string_view bytes,
                                   v1::RecommendRequest* rest,
                                   RecommendIdLists* ids) {
  rest->Clear();
  ids->exclude.clear();
  ids->candidates.clear();
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(
        "the request is not a valid RecommendRequest: over 2 GiB");
  }
  const int size = static_cast<int>(bytes.size());
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()), size);
  // The other fields' bytes (tags included), in wire order: the runs
  // between id fields, copied only once an id field splits them (a request
  // without ids parses from `bytes` itself).
  std::string other;
  int run_start = 0;  // where the current run of other fields starts
  while (in.CurrentPosition() < size) {
    const int start = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return Malformed(start, "a malformed tag");
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const bool is_list =
        WireFormatLite::GetTagWireType(tag) ==
            WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
        (field == v1::RecommendRequest::kExcludeItemIdsFieldNumber ||
         field == v1::RecommendRequest::kCandidateItemIdsFieldNumber);
    if (!is_list) {
      if (!WireFormatLite::SkipField(&in, tag)) {
        return Malformed(start, "a truncated or malformed field");
      }
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length) ||
        length > static_cast<uint32_t>(size - in.CurrentPosition())) {
      return Malformed(start, "an id with a malformed or truncated length");
    }
    const std::string_view id(bytes.data() + in.CurrentPosition(), length);
    in.Skip(static_cast<int>(length));
    other.append(bytes.data() + run_start,
                 static_cast<size_t>(start - run_start));
    run_start = in.CurrentPosition();
    (field == v1::RecommendRequest::kCandidateItemIdsFieldNumber
         ? ids->candidates
         : ids->exclude)
        .push_back(id);
  }
  const bool split = ids->exclude.size() + ids->candidates.size() > 0;
  if (split) {
    other.append(bytes.data() + run_start,
                 static_cast<size_t>(size - run_start));
  }
  const std::string_view others = split ? std::string_view(other) : bytes;
  if (!rest->ParseFromArray(others.data(), static_cast<int>(others.size()))) {
    return absl::InvalidArgumentError(
        "the request is not a valid RecommendRequest: its fields other than "
        "the id lists do not parse (e.g. a string that is not UTF-8)");
  }
  return absl::OkStatus();
}

}  // namespace rbmrec::server
