#include "core/interned_ratings.h"

#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace rbmrec {

absl::StatusOr<InternedRatings> ReadRatingsInterned(
    const std::string& path, const ReadOptions& options) {
  InternedRatings r;
  absl::flat_hash_map<uint64_t, uint32_t> value_index;
  absl::StatusOr<ReadResult> read =
      ReadRatingsFileTo(path, options, [&](const RatingView& v) {
        uint64_t bits = 0;
        std::memcpy(&bits, &v.rating, sizeof bits);
        const auto [it, added] = value_index.try_emplace(
            bits, static_cast<uint32_t>(r.values.size()));
        if (added) {
          r.values.push_back(v.rating);
          r.value_line.push_back(v.line);
        }
        r.user.push_back(r.users.GetOrAdd(v.user));
        r.item.push_back(r.items.GetOrAdd(v.item));
        r.value.push_back(it->second);
      });
  if (!read.ok()) return read.status();
  r.read = *std::move(read);
  r.user.shrink_to_fit();
  r.item.shrink_to_fit();
  r.value.shrink_to_fit();
  return r;
}

absl::StatusOr<std::vector<uint8_t>> ValueIndices(const InternedRatings& r,
                                                  const RatingScale& scale,
                                                  std::string_view name) {
  std::vector<uint8_t> k(r.values.size());
  for (size_t v = 0; v < r.values.size(); ++v) {
    absl::StatusOr<int> index = scale.Index(r.values[v]);
    if (!index.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(absl::string_view(name.data(), name.size()), ":",
                       r.value_line[v], ": ", index.status().message()));
    }
    k[v] = static_cast<uint8_t>(*index);
  }
  return k;
}

Dataset DatasetFromInterned(const InternedRatings& r, size_t begin, size_t end,
                            const RatingScale& scale,
                            const std::vector<uint8_t>& k,
                            std::vector<int32_t>* user_map,
                            std::vector<int32_t>* item_map) {
  Dataset d;
  d.scale = scale;
  user_map->assign(static_cast<size_t>(r.users.size()), -1);
  item_map->assign(static_cast<size_t>(r.items.size()), -1);
  d.ratings.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) {
    int32_t& u = (*user_map)[static_cast<size_t>(r.user[i])];
    if (u < 0) u = d.users.GetOrAdd(r.users.Name(r.user[i]));
    int32_t& q = (*item_map)[static_cast<size_t>(r.item[i])];
    if (q < 0) q = d.items.GetOrAdd(r.items.Name(r.item[i]));
    d.ratings.push_back(Rating{u, q, k[r.value[i]]});
  }
  return d;
}

std::vector<int32_t> MapIds(const IdMap& from, const IdMap& to) {
  std::vector<int32_t> out(static_cast<size_t>(from.size()));
  for (int32_t i = 0; i < from.size(); ++i) out[i] = to.Find(from.Name(i));
  return out;
}

}  // namespace rbmrec
