#ifndef RBMREC_CORE_MODEL_FILE_H_
#define RBMREC_CORE_MODEL_FILE_H_

// The model file: a versioned binary format.
//
//   offset 0   8 bytes  magic "RBMRECM\x1a"
//          8   u32      format version (kModelFormatVersion)
//         12   u32      reserved (0)
//         16   u64      payload length P
//         24   P bytes  payload (little-endian): rating scale, training
//                       options, training summary, user and item id maps,
//                       item rating histogram, then each ensemble member's
//                       dimensions (m, K, F) and W, b, c as float32, the
//                       item-based RBM (F = 0: absent) and its item inputs
//                       and mixing weight; since version 2 then the rated
//                       RBM's options (i32 hidden, i32 epochs, f32 lr),
//                       summary (i32 epochs, f64 valid NDCG, f64 seconds)
//                       and parameters (m, K = 1, F; F = 0: absent); since
//                       version 3 the U/I weight's two slopes (f32); since
//                       version 4 options.average (f32) and
//                       options.ordinal (u8); since version 5
//                       options.conditional (u8) and per member the
//                       conditional RBM's D (i32 rows: 0 = none, or m;
//                       then rows x F float32); since version 6
//                       options.item_regression (i32), item_lambda (f32),
//                       summary.item_regression_seconds (f64), the item
//                       regression's items (i32, 0 = none) and, if > 0,
//                       its lambda (f32), P (items x items float32), and
//                       X's rows: their number (i32), each one's length
//                       (i32) and their columns (i32); since version 7 P's
//                       lower triangle only, column by column (column j
//                       from row j down: items (items + 1) / 2 floats);
//                       since version 8 options.mf_factors, mf_epochs
//                       (i32), mf_lambda (f32), summary.mf_seconds (f64),
//                       the matrix factorisation's factors (i32, 0 = none)
//                       and, if > 0, its fold_epochs (i32), lambda,
//                       learning rate (f32), seed (u64), intercept,
//                       rbm_weight, mf_weight (f32), rows (i32), a trained
//                       flag per row (u8) and the item factors (rows x
//                       factors float32); since version 9 the model item
//                       of each of the item regression's columns (i32
//                       count: 0 without the regression or when column c
//                       is item c, else its items; then the items, i32,
//                       increasing)
//     24 + P   u64      FNV-1a 64 checksum of bytes [0, 24 + P)
//
// Loading fails with DataLoss for a wrong magic, truncation, trailing bytes,
// a checksum mismatch or inconsistent dimensions, and with
// FailedPrecondition for a format version newer than this build reads.
// Version 1 files (no rated RBM) load with options.rated_hidden = 0;
// version 1 and 2 files (one global U/I weight) with zero weight slopes;
// files before version 4 (trained without parameter averaging and ordinal
// sharing) with options.average = 0 and options.ordinal = false; files
// before version 5 as plain RBMs (D empty, options.conditional = false);
// files before version 6 without the item regression
// (options.item_regression = 0); files before version 8 without the
// matrix factorisation (options.mf_factors = 0); files before version 9
// with every item a column of the item regression.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/model.h"

namespace rbmrec {

inline constexpr uint32_t kModelFormatVersion = 9;

// Serialises a model to bytes. Thread-safe.
std::string SerializeModel(const Model& model);
// Parses bytes produced by SerializeModel (any format version <= current).
absl::StatusOr<Model> DeserializeModel(std::string_view bytes);

// The checks DeserializeModel makes before it parses: magic, format version,
// length and checksum (no allocation, ~1 GB/s). OK means the bytes are what
// SerializeModel wrote, unless they were forged with a valid checksum.
absl::Status VerifyModelBytes(std::string_view bytes);

// Writes atomically: a temporary file beside `path`, fsync, then rename.
absl::Status SaveModelFile(const Model& model, const std::string& path);
absl::StatusOr<Model> LoadModelFile(const std::string& path);

}  // namespace rbmrec

#endif  // RBMREC_CORE_MODEL_FILE_H_
