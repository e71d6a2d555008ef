#include "core/id_map.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

namespace rbmrec {
namespace {

// Debian's Abseil is built with its own absl::string_view (not an alias of
// std::string_view); convert explicitly at Abseil calls.
absl::string_view AV(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace

int32_t IdMap::GetOrAdd(std::string_view id) {
  const auto it = index_.find(AV(id));
  if (it != index_.end()) return it->second;
  const int32_t index = size();
  names_.emplace_back(id);
  index_.emplace(names_.back(), index);
  return index;
}

int32_t IdMap::Find(std::string_view id) const {
  const auto it = index_.find(AV(id));
  return it == index_.end() ? -1 : it->second;
}

bool IdMap::Rename(int32_t index, std::string_view id) {
  if (index_.contains(AV(id))) return false;
  std::string& name = names_[static_cast<size_t>(index)];
  index_.erase(name);
  name = std::string(id);
  index_.emplace(name, index);
  return true;
}

}  // namespace rbmrec
