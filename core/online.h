#ifndef RBMREC_CORE_ONLINE_H_
#define RBMREC_CORE_ONLINE_H_

// Online learning on a live model: new items and per-user CD updates.
// These mutate a Model; callers serving predictions must apply them to a
// private copy and publish it as a new immutable snapshot.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"

namespace rbmrec {

struct OnlineOptions {
  float learning_rate = 0.01f;  // step size of each per-user CD update
  int steps = 1;                // CD-1 updates per changed user
  uint64_t seed = 1;
};

// Adds the ids in `item_ids` that the model does not know yet, each with
// fresh parameters in every member (W rows ~ N(0, init_std^2) from a stream
// derived from `seed` and the item id, uniform visible biases), an empty
// histogram and, in the rated RBM, zero weights and the bias
// NewItemRatedBias(model, 0). Returns the number added. Not thread-safe on
// `model`.
int AddItems(Model* model, const std::vector<std::string>& item_ids,
             uint64_t seed);

// The rated RBM's visible bias of an item with no weights and `ratings`
// ratings: logit((ratings + 0.5) / (training users + 1)), at most
// logit(0.99).
float NewItemRatedBias(const Model& model, int64_t ratings);

// Applies options.steps CD-1 updates for one user's ratings `v` (model item
// indices) to every member, touching only the rated items' rows and c.
// It does not change the item histogram: callers record new ratings with
// AdjustHistogram (an item becomes Trained() once it has one).
// Deterministic for the same inputs, seed and user_key. Not thread-safe on
// `model`.
void OnlineUserUpdate(Model* model, const VisibleSet& v,
                      const OnlineOptions& options, uint64_t user_key);

// Adds `delta` (+1 a new rating, -1 a removed one) to item i's count for
// rating index k, clamped at 0. For an item added by AddItems (its rated
// RBM weights all zero) it also sets the rated RBM's bias to
// NewItemRatedBias of the item's ratings, so that its p(rated) grows as it
// is rated until the next full training. REQUIRES 0 <= i < num_items(), 0 <= k
// < K.
void AdjustHistogram(Model* model, int32_t item, int k, int delta);

// Keeps the item-based RBM's input of `item` in step with its ratings:
// item_x(item) = c_I + sum of W_I[u, k_u] over the training users u who
// rated it, so a rating by model user `user` (rating index k) adds (delta
// +1) or removes (-1) one weight row, and the item's item_hT column is
// refreshed. An item without I-RBM inputs yet gets c_I + the row on its
// first rating. No-op without an I-RBM or for a user the I-RBM does not
// know (user < 0 or not a training user). REQUIRES 0 <= item < num_items(),
// 0 <= k < K. Not thread-safe on `model`.
void AdjustItemInput(Model* model, int32_t user, int32_t item, int k,
                     int delta);

// Erases the training user `user_id` from the model's per-user state: its
// weights and biases in the item-based RBM (its visible unit) are zeroed,
// its contribution to the item inputs (one W_I row per rating in `ratings`,
// the user's ratings in model item indices, as AdjustItemInput -1) is
// removed, and its id becomes the tombstone ErasedUserId(index), which no
// request can name (it holds a control character), so users().Find(user_id)
// is -1 and the model answers the id as a user it never saw. The item
// regression (when the model has one) is refitted without the user's
// training row exactly (RemoveUserFromItemRegression), or dropped when that
// fails. The weights
// shared by every user (the user-based RBMs, the rated RBM, c_I) still
// carry what training learnt from the user until the next training.
// Returns false, changing nothing, when the model does not know `user_id`.
// Not thread-safe on `model`.
bool EraseUser(Model* model, std::string_view user_id,
               const VisibleSet& ratings);

// The id an erased user's index gets: "\x1f" "erased:" and the index.
std::string ErasedUserId(int32_t index);

// True when `a` and `b` have the same ids and parameter shapes, so that they
// can differ only in parameter values (see CopyItemState).
bool SameShape(const Model& a, const Model& b);

// Copies from `src` into `dst` everything the online functions above change
// for the items in `items` (model indices): each member's W rows and b
// entries of the item, the rated RBM's W row and b entry, the item's histogram,
// I-RBM input row (item_x), item_hT column and item_in_irbm flag, and every
// member's hidden biases c. If `dst` equalled `src` except for changes that
// OnlineUserUpdate / AdjustHistogram / AdjustItemInput made to these items (on
// either side), `dst` equals `src` afterwards: the cost is proportional to the
// items, not to the model. REQUIRES SameShape(src, *dst) and every index in
// range. Not thread-safe on `dst`.
void CopyItemState(const Model& src, const std::vector<int32_t>& items,
                   Model* dst);

}  // namespace rbmrec

#endif  // RBMREC_CORE_ONLINE_H_
