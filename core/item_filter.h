#ifndef RBMREC_CORE_ITEM_FILTER_H_
#define RBMREC_CORE_ITEM_FILTER_H_

// Which of a model's items a ranking may return: the item catalogue in one
// model's indices (Catalogue: categories and hidden items as bitsets) and a
// request's allowed set built from it (ItemFilter). Recommend's ranking
// (core/recommend.h) takes an ItemFilter, so that every stage sees only the
// allowed items; other rankings (e.g. of similar items) can use the same.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "core/model.h"

namespace rbmrec {

// A set of item indices 0..size()-1. Thread-compatible.
class ItemBitset {
 public:
  ItemBitset() = default;
  // `size` items, all in the set when `all`.
  explicit ItemBitset(int32_t size, bool all = false);

  int32_t size() const { return size_; }
  // REQUIRES 0 <= i < size() (Test: any i; outside the range is false).
  bool Test(int32_t i) const {
    return i >= 0 && i < size_ &&
           (words_[static_cast<size_t>(i) >> 6] >> (i & 63) & 1u) != 0;
  }
  void Set(int32_t i) { words_[static_cast<size_t>(i) >> 6] |= Bit(i); }
  void Reset(int32_t i) { words_[static_cast<size_t>(i) >> 6] &= ~Bit(i); }
  // REQUIRES other.size() == size().
  void And(const ItemBitset& other);
  void Or(const ItemBitset& other);
  // The number of items in the set.
  int64_t Count() const;
  // out[i] = 1 for every i < size() not in the set (others untouched), a
  // word at a time. REQUIRES out has size() entries.
  void MarkUnset(uint8_t* out) const;
  // Appends the items in the set to `out` in increasing order.
  void AppendSet(std::vector<int32_t>* out) const;

 private:
  static uint64_t Bit(int32_t i) { return uint64_t{1} << (i & 63); }
  int32_t size_ = 0;
  std::vector<uint64_t> words_;
};

// One item's catalogue entry by external id (as the store reads it).
struct CatalogueEntry {
  std::string item;
  std::vector<std::string> categories;
  bool hidden = false;
};

// The catalogue in one model's item indices. Immutable once built, so
// thread-safe; share it by shared_ptr<const Catalogue>.
class Catalogue {
 public:
  // Entries of items `model` does not know are skipped. The base set is
  // the items with training data (Model::Trained) that are not hidden.
  Catalogue(const Model& model, absl::Span<const CatalogueEntry> entries);

  int32_t num_items() const { return base_.size(); }
  // Trained and not hidden: what any ranking may return.
  const ItemBitset& base() const { return base_; }
  bool Hidden(int32_t i) const { return hidden_.Test(i); }
  // The model items of `category`; null when none has it.
  const ItemBitset* Category(std::string_view category) const;
  // base() in popularity order: most training ratings first, ties by item
  // id (the cold-start fallback's ranking).
  const std::vector<int32_t>& MostRated() const { return most_rated_; }

 private:
  ItemBitset base_;
  std::vector<int32_t> most_rated_;
  ItemBitset hidden_;
  absl::flat_hash_map<std::string, ItemBitset> categories_;
};

// A request's conditions, in model indices where they name items.
struct FilterSpec {
  // Any-of: items with at least one of these (empty: no condition).
  std::vector<std::string> any_categories;
  // All-of: items with every one of these (empty: no condition).
  std::vector<std::string> all_categories;
  // Items never allowed (e.g. the user's rated items, a request's
  // exclusions); indices outside the model are ignored.
  std::vector<int32_t> exclude;
  // With use_candidates, only these items (indices outside the model are
  // ignored, so only unknown ids allow nothing).
  bool use_candidates = false;
  std::vector<int32_t> candidates;
};

// The items a ranking may return: catalogue.base() intersected with the
// spec's conditions. A category no item has makes an any-of condition
// match nothing from it and an all-of condition match nothing at all.
// Immutable after Build; thread-compatible.
class ItemFilter {
 public:
  ItemFilter() = default;
  static ItemFilter Build(const Catalogue& catalogue, const FilterSpec& spec);
  // Without a catalogue: the items with training data minus `exclude`.
  static ItemFilter AllTrained(const Model& model,
                               absl::Span<const int32_t> exclude);
  // The items i with mask[i] != 0, of mask.size() items (tools, tests).
  static ItemFilter FromMask(absl::Span<const uint8_t> mask);

  bool Allowed(int32_t i) const { return allowed_.Test(i); }
  // out[i] = 1 for every item i < num_items() not allowed (others
  // untouched). REQUIRES out has num_items() entries.
  void MarkDisallowed(uint8_t* out) const { allowed_.MarkUnset(out); }
  // How many items are allowed.
  int64_t count() const { return count_; }
  int32_t num_items() const { return allowed_.size(); }
  // A narrow filter (e.g. a candidate set) allows at most a quarter of the
  // items: rankings then score only its items, in this list (increasing
  // order). Null for a wider filter.
  const std::vector<int32_t>* narrow_items() const {
    return Narrow() ? &items_ : nullptr;
  }

 private:
  bool Narrow() const { return count_ * 4 <= num_items(); }
  // Sets count_, and items_ for a narrow filter.
  void Finish();

  ItemBitset allowed_;
  int64_t count_ = 0;
  std::vector<int32_t> items_;
};

}  // namespace rbmrec

#endif  // RBMREC_CORE_ITEM_FILTER_H_
