#ifndef RBMREC_STORE_STATUS_MACROS_H_
#define RBMREC_STORE_STATUS_MACROS_H_

// absl::Status plumbing for the store's .cc files (Abseil 20220623 has no
// RETURN_IF_ERROR / ASSIGN_OR_RETURN). Private to store/: include it only
// from .cc files.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns the status of `expr` from the calling function unless it is OK.
#define RBMREC_STORE_RETURN_IF_ERROR(expr)           \
  do {                                               \
    absl::Status rbmrec_status_ = (expr);            \
    if (!rbmrec_status_.ok()) return rbmrec_status_; \
  } while (0)

#define RBMREC_STORE_CONCAT_INNER(a, b) a##b
#define RBMREC_STORE_CONCAT(a, b) RBMREC_STORE_CONCAT_INNER(a, b)

// Evaluates `expr` (an absl::StatusOr<T>), returns its status from the
// calling function on error, else assigns (moves) its value to `lhs`, which
// may be a declaration.
#define RBMREC_STORE_ASSIGN_OR_RETURN(lhs, expr) \
  RBMREC_STORE_ASSIGN_OR_RETURN_IMPL(            \
      RBMREC_STORE_CONCAT(rbmrec_statusor_, __LINE__), lhs, expr)
#define RBMREC_STORE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                       \
  if (!tmp.ok()) return std::move(tmp).status();           \
  lhs = std::move(tmp).value()

#endif  // RBMREC_STORE_STATUS_MACROS_H_
