#ifndef RBMREC_SERVER_CACHES_BOUNDED_CACHE_H_
#define RBMREC_SERVER_CACHES_BOUNDED_CACHE_H_

// A string-keyed cache whose entries' estimated total size stays under a
// byte budget: a Put that would go over it empties the cache first (simple,
// and rare when the budget is well above the working set). The size of an
// entry is Size(key, value), so it is computed again on removal rather than
// stored.
//
// Not thread-safe: the owner locks.

#include <cstddef>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace rbmrec::server {

template <typename V, size_t (*Size)(const std::string&, const V&)>
class BoundedCache {
 public:
  explicit BoundedCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The cached value, or nullptr.
  const V* Find(const std::string& key) const {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : &it->second;
  }

  // Inserts or replaces. An entry larger than the whole budget is not kept.
  void Put(const std::string& key, V value) {
    Erase(key);
    const size_t size = Size(key, value);
    if (size > max_bytes_) return;
    if (bytes_ + size > max_bytes_) Clear();
    bytes_ += size;
    map_.emplace(key, std::move(value));
  }

  void Erase(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return;
    bytes_ -= Size(it->first, it->second);
    map_.erase(it);
  }

  void Clear() {
    map_.clear();
    bytes_ = 0;
  }

  size_t size() const { return map_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  absl::flat_hash_map<std::string, V> map_;
  size_t bytes_ = 0;
  size_t max_bytes_;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_CACHES_BOUNDED_CACHE_H_
