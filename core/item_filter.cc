#include "core/item_filter.h"

#include <utility>

#include "absl/strings/string_view.h"

namespace rbmrec {

ItemBitset::ItemBitset(int32_t size, bool all)
    : size_(size),
      words_((static_cast<size_t>(size) + 63) / 64, all ? ~uint64_t{0} : 0) {
  if (all && (size & 63) != 0) words_.back() = (uint64_t{1} << (size & 63)) - 1;
}

void ItemBitset::And(const ItemBitset& other) {
  for (size_t w = 0; w < words_.size(); ++w) words_[w] &= other.words_[w];
}

void ItemBitset::Or(const ItemBitset& other) {
  for (size_t w = 0; w < words_.size(); ++w) words_[w] |= other.words_[w];
}

int64_t ItemBitset::Count() const {
  int64_t n = 0;
  for (const uint64_t w : words_) n += __builtin_popcountll(w);
  return n;
}

void ItemBitset::MarkUnset(uint8_t* out) const {
  for (size_t w = 0; w < words_.size(); ++w) {
    uint64_t unset = ~words_[w];
    const size_t first = w << 6;
    if (first + 64 > static_cast<size_t>(size_)) {  // the last, partial word
      const size_t bits = static_cast<size_t>(size_) - first;
      unset &= (uint64_t{1} << bits) - 1;
    }
    for (; unset != 0; unset &= unset - 1) {
      out[first + static_cast<size_t>(__builtin_ctzll(unset))] = 1;
    }
  }
}

void ItemBitset::AppendSet(std::vector<int32_t>* out) const {
  for (size_t w = 0; w < words_.size(); ++w) {
    const int32_t first = static_cast<int32_t>(w << 6);
    for (uint64_t set = words_[w]; set != 0; set &= set - 1) {
      out->push_back(first + __builtin_ctzll(set));
    }
  }
}

Catalogue::Catalogue(const Model& model,
                     absl::Span<const CatalogueEntry> entries)
    : base_(model.num_items()), hidden_(model.num_items()) {
  const int32_t m = model.num_items();
  for (int32_t i = 0; i < m; ++i) {
    if (model.Trained(i)) base_.Set(i);
  }
  for (const CatalogueEntry& e : entries) {
    const int32_t i = model.items().Find(e.item);
    if (i < 0) continue;
    if (e.hidden) {
      hidden_.Set(i);
      base_.Reset(i);
    }
    for (const std::string& c : e.categories) {
      auto [it, added] = categories_.try_emplace(c);
      if (added) it->second = ItemBitset(m);
      it->second.Set(i);
    }
  }
  for (int32_t i : MostRatedItems(model)) {
    if (base_.Test(i)) most_rated_.push_back(i);
  }
}

const ItemBitset* Catalogue::Category(std::string_view category) const {
  auto it =
      categories_.find(absl::string_view(category.data(), category.size()));
  return it == categories_.end() ? nullptr : &it->second;
}

ItemFilter ItemFilter::Build(const Catalogue& catalogue,
                             const FilterSpec& spec) {
  ItemFilter f;
  const int32_t m = catalogue.num_items();
  f.allowed_ = catalogue.base();
  if (!spec.any_categories.empty()) {
    ItemBitset any(m);
    for (const std::string& c : spec.any_categories) {
      if (const ItemBitset* set = catalogue.Category(c)) any.Or(*set);
    }
    f.allowed_.And(any);
  }
  for (const std::string& c : spec.all_categories) {
    const ItemBitset* set = catalogue.Category(c);
    if (set == nullptr) {
      f.allowed_ = ItemBitset(m);
      break;
    }
    f.allowed_.And(*set);
  }
  if (spec.use_candidates) {
    ItemBitset only(m);
    for (const int32_t i : spec.candidates) {
      if (i >= 0 && i < m) only.Set(i);
    }
    f.allowed_.And(only);
  }
  for (const int32_t i : spec.exclude) {
    if (i >= 0 && i < m) f.allowed_.Reset(i);
  }
  f.Finish();
  return f;
}

ItemFilter ItemFilter::AllTrained(const Model& model,
                                  absl::Span<const int32_t> exclude) {
  ItemFilter f;
  const int32_t m = model.num_items();
  f.allowed_ = ItemBitset(m);
  for (int32_t i = 0; i < m; ++i) {
    if (model.Trained(i)) f.allowed_.Set(i);
  }
  for (const int32_t i : exclude) {
    if (i >= 0 && i < m) f.allowed_.Reset(i);
  }
  f.Finish();
  return f;
}

ItemFilter ItemFilter::FromMask(absl::Span<const uint8_t> mask) {
  ItemFilter f;
  f.allowed_ = ItemBitset(static_cast<int32_t>(mask.size()));
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i] != 0) f.allowed_.Set(static_cast<int32_t>(i));
  }
  f.Finish();
  return f;
}

void ItemFilter::Finish() {
  count_ = allowed_.Count();
  items_.clear();
  if (Narrow()) {
    items_.reserve(static_cast<size_t>(count_));
    allowed_.AppendSet(&items_);
  }
}

}  // namespace rbmrec
