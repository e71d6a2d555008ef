#include "server/service/proto_convert.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"

namespace rbmrec::server {

void FillScale(const RatingScale& scale, v1::RatingScale* out) {
  out->set_min(scale.min());
  out->set_max(scale.max());
  out->set_step(scale.step());
  for (int k = 0; k < scale.K(); ++k) out->add_values(scale.Value(k));
}

bool SaneDistribution(const float* p, int K) {
  double sum = 0;
  for (int k = 0; k < K; ++k) {
    if (!std::isfinite(p[k]) || p[k] < 0) return false;
    sum += p[k];
  }
  return std::abs(sum - 1.0) < 1e-3;
}

std::string AttributesJson(
    const google::protobuf::Map<std::string, std::string>& attributes) {
  if (attributes.empty()) return "";
  std::map<std::string, std::string> attrs(attributes.begin(),
                                           attributes.end());
  auto quote = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      const auto uc = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        out.push_back('\\');
        out.push_back(c);
      } else if (uc < 0x20) {
        out += absl::StrFormat("\\u%04x", static_cast<int>(uc));
      } else {
        out.push_back(c);
      }
    }
    return out + "\"";
  };
  std::string json = "{";
  for (const auto& [k, v] : attrs) {
    if (json.size() > 1) json.push_back(',');
    absl::StrAppend(&json, quote(k), ":", quote(v));
  }
  return json + "}";
}

absl::Status ParseAttributesJson(const std::string& json, v1::Item* item) {
  if (json.empty()) return absl::OkStatus();
  // The stored object is what AttributesJson wrote: parsed as the
  // attributes map of an Item in protobuf's JSON mapping.
  v1::Item parsed;
  const auto s = google::protobuf::util::JsonStringToMessage(
      absl::StrCat("{\"attributes\":", json, "}"), &parsed);
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat("item '", item->item_id(),
                                            "': stored attributes are not a "
                                            "JSON object of strings: ",
                                            s.ToString()));
  }
  item->mutable_attributes()->swap(*parsed.mutable_attributes());
  return absl::OkStatus();
}

void FillStats(const store::Stats& stats, v1::GetStatsResponse* out) {
  out->set_users(stats.users);
  out->set_items(stats.items);
  out->set_ratings(stats.ratings);
  out->set_views(stats.views);
  out->set_model_versions(stats.model_versions);
  out->set_database_bytes(stats.database_bytes);
  out->set_database_file_bytes(stats.database_file_bytes);
  out->set_wal_bytes(stats.wal_bytes);
  out->set_database_max_bytes(stats.database_max_bytes);
}

void FillTraining(const TrainingJobs::SlotStatus& slot,
                  v1::TrainingStatus* out) {
  out->set_running(slot.running);
  out->set_epoch(slot.epoch);
  out->set_max_epochs(slot.max_epochs);
  out->set_elapsed_seconds(slot.elapsed_seconds);
  out->set_validation_rmse(slot.validation_rmse);
  out->set_rbm(slot.rbm);
}

}  // namespace rbmrec::server
