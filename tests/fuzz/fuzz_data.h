#ifndef RBMREC_TESTS_FUZZ_FUZZ_DATA_H_
#define RBMREC_TESTS_FUZZ_FUZZ_DATA_H_

// The synthetic data set of the request fuzzer and its seeds: kUsers users
// ("u0".."u59") x kItems items ("i0".."i39") on the 1..5 scale, ~60% rated;
// users of group u % 2 like the items of half i / 20 == u % 2.

#include <string>

#include "absl/strings/str_cat.h"

namespace rbmrec::fuzz {

inline constexpr int kUsers = 60;
inline constexpr int kItems = 40;

inline std::string U(int u) { return absl::StrCat("u", u); }
inline std::string I(int i) { return absl::StrCat("i", i); }

inline bool Rated(int u, int i) { return (u * 13 + i * 7) % 5 < 3; }

inline double PlantedRating(int u, int i) {
  const bool likes = (i / 20) == (u % 2);
  const int wiggle = (u * 7 + i * 3) % 2;
  return likes ? 4.0 + wiggle : 1.0 + wiggle;
}

// The first byte of a fuzz_requests input: which RPC the rest is for.
enum class Rpc : unsigned char {
  kAddRatings = 0,
  kPredictRatings = 1,
  kRecommend = 2,
  kTrain = 3,
  kPutItems = 4,
  kDeleteRatings = 5,
  kDeleteUser = 6,
  kActivateModel = 7,
  kListModels = 8,
  kGetStats = 9,
  kCancelTraining = 10,
  kDeleteModel = 11,
  kPinModel = 12,
  kPruneModels = 13,
  // Selected by a first byte >= kLaterRpcsFrom, so that the inputs kept for
  // the first 14 (the corpus, the regressions) keep their meaning.
  kSimilarItems = 14,
  kGetUserRatings = 15,
  kGetItem = 16,
};
inline constexpr int kNumRpcs = 14;  // selected by byte % kNumRpcs
inline constexpr int kLaterRpcsFrom = 224;
inline constexpr int kNumLaterRpcs = 3;

// The RPC an input's first byte selects: below kLaterRpcsFrom, byte %
// kNumRpcs; from it, the later RPCs in turn.
inline Rpc SelectRpc(unsigned char byte) {
  if (byte < kLaterRpcsFrom) return static_cast<Rpc>(byte % kNumRpcs);
  return static_cast<Rpc>(kNumRpcs + (byte - kLaterRpcsFrom) % kNumLaterRpcs);
}
// The first byte that selects `rpc` (seeds).
inline unsigned char RpcByte(Rpc rpc) {
  const int r = static_cast<int>(rpc);
  return static_cast<unsigned char>(
      r < kNumRpcs ? r : kLaterRpcsFrom + r - kNumRpcs);
}

}  // namespace rbmrec::fuzz

#endif  // RBMREC_TESTS_FUZZ_FUZZ_DATA_H_
