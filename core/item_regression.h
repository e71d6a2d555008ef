// The item-item regression (EASE, Steck, WWW 2019): a closed-form linear
// model over the binary "rated" matrix X (users x items) that scores how
// likely a user is to rate each item from the items they rated,
//
//   B = argmin ||X - X B||^2 + lambda ||B||^2  subject to diag(B) = 0,
//   P = (X'X + lambda I)^-1,  B_ji = -P_ji / P_ii  (j != i),
//
// and a user's score of item i is sum over their rated items j of B_ji.
// It is the ranking's p(rated) estimate that the top-N protocol's anchor
// (../shared/tools/peer-ease.py) uses; the rating model's p(rating >= t)
// multiplies it as it multiplies the rated RBM's p(rated) (docs/model.md,
// "Rankings").
//
// Its weights are dense, items x items floats, and its fit inverts an
// items x items matrix (~items^3 / 2 multiply-adds), so it is built over
// every item only when that matrix is small against the data, else over
// the most-rated items that fit in 64 MiB (ItemRegressionColumns): its
// columns. Items outside them score 0.

#ifndef RBMREC_CORE_ITEM_REGRESSION_H_
#define RBMREC_CORE_ITEM_REGRESSION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ratings.h"

namespace rbmrec {

struct ItemRegressionOptions {
  // The ridge penalty; 0: ItemRegressionLambda's rule.
  double lambda = 0;
  // Threads for X'X and the factorization's split products; 0: all
  // cores. The result does not depend on it.
  int threads = 0;
  // The regression's columns: 0 or at least the items, every item; fewer,
  // the `columns` items with the most ratings (ties: the lower index).
  int64_t columns = 0;
};

struct ItemRegression {
  // Its columns (the side of P and B); 0: not built. P, B, b8 and row_items
  // index columns, not the model's items: column c is item item_of[c].
  int32_t items = 0;
  float lambda = 0;  // the penalty it was fitted with
  // The model item of each column, increasing; empty: column c is item c
  // (every item of the data it was fitted on).
  std::vector<int32_t> item_of;
  // P = (X'X + lambda I)^-1, items x items, symmetric: B_ji = -P_ji / P_ii
  // (j != i). Kept instead of B because a user's row can be taken out of
  // X exactly (RemoveFromItemRegression), and B is P up to a scale per
  // column.
  std::vector<float> inverse;
  // B in 8 bits, what ItemRegressionScores sums (a quarter of the bytes P's
  // floats would stream per call): B_ji ~ b8[j * items + i] * b8_scale[i],
  // each column i scaled so its largest |B_ji| is 127 (b8[i * items + i] =
  // 0). RefreshItemRegressionScoring keeps them in step with P.
  std::vector<int8_t> b8;
  std::vector<float> b8_scale;
  // X's rows: training user u rated the columns row_items[row_offsets[u],
  // row_offsets[u + 1]) (sorted), so that a user's row can be taken out
  // exactly whatever they rated since (RemoveUserFromItemRegression).
  std::vector<int64_t> row_offsets{0};
  std::vector<int32_t> row_items;

  bool empty() const { return items == 0; }
  // The model item of column c.
  int32_t ItemOf(int32_t c) const {
    return item_of.empty() ? c : item_of[static_cast<size_t>(c)];
  }
  // The column of model item i, or -1 when the regression has none.
  int32_t ColumnOf(int32_t i) const;
};

// The rule for lambda: 40 x sqrt(the mean number of ratings of a rated
// item), so the penalty grows with the counts in X'X that it shrinks
// (ML-100k ~290, ML-1M ~620; peer-ease.py's default is 1000).
double ItemRegressionLambda(const SparseRatings& by_user);

// Bytes of a fitted model's P for `items` items (B's 8-bit form adds a
// quarter of this; the fit holds ~1.25x this at its peak, P computed in
// X'X's place).
int64_t ItemRegressionBytes(int64_t items);

// The size rule, as the number of columns: every item when P takes at
// most 64 MiB or 16 bytes a training rating, whichever is more (ML-1M's
// 3,706 items: 55 MB); else the most-rated items whose P fits in 64 MiB,
// 4,096 (ml-latest-small's 9,379 items, 352 MB for all; the 10,000 items
// of 10 M ratings, 400 MB). 0 without items.
int64_t ItemRegressionColumns(int64_t items, int64_t ratings);

// Fits on `by_user` (rows users, cols items; every entry counts as rated,
// whatever its rating) restricted to the columns options.columns picks,
// as a fit on only those items' entries would be (lambda by the rule of
// ItemRegressionLambda on them). Deterministic: the same weights at any
// thread count. InvalidArgument for a negative or non-finite options.lambda, or
// for no ratings at all; Internal if the factorization fails (it cannot for
// lambda > 0: X'X + lambda I is then positive definite).
absl::StatusOr<ItemRegression> FitItemRegression(
    const SparseRatings& by_user, const ItemRegressionOptions& options);

// out[i] = sum over the n `rated` model items j (j != i) of B_ji, for
// every model item i with a column (ItemOf), from B's 8-bit form (each term
// within half a step, 1/254 of its column's largest |B_ji|, of its float
// value; the sums are exact integers, the same in any order); the other
// entries of out are left as they are (callers start from zeros). REQUIRES
// the rated items distinct and out to hold ItemOf(reg.items - 1) + 1
// entries; rated items without a column are skipped.
void ItemRegressionScores(const ItemRegression& reg, const int32_t* rated,
                          int64_t n, float* out);

// Copies the lower triangle of the n x n column-major matrix at p onto its
// upper one (P is kept exactly symmetric; the model file stores one half).
void MirrorLowerTriangle(float* p, int64_t n);

// Sets reg->b8 and b8_scale from reg->inverse.
// FitItemRegression, RemoveFromItemRegression and the model file's reader
// call it.
void RefreshItemRegressionScoring(ItemRegression* reg);

// Takes one user's row (their n rated columns, distinct, in [0,
// reg->items)) out of X, as if the regression had been fitted without it: P
// becomes (X'X - x x' + lambda I)^-1 by the Sherman-Morrison formula, P + (P
// x)(P x)' / (1 - x' P x), ~items^2 multiply-adds. Returns false, changing
// nothing, when 1 - x' P x is not positive (it is for a row that was in
// X: X'X - x x' + lambda I stays positive definite), i.e. the row was not
// in X.
bool RemoveFromItemRegression(ItemRegression* reg, const int32_t* rated,
                              int64_t n);

// RemoveFromItemRegression of training user `user`'s row (row_items), which
// is then emptied (a second call changes nothing; a user after the rows,
// added after the fit, was never in X: nothing to do). Returns false,
// changing nothing, for a negative user or when the update fails.
bool RemoveUserFromItemRegression(ItemRegression* reg, int32_t user);

}  // namespace rbmrec

#endif  // RBMREC_CORE_ITEM_REGRESSION_H_
