#ifndef RBMREC_CORE_ID_MAP_H_
#define RBMREC_CORE_ID_MAP_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace rbmrec {

// Maps external string ids (user or item ids as they appear in files and
// RPCs) to dense indices 0..size()-1 in order of first appearance.
// Not thread-safe for concurrent mutation; concurrent const use is safe.
class IdMap {
 public:
  // Returns the dense index of `id`, adding it if new.
  int32_t GetOrAdd(std::string_view id);
  // Returns the dense index of `id`, or -1 when absent.
  int32_t Find(std::string_view id) const;
  // Gives entry `index` the id `id` instead of its own: Find(old id) is -1
  // afterwards, indices do not move. Returns false (and changes nothing)
  // when `id` is already present. REQUIRES: 0 <= index < size().
  bool Rename(int32_t index, std::string_view id);
  // REQUIRES: 0 <= index < size().
  const std::string& Name(int32_t index) const { return names_[index]; }
  int32_t size() const { return static_cast<int32_t>(names_.size()); }
  const std::vector<std::string>& names() const { return names_; }
  bool operator==(const IdMap& o) const { return names_ == o.names_; }

 private:
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, int32_t> index_;
};

}  // namespace rbmrec

#endif  // RBMREC_CORE_ID_MAP_H_
