#include "core/model_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/fnv.h"

namespace rbmrec {
namespace {

constexpr char kMagic[8] = {'R', 'B', 'M', 'R', 'E', 'C', 'M', '\x1a'};
constexpr size_t kHeaderSize = 24;

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void PutFloats(const float* p, size_t n) {
    if (n == 0) return;  // p may be null (an empty matrix)
    out_.append(reinterpret_cast<const char*>(p), n * sizeof(float));
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* s) {
    uint32_t n;
    if (!Get(&n) || in_.size() - pos_ < n) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool GetFloats(float* p, size_t n) {
    if (n == 0) return true;  // p may be null (an empty matrix)
    if ((in_.size() - pos_) / sizeof(float) < n) return false;
    std::memcpy(p, in_.data() + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
    return true;
  }
  bool done() const { return pos_ == in_.size(); }
  size_t remaining() const { return in_.size() - pos_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

void PutOptions(Writer* w, const TrainOptions& o) {
  w->Put<int32_t>(o.hidden);
  w->Put<int32_t>(o.max_epochs);
  w->Put<int32_t>(o.batch_size);
  w->Put<float>(o.learning_rate);
  w->Put<float>(o.lr_decay);
  w->Put<float>(o.momentum);
  w->Put<float>(o.weight_decay);
  w->Put<float>(o.init_std);
  w->PutString(o.cd.ToString());
  w->Put<uint8_t>(o.per_item_normalize ? 1 : 0);
  w->Put<double>(o.validation_fraction);
  w->Put<int32_t>(o.patience);
  w->Put<uint64_t>(o.seed);
  w->Put<int32_t>(o.threads);
  w->Put<int32_t>(static_cast<int32_t>(o.predict));
  w->Put<int32_t>(o.ensemble);
  w->Put<uint8_t>(o.item_based ? 1 : 0);
}

bool GetOptions(Reader* r, TrainOptions* o) {
  std::string cd;
  uint8_t norm, item_based;
  int32_t predict;
  if (!(r->Get(&o->hidden) && r->Get(&o->max_epochs) &&
        r->Get(&o->batch_size) && r->Get(&o->learning_rate) &&
        r->Get(&o->lr_decay) && r->Get(&o->momentum) &&
        r->Get(&o->weight_decay) && r->Get(&o->init_std) && r->GetString(&cd) &&
        r->Get(&norm) && r->Get(&o->validation_fraction) &&
        r->Get(&o->patience) && r->Get(&o->seed) && r->Get(&o->threads) &&
        r->Get(&predict) && r->Get(&o->ensemble) && r->Get(&item_based))) {
    return false;
  }
  auto sched = CdSchedule::Parse(cd);
  if (!sched.ok() || predict < 0 || predict > 1) return false;
  o->cd = *sched;
  o->per_item_normalize = norm != 0;
  o->item_based = item_based != 0;
  o->predict = static_cast<PredictMethod>(predict);
  return true;
}

void PutIds(Writer* w, const IdMap& ids) {
  w->Put<uint32_t>(static_cast<uint32_t>(ids.size()));
  for (const std::string& s : ids.names()) w->PutString(s);
}

bool GetIds(Reader* r, IdMap* ids) {
  uint32_t n;
  if (!r->Get(&n)) return false;
  std::string s;
  for (uint32_t i = 0; i < n; ++i) {
    if (!r->GetString(&s)) return false;
    if (ids->GetOrAdd(s) != static_cast<int32_t>(i)) return false;  // dup
  }
  return true;
}

void PutParams(Writer* w, const RbmParams& p) {
  w->Put<int32_t>(p.num_items);
  w->Put<int32_t>(p.K);
  w->Put<int32_t>(p.F);
  if (p.F == 0) return;
  w->PutFloats(p.W.data(), static_cast<size_t>(p.W.size()));
  w->PutFloats(p.b.data(), static_cast<size_t>(p.b.size()));
  w->PutFloats(p.c.data(), static_cast<size_t>(p.c.size()));
}

// Reads parameters whose visible units must number `m` with K values.
// F = 0 (absent) only when allow_empty.
bool GetParams(Reader* r, int32_t m, int32_t K, bool allow_empty,
               RbmParams* p) {
  int32_t nm, k, f;
  if (!(r->Get(&nm) && r->Get(&k) && r->Get(&f))) return false;
  if (f == 0 && allow_empty) return true;
  if (nm != m || k != K || f < 1 || f > 100000) return false;
  p->Resize(nm, k, f);
  return r->GetFloats(p->W.data(), static_cast<size_t>(p->W.size())) &&
         r->GetFloats(p->b.data(), static_cast<size_t>(p->b.size())) &&
         r->GetFloats(p->c.data(), static_cast<size_t>(p->c.size())) &&
         p->W.allFinite() && p->b.allFinite() && p->c.allFinite();
}

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("model file is corrupt: ", what));
}

// Version 5's part: the conditional option and each member's D (none
// before: plain RBMs).
absl::Status GetConditional(Reader* r, ModelParams* m) {
  uint8_t conditional;
  if (!r->Get(&conditional) || conditional > 1) {
    return Corrupt("bad training options (conditional)");
  }
  m->options.conditional = conditional != 0;
  for (RbmParams& p : m->members) {
    int32_t rows;
    if (!r->Get(&rows) || (rows != 0 && rows != p.num_items)) {
      return Corrupt("bad conditional RBM weights (D) shape");
    }
    p.D.setZero(rows, rows == 0 ? 0 : p.F);
    if (!r->GetFloats(p.D.data(), static_cast<size_t>(p.D.size())) ||
        !p.D.allFinite()) {
      return Corrupt("bad conditional RBM weights (D)");
    }
  }
  return absl::OkStatus();
}

// Version 6: the item regression's options and fit seconds, then its items
// (0 = none) and, when > 0, lambda and P (items x items float32; since
// version 7 only its lower triangle, column by column: P is symmetric),
// then X's rows over its columns (their items: PutItemColumns).
void PutItemRegression(Writer* w, const ModelParams& m) {
  w->Put<int32_t>(m.options.item_regression);
  w->Put<float>(m.options.item_lambda);
  w->Put<double>(m.summary.item_regression_seconds);
  const ItemRegression* r = m.item_regression.get();
  const int32_t items = r != nullptr ? r->items : 0;
  w->Put<int32_t>(items);
  if (items > 0) {
    w->Put<float>(r->lambda);
    const size_t n = static_cast<size_t>(items);
    for (size_t j = 0; j < n; ++j) {
      w->PutFloats(r->inverse.data() + j * n + j, n - j);
    }
    // X's rows: their number, each row's length, then the items.
    const size_t rows = r->row_offsets.size() - 1;
    w->Put<int32_t>(static_cast<int32_t>(rows));
    for (size_t u = 0; u < rows; ++u) {
      w->Put<int32_t>(
          static_cast<int32_t>(r->row_offsets[u + 1] - r->row_offsets[u]));
    }
    for (const int32_t i : r->row_items) w->Put<int32_t>(i);
  }
}

// Version 9: the model item of each of the item regression's columns:
// their number (0: no regression, or column c is item c; else its items),
// then the items, increasing.
void PutItemColumns(Writer* w, const ModelParams& m) {
  const ItemRegression* r = m.item_regression.get();
  const int32_t n = r != nullptr ? static_cast<int32_t>(r->item_of.size()) : 0;
  w->Put<int32_t>(n);
  if (n > 0) {
    for (const int32_t i : r->item_of) w->Put<int32_t>(i);
  }
}

absl::Status GetItemColumns(Reader* r, ItemRegression* reg,
                            const ModelParams& m) {
  int32_t n;
  if (!r->Get(&n) || n < 0 || (n > 0 && (reg == nullptr || n != reg->items))) {
    return Corrupt("bad item regression columns");
  }
  if (n == 0) return absl::OkStatus();
  reg->item_of.resize(static_cast<size_t>(n));
  for (int32_t c = 0; c < n; ++c) {
    int32_t& i = reg->item_of[static_cast<size_t>(c)];
    if (!r->Get(&i) || i < 0 || i >= m.items.size() ||
        (c > 0 && i <= reg->item_of[static_cast<size_t>(c) - 1])) {
      return Corrupt("bad item regression columns");
    }
  }
  return absl::OkStatus();
}

// Into *out (the model takes it once the file's columns are read).
absl::Status GetItemRegression(Reader* r, uint32_t version, ModelParams* m,
                               std::shared_ptr<ItemRegression>* out) {
  if (!(r->Get(&m->options.item_regression) &&
        m->options.item_regression >= -1 && m->options.item_regression <= 1 &&
        r->Get(&m->options.item_lambda) &&
        std::isfinite(m->options.item_lambda) && m->options.item_lambda >= 0 &&
        r->Get(&m->summary.item_regression_seconds))) {
    return Corrupt("bad item regression options");
  }
  int32_t items;
  if (!r->Get(&items) || items < 0 || items > m->items.size()) {
    return Corrupt("bad item regression size");
  }
  if (items == 0) return absl::OkStatus();
  auto reg = std::make_shared<ItemRegression>();
  reg->items = items;
  const size_t side = static_cast<size_t>(items);
  const bool lower = version >= 7;  // one triangle, or all of P
  const size_t stored = lower ? side * (side + 1) / 2 : side * side;
  // Checked before the allocation: the file must hold every float.
  if (!r->Get(&reg->lambda) ||
      !(std::isfinite(reg->lambda) && reg->lambda > 0) ||
      r->remaining() / sizeof(float) < stored) {
    return Corrupt("bad item regression");
  }
  reg->inverse.resize(side * side);
  if (lower) {
    for (size_t j = 0; j < side; ++j) {
      if (!r->GetFloats(reg->inverse.data() + j * side + j, side - j)) {
        return Corrupt("bad item regression");
      }
    }
    MirrorLowerTriangle(reg->inverse.data(), items);
  } else if (!r->GetFloats(reg->inverse.data(), stored)) {
    return Corrupt("bad item regression");
  }
  for (int32_t i = 0; i < items; ++i) {  // B divides by P's diagonal
    const float d = reg->inverse[static_cast<size_t>(i) * items + i];
    if (!(std::isfinite(d) && d > 0)) return Corrupt("bad item regression");
  }
  for (const float x : reg->inverse) {
    if (!std::isfinite(x)) return Corrupt("bad item regression");
  }
  int32_t rows;
  if (!r->Get(&rows) || rows < 0 || rows > m->users.size() ||
      r->remaining() / sizeof(int32_t) < static_cast<size_t>(rows)) {
    return Corrupt("bad item regression rows");
  }
  reg->row_offsets.assign(static_cast<size_t>(rows) + 1, 0);
  for (int32_t u = 0; u < rows; ++u) {
    int32_t len;
    if (!r->Get(&len) || len < 0 || len > items) {
      return Corrupt("bad item regression rows");
    }
    reg->row_offsets[static_cast<size_t>(u) + 1] =
        reg->row_offsets[static_cast<size_t>(u)] + len;
  }
  const size_t nnz = static_cast<size_t>(reg->row_offsets.back());
  if (r->remaining() / sizeof(int32_t) < nnz) {
    return Corrupt("bad item regression rows");
  }
  reg->row_items.resize(nnz);
  for (int32_t& i : reg->row_items) {
    if (!r->Get(&i) || i < 0 || i >= items) {
      return Corrupt("bad item regression rows");
    }
  }
  RefreshItemRegressionScoring(reg.get());
  *out = std::move(reg);
  return absl::OkStatus();
}

// Version 8: the matrix factorisation's options and fit seconds, then its
// factors (0 = none) and, when > 0, the fold-in settings, the blend and
// the item factors (rows, a trained flag per row, rows x factors float32).
// Older files load without it.
void PutMf(Writer* w, const ModelParams& m) {
  w->Put<int32_t>(m.options.mf_factors);
  w->Put<int32_t>(m.options.mf_epochs);
  w->Put<float>(m.options.mf_lambda);
  w->Put<double>(m.summary.mf_seconds);
  const MfParams& mf = m.mf;
  const int32_t factors = mf.empty() ? 0 : mf.factors;
  w->Put<int32_t>(factors);
  if (factors == 0) return;
  w->Put<int32_t>(mf.fold_epochs);
  w->Put<float>(mf.lambda);
  w->Put<float>(mf.learning_rate);
  w->Put<uint64_t>(mf.seed);
  w->Put<float>(mf.intercept);
  w->Put<float>(mf.rbm_weight);
  w->Put<float>(mf.mf_weight);
  w->Put<int32_t>(static_cast<int32_t>(mf.q.rows()));
  for (const uint8_t t : mf.trained) w->Put<uint8_t>(t);
  w->PutFloats(mf.q.data(), static_cast<size_t>(mf.q.size()));
}

absl::Status GetMf(Reader* r, uint32_t version, ModelParams* m) {
  TrainOptions& o = m->options;
  if (version < 8) {
    o.mf_factors = 0;  // trained before it existed
    return absl::OkStatus();
  }
  if (!(r->Get(&o.mf_factors) && o.mf_factors >= 0 &&
        o.mf_factors <= kMaxMfFactors && r->Get(&o.mf_epochs) &&
        o.mf_epochs >= 1 && o.mf_epochs <= kMaxMfEpochs &&
        r->Get(&o.mf_lambda) && std::isfinite(o.mf_lambda) &&
        o.mf_lambda >= 0 && r->Get(&m->summary.mf_seconds))) {
    return Corrupt("bad matrix factorisation options");
  }
  MfParams mf;
  if (!r->Get(&mf.factors) || mf.factors < 0 || mf.factors > kMaxMfFactors) {
    return Corrupt("bad matrix factorisation size");
  }
  if (mf.factors == 0) return absl::OkStatus();
  int32_t rows;
  if (!(r->Get(&mf.fold_epochs) && mf.fold_epochs >= 0 &&
        mf.fold_epochs <= kMaxMfFoldEpochs && r->Get(&mf.lambda) &&
        std::isfinite(mf.lambda) && mf.lambda >= 0 &&
        r->Get(&mf.learning_rate) && std::isfinite(mf.learning_rate) &&
        mf.learning_rate > 0 && r->Get(&mf.seed) && r->Get(&mf.intercept) &&
        std::isfinite(mf.intercept) && r->Get(&mf.rbm_weight) &&
        std::isfinite(mf.rbm_weight) && r->Get(&mf.mf_weight) &&
        std::isfinite(mf.mf_weight))) {
    return Corrupt("bad matrix factorisation");
  }
  // Checked before the allocation: the file must hold every byte.
  if (!r->Get(&rows) || rows < 1 || rows > m->items.size() ||
      r->remaining() / (sizeof(float) * static_cast<size_t>(mf.factors) + 1) <
          static_cast<size_t>(rows)) {
    return Corrupt("bad matrix factorisation rows");
  }
  mf.trained.resize(static_cast<size_t>(rows));
  for (uint8_t& t : mf.trained) {
    if (!r->Get(&t) || t > 1) return Corrupt("bad matrix factorisation rows");
  }
  mf.q.resize(rows, mf.factors);
  if (!r->GetFloats(mf.q.data(), static_cast<size_t>(mf.q.size())) ||
      !mf.q.allFinite()) {
    return Corrupt("bad matrix factorisation factors");
  }
  m->mf = std::move(mf);
  return absl::OkStatus();
}

// An upper bound on SerializeModel's size within a few hundred bytes: the
// bulk is the parameters, the ids and the histogram.
size_t SerializedSizeBound(const ModelParams& m) {
  auto params = [](const RbmParams& p) {
    return 16 + sizeof(float) * static_cast<size_t>(p.W.size() + p.b.size() +
                                                    p.c.size() + p.D.size());
  };
  auto ids = [](const IdMap& map) {
    size_t n = 4;
    for (const std::string& s : map.names()) n += 4 + s.size();
    return n;
  };
  size_t n = 1024 + m.options.cd.ToString().size() + ids(m.users) +
             ids(m.items) + sizeof(uint32_t) * m.item_hist.size() +
             params(m.item_rbm) + params(m.rated_rbm) +
             sizeof(float) * static_cast<size_t>(m.item_x.size()) +
             m.item_in_irbm.size();
  for (const RbmParams& p : m.members) n += params(p);
  n += m.mf.trained.size() + sizeof(float) * static_cast<size_t>(m.mf.q.size());
  if (m.item_regression != nullptr) {
    const size_t side = static_cast<size_t>(m.item_regression->items);
    n += sizeof(float) * side * (side + 1) / 2 +
         sizeof(int32_t) * (m.item_regression->row_offsets.size() +
                            m.item_regression->row_items.size() +
                            m.item_regression->item_of.size());
  }
  return n;
}

}  // namespace

std::string SerializeModel(const Model& model) {
  const ModelParams& m = model.params();
  // One buffer, sized up front: the header with a length to fill in, the
  // payload, the checksum. (Building the payload apart and copying it, in a
  // string that grew by doubling, peaked at ~3x the file's size: 318 MB
  // instead of 235 MB for `rbmrec-eval --save-model` at MovieLens 1M.)
  Writer file;
  file.str().reserve(SerializedSizeBound(m));
  file.str().append(kMagic, sizeof(kMagic));
  file.Put<uint32_t>(kModelFormatVersion);
  file.Put<uint32_t>(0);
  file.Put<uint64_t>(0);  // the payload's length, filled in below
  file.Put<double>(m.scale.min());
  file.Put<double>(m.scale.max());
  file.Put<double>(m.scale.step());
  PutOptions(&file, m.options);
  file.Put<int32_t>(m.summary.epochs_run);
  file.Put<int32_t>(m.summary.best_epoch);
  file.Put<double>(m.summary.valid_rmse);
  file.Put<int64_t>(m.summary.train_ratings);
  file.Put<double>(m.summary.train_seconds);
  file.Put<int64_t>(m.summary.rating_epochs);
  PutIds(&file, m.users);
  PutIds(&file, m.items);
  file.Put<uint64_t>(m.item_hist.size());
  for (uint32_t c : m.item_hist) file.Put<uint32_t>(c);
  file.Put<uint32_t>(static_cast<uint32_t>(m.members.size()));
  for (const RbmParams& p : m.members) PutParams(&file, p);
  // The item-based part: F = 0 marks its absence.
  PutParams(&file, m.item_rbm);
  if (m.item_rbm.F > 0) {
    file.PutFloats(m.item_x.data(), static_cast<size_t>(m.item_x.size()));
    for (uint8_t f : m.item_in_irbm) file.Put<uint8_t>(f);
    file.Put<float>(m.user_weight);
  }
  // Version 2: the rated RBM.
  file.Put<int32_t>(m.options.rated_hidden);
  file.Put<int32_t>(m.options.rated_max_epochs);
  file.Put<float>(m.options.rated_learning_rate);
  file.Put<int32_t>(m.summary.rated_epochs);
  file.Put<double>(m.summary.rated_valid_ndcg);
  file.Put<double>(m.summary.rated_seconds);
  PutParams(&file, m.rated_rbm);
  // Version 3: the U/I weight's slopes.
  file.Put<float>(m.user_weight_per_log_user);
  file.Put<float>(m.user_weight_per_log_item);
  // Version 4: parameter averaging and ordinal sharing.
  file.Put<float>(m.options.average);
  file.Put<uint8_t>(m.options.ordinal ? 1 : 0);
  // Version 5: the conditional RBM (each member's D: its rows, 0 or the
  // number of items, then the floats).
  file.Put<uint8_t>(m.options.conditional ? 1 : 0);
  for (const RbmParams& p : m.members) {
    file.Put<int32_t>(static_cast<int32_t>(p.D.rows()));
    file.PutFloats(p.D.data(), static_cast<size_t>(p.D.size()));
  }
  PutItemRegression(&file, m);
  PutMf(&file, m);
  PutItemColumns(&file, m);
  std::string& out = file.str();
  const uint64_t length = out.size() - kHeaderSize;
  std::memcpy(out.data() + kHeaderSize - sizeof(length), &length,
              sizeof(length));
  file.Put<uint64_t>(Fnv1a64(out.data(), out.size()));
  return std::move(out);
}

namespace {

// The header and checksum checks of DeserializeModel; the payload's length
// and the format version in *length_out and *version_out.
absl::Status CheckFrame(std::string_view bytes, uint64_t* length_out,
                        uint32_t* version_out) {
  if (bytes.size() < sizeof(kMagic) ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Corrupt("not an rbmrec model (bad magic)");
  }
  Reader header(bytes.substr(0, std::min(bytes.size(), kHeaderSize)));
  uint64_t magic;
  uint32_t version = 0, reserved;
  uint64_t length = 0;
  if (!(header.Get(&magic) && header.Get(&version) && header.Get(&reserved) &&
        header.Get(&length))) {
    return Corrupt("truncated header");
  }
  if (version > kModelFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("model file format version ", version,
                     " is newer than this build reads (", kModelFormatVersion,
                     "); upgrade rbmrec"));
  }
  if (version == 0) return Corrupt("format version 0");
  if (bytes.size() - kHeaderSize < sizeof(uint64_t) ||
      length > bytes.size() - kHeaderSize - sizeof(uint64_t)) {
    return Corrupt(absl::StrCat("truncated: ", bytes.size(),
                                " bytes, header says ",
                                length + kHeaderSize + sizeof(uint64_t)));
  }
  if (length != bytes.size() - kHeaderSize - sizeof(uint64_t)) {
    return Corrupt("trailing bytes after the checksum");
  }
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + kHeaderSize + length, sizeof(stored));
  if (stored != Fnv1a64(bytes.data(), kHeaderSize + length)) {
    return Corrupt("checksum mismatch");
  }
  *length_out = length;
  *version_out = version;
  return absl::OkStatus();
}

// The sections after the conditional RBM: the item regression (version 6),
// the matrix factorisation (version 8) and the regression's columns
// (version 9).
absl::Status GetRegressionAndMf(Reader* r, uint32_t version, ModelParams* m) {
  std::shared_ptr<ItemRegression> reg;
  if (version >= 6) {
    if (absl::Status s = GetItemRegression(r, version, m, &reg); !s.ok()) {
      return s;
    }
  } else {
    m->options.item_regression = 0;  // trained before it existed
  }
  if (absl::Status s = GetMf(r, version, m); !s.ok()) return s;
  if (version >= 9) {
    if (absl::Status s = GetItemColumns(r, reg.get(), *m); !s.ok()) return s;
  }
  m->item_regression = std::move(reg);
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyModelBytes(std::string_view bytes) {
  uint64_t length = 0;
  uint32_t version = 0;
  return CheckFrame(bytes, &length, &version);
}

absl::StatusOr<Model> DeserializeModel(std::string_view bytes) {
  uint64_t length = 0;
  uint32_t version = 0;
  if (absl::Status s = CheckFrame(bytes, &length, &version); !s.ok()) {
    return s;
  }
  // Versions 1 and 2 differ only by the rated RBM at the end (see below).
  Reader r(bytes.substr(kHeaderSize, length));
  ModelParams m;
  double smin, smax, sstep;
  if (!(r.Get(&smin) && r.Get(&smax) && r.Get(&sstep))) {
    return Corrupt("truncated scale");
  }
  auto scale = RatingScale::Create(smin, smax, sstep);
  if (!scale.ok()) return Corrupt(scale.status().message());
  m.scale = *scale;
  if (!GetOptions(&r, &m.options)) return Corrupt("bad training options");
  if (!(r.Get(&m.summary.epochs_run) && r.Get(&m.summary.best_epoch) &&
        r.Get(&m.summary.valid_rmse) && r.Get(&m.summary.train_ratings) &&
        r.Get(&m.summary.train_seconds) && r.Get(&m.summary.rating_epochs))) {
    return Corrupt("bad training summary");
  }
  if (!GetIds(&r, &m.users)) return Corrupt("bad user id map");
  if (!GetIds(&r, &m.items)) return Corrupt("bad item id map");
  uint64_t hist_n;
  if (!r.Get(&hist_n) ||
      hist_n != static_cast<uint64_t>(m.items.size()) * m.scale.K()) {
    return Corrupt("item histogram size does not match items x K");
  }
  m.item_hist.resize(hist_n);
  for (uint32_t& c : m.item_hist) {
    if (!r.Get(&c)) return Corrupt("truncated item histogram");
  }
  uint32_t members;
  if (!r.Get(&members) || members > 1000) return Corrupt("bad member count");
  m.members.resize(members);
  for (RbmParams& p : m.members) {
    if (!GetParams(&r, m.items.size(), m.scale.K(), false, &p)) {
      return Corrupt("bad user-based RBM parameters");
    }
  }
  if (!GetParams(&r, m.users.size(), m.scale.K(), true, &m.item_rbm)) {
    return Corrupt("bad item-based RBM parameters");
  }
  if (m.item_rbm.F > 0) {
    m.item_x.resize(m.items.size(), m.item_rbm.F);
    m.item_in_irbm.resize(static_cast<size_t>(m.items.size()));
    if (!r.GetFloats(m.item_x.data(), static_cast<size_t>(m.item_x.size())) ||
        !m.item_x.allFinite()) {
      return Corrupt("bad item-based RBM inputs");
    }
    for (uint8_t& f : m.item_in_irbm) {
      if (!r.Get(&f) || f > 1) return Corrupt("bad item-based RBM flags");
    }
    // Before version 3 the weight itself; since, the intercept of a weight
    // clamped to [0, 1] (core/model.h).
    const bool weight_ok =
        r.Get(&m.user_weight) &&
        (version >= 3
             ? std::isfinite(m.user_weight) && std::abs(m.user_weight) <= 10
             : m.user_weight >= 0 && m.user_weight <= 1);
    if (!weight_ok) return Corrupt("bad user weight");
  }
  if (version >= 2) {
    if (!(r.Get(&m.options.rated_hidden) &&
          r.Get(&m.options.rated_max_epochs) &&
          r.Get(&m.options.rated_learning_rate) &&
          r.Get(&m.summary.rated_epochs) &&
          r.Get(&m.summary.rated_valid_ndcg) &&
          r.Get(&m.summary.rated_seconds))) {
      return Corrupt("bad rated RBM options");
    }
    if (!GetParams(&r, m.items.size(), 1, true, &m.rated_rbm)) {
      return Corrupt("bad rated RBM parameters");
    }
  } else {
    m.options.rated_hidden = 0;  // version 1: no rated RBM
  }
  if (version >= 3) {
    auto slope_ok = [](float x) {
      return std::isfinite(x) && std::abs(x) <= 10;
    };
    if (!(r.Get(&m.user_weight_per_log_user) &&
          r.Get(&m.user_weight_per_log_item) &&
          slope_ok(m.user_weight_per_log_user) &&
          slope_ok(m.user_weight_per_log_item))) {
      return Corrupt("bad user weight slopes");
    }
  }
  if (version >= 4) {
    uint8_t ordinal;
    if (!r.Get(&m.options.average) ||
        !(m.options.average >= 0 && m.options.average < 1)) {
      return Corrupt("bad training options (average)");
    }
    if (!r.Get(&ordinal) || ordinal > 1) {
      return Corrupt("bad training options (ordinal)");
    }
    m.options.ordinal = ordinal != 0;
  } else {
    m.options.average = 0;  // trained before parameter averaging
    m.options.ordinal = false;
  }
  if (version >= 5) {
    if (absl::Status s = GetConditional(&r, &m); !s.ok()) return s;
  }
  if (absl::Status s = GetRegressionAndMf(&r, version, &m); !s.ok()) return s;
  if (!r.done()) return Corrupt("unexpected bytes at the end of the payload");
  return Model(std::move(m));
}

absl::Status SaveModelFile(const Model& model, const std::string& path) {
  const std::string bytes = SerializeModel(model);
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::UnavailableError(absl::StrCat("write ", tmp, ": ", err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("fsync ", tmp, " failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("rename to ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Model> LoadModelFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open model file ", path,
                                            ": ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  auto m = DeserializeModel(ss.str());
  if (!m.ok()) {
    return absl::Status(m.status().code(),
                        absl::StrCat(path, ": ", m.status().message()));
  }
  return m;
}

}  // namespace rbmrec
