// libFuzzer target: the model-file loader (DeserializeModel) on arbitrary
// bytes.
//
// Each input is loaded twice: as given, and "repaired" (magic, payload
// length and FNV-1a checksum rewritten to match the bytes) so that mutations
// reach the payload parser instead of stopping at the checksum.
// Invariants checked (abort on violation) for every model that loads:
//   - it re-serialises to bytes that load again and serialise identically;
//   - predictions for a small query (a few rated items, trained and unknown
//     items, a new user and, when present, training user 0; exact and mean
//     field) are finite probabilities in [0, 1] summing to 1 (1e-4), and
//     their expectations lie on the model's rating scale.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/fnv.h"
#include "core/model.h"
#include "core/model_file.h"

namespace {

constexpr char kMagic[8] = {'R', 'B', 'M', 'R', 'E', 'C', 'M', '\x1a'};
constexpr size_t kHeaderSize = 24;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_model_file: invariant violated: %s\n", what);
    std::abort();
  }
}

// The bytes with a valid magic, payload length and checksum (the format
// version and the payload are left as they are). Empty when too short.
std::string Repaired(std::string_view bytes) {
  if (bytes.size() < kHeaderSize + sizeof(uint64_t)) return {};
  std::string out(bytes);
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  const uint64_t length = out.size() - kHeaderSize - sizeof(uint64_t);
  std::memcpy(out.data() + 16, &length, sizeof(length));  // little-endian host
  const uint64_t sum = rbmrec::Fnv1a64(out.data(), kHeaderSize + length);
  std::memcpy(out.data() + kHeaderSize + length, &sum, sizeof(sum));
  return out;
}

void CheckPredictions(const rbmrec::Model& m) {
  const int K = m.K();
  Check(K >= 2, "loaded scale has K < 2");
  const int32_t n = m.num_items();
  // The user's ratings: the first few items, spread over the scale.
  rbmrec::UserRatings user;
  for (int32_t i = 0; i < std::min<int32_t>(n, 3); ++i) {
    user.items.push_back(i);
    user.ks.push_back(static_cast<uint8_t>(i % K));
  }
  std::vector<int32_t> query;
  for (int32_t i = 0; i < std::min<int32_t>(n, 5); ++i) query.push_back(i);
  if (n > 5) query.push_back(n - 1);
  query.push_back(-1);  // an item the model does not know
  std::vector<float> out(query.size() * static_cast<size_t>(K));
  const int32_t users[2] = {-1, m.users().size() > 0 ? 0 : -1};
  for (int32_t u : users) {
    for (rbmrec::PredictMethod method :
         {rbmrec::PredictMethod::kExact, rbmrec::PredictMethod::kMeanField}) {
      for (const bool empty : {false, true}) {
        rbmrec::VisibleSet v = user.view();
        if (empty) v.n = 0;
        std::fill(out.begin(), out.end(), -1.0f);
        std::vector<bool> fallback;
        m.Predict(u, v, query, method, out.data(), &fallback);
        Check(fallback.size() == query.size(), "fallback size != query size");
        for (size_t q = 0; q < query.size(); ++q) {
          const float* p = out.data() + q * static_cast<size_t>(K);
          double sum = 0;
          for (int k = 0; k < K; ++k) {
            Check(std::isfinite(p[k]), "probability not finite");
            Check(p[k] >= 0.0f && p[k] <= 1.0f + 1e-5f,
                  "probability outside [0, 1]");
            sum += p[k];
          }
          Check(std::fabs(sum - 1.0) <= 1e-4, "probabilities do not sum to 1");
          const double e = m.Expectation(p);
          const double slack = 1e-4 * (m.scale().max() - m.scale().min());
          Check(std::isfinite(e) && e >= m.scale().min() - slack &&
                    e <= m.scale().max() + slack,
                "expected rating off the scale");
        }
      }
    }
  }
}

void CheckModel(const rbmrec::Model& m) {
  const std::string bytes = rbmrec::SerializeModel(m);
  const absl::StatusOr<rbmrec::Model> again = rbmrec::DeserializeModel(bytes);
  Check(again.ok(), "a loaded model re-serialises to bytes that do not load");
  Check(rbmrec::SerializeModel(*again) == bytes,
        "re-serialising a loaded model is not stable");
  CheckPredictions(m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<rbmrec::Model> model = rbmrec::DeserializeModel(bytes);
  if (model.ok()) {
    CheckModel(*model);
    return 0;
  }
  Check(!model.status().message().empty(), "error without a message");
  const std::string repaired = Repaired(bytes);
  if (repaired.empty()) return 0;
  model = rbmrec::DeserializeModel(repaired);
  if (model.ok()) CheckModel(*model);
  return 0;
}
