#include "store/change_feed.h"

#include <cstdint>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rbmrec::store {
namespace {

// Payload: "c1" then the origin, then per record its kind character and
// four fields (user, item, rating, previous; unused ones empty). A field is
// "<decimal length>:<bytes>", so ids may hold any byte.
constexpr std::string_view kMagic = "c1";

void AppendField(std::string& out, std::string_view s) {
  absl::StrAppend(&out, s.size(), ":");
  out.append(s.data(), s.size());
}

std::string Number(double v) { return absl::StrFormat("%.17g", v); }

std::string EncodeRecord(const ChangeRecord& r) {
  std::string out(1, static_cast<char>(r.kind));
  AppendField(out, r.user);
  AppendField(out, r.item);
  AppendField(out, r.kind == ChangeRecord::Kind::kUpsert ||
                           r.kind == ChangeRecord::Kind::kDelete
                       ? Number(r.rating)
                       : std::string());
  AppendField(out, r.previous.has_value() ? Number(*r.previous) : "");
  return out;
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool done() const { return pos_ == s_.size(); }
  size_t pos() const { return pos_; }
  bool Char(char* c) {
    if (pos_ >= s_.size()) return false;
    *c = s_[pos_++];
    return true;
  }
  bool Field(std::string_view* out) {
    size_t len = 0;
    size_t digits = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (++digits > 7) return false;  // far beyond any payload
      len = len * 10 + static_cast<size_t>(s_[pos_++] - '0');
    }
    if (digits == 0 || pos_ >= s_.size() || s_[pos_] != ':') return false;
    ++pos_;
    if (len > s_.size() - pos_) return false;
    *out = s_.substr(pos_, len);
    pos_ += len;
    return true;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

absl::Status Malformed(const Reader& r, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "malformed change payload at byte %d: %s", r.pos(), what));
}

bool ParseNumber(std::string_view s, double* v) {
  return absl::SimpleAtod(absl::string_view(s.data(), s.size()), v);
}

}  // namespace

std::vector<std::string> EncodeChanges(std::string_view origin,
                                       const std::vector<ChangeRecord>& records,
                                       size_t max_bytes) {
  std::string head(kMagic);
  AppendField(head, origin);
  std::vector<std::string> out;
  std::string cur = head;
  for (const ChangeRecord& r : records) {
    std::string rec = EncodeRecord(r);
    if (cur.size() > head.size() && cur.size() + rec.size() > max_bytes) {
      out.push_back(std::move(cur));
      cur = head;
    }
    cur += rec;
  }
  if (cur.size() > head.size()) out.push_back(std::move(cur));
  return out;
}

absl::StatusOr<DecodedChanges> DecodeChanges(std::string_view payload) {
  if (payload.substr(0, kMagic.size()) != kMagic) {
    return absl::InvalidArgumentError(
        "malformed change payload at byte 0: unknown format");
  }
  Reader r(payload.substr(kMagic.size()));
  DecodedChanges out;
  std::string_view origin;
  if (!r.Field(&origin)) return Malformed(r, "origin");
  out.origin = std::string(origin);
  while (!r.done()) {
    char kind = 0;
    r.Char(&kind);
    ChangeRecord rec;
    switch (kind) {
      case 'U':
      case 'D':
      case 'X':
      case 'I':
      case 'V':
        rec.kind = static_cast<ChangeRecord::Kind>(kind);
        break;
      default:
        return Malformed(r, "unknown record kind");
    }
    std::string_view user, item, rating, previous;
    if (!r.Field(&user) || !r.Field(&item) || !r.Field(&rating) ||
        !r.Field(&previous)) {
      return Malformed(r, "truncated record");
    }
    rec.user = std::string(user);
    rec.item = std::string(item);
    const bool has_user = rec.kind != ChangeRecord::Kind::kItem;
    const bool has_item = rec.kind != ChangeRecord::Kind::kUserDeleted;
    const bool has_rating = rec.kind == ChangeRecord::Kind::kUpsert ||
                            rec.kind == ChangeRecord::Kind::kDelete;
    if (rec.user.empty() == has_user || rec.item.empty() == has_item) {
      return Malformed(r, "missing or unexpected id");
    }
    if (has_rating != !rating.empty() ||
        (!rating.empty() && !ParseNumber(rating, &rec.rating))) {
      return Malformed(r, "bad rating");
    }
    if (!previous.empty()) {
      double p = 0;
      if (rec.kind != ChangeRecord::Kind::kUpsert ||
          !ParseNumber(previous, &p)) {
        return Malformed(r, "bad previous rating");
      }
      rec.previous = p;
    }
    out.records.push_back(std::move(rec));
  }
  return out;
}

}  // namespace rbmrec::store
