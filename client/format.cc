#include "client/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "core/utf8.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"

namespace rbmrec::client {
namespace {

std::string PadLeft(absl::string_view s, size_t width) {
  const size_t w = DisplayWidth(s);
  if (w >= width) return std::string(s);
  return std::string(width - w, ' ') + std::string(s);
}

}  // namespace

// ---------------------------------------------------------------------------
// Numbers and strings

std::string FormatCount(int64_t n) {
  // Work on the magnitude as unsigned so INT64_MIN is fine.
  const bool negative = n < 0;
  uint64_t magnitude =
      negative ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  std::string digits = std::to_string(magnitude);
  std::string out;
  const size_t len = digits.size();
  for (size_t i = 0; i < len; ++i) {
    if (i > 0 && (len - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return negative ? "-" + out : out;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  if (seconds < 9.95) return absl::StrFormat("%.1fs", seconds);
  const int64_t s = std::llround(seconds);
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  const int64_t m = (s + 30) / 60;
  return absl::StrFormat("%dh%02dm", m / 60, m % 60);
}

std::string FormatRating(double value) {
  std::string s = absl::StrFormat("%.3f", value);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", v, kUnits[unit]);
}

std::string FormatTimestampMs(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                          absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

size_t DisplayWidth(absl::string_view s) {
  size_t n = 0;
  for (char c : s) {
    // Count every byte that does not continue a UTF-8 sequence.
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string TerminalSafe(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) {
        absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
      } else if (c == '\\') {
        out += "\\\\";
      } else {
        out.push_back(static_cast<char>(c));
      }
      ++i;
      continue;
    }
    const std::string_view rest(s.data() + i, s.size() - i);
    const size_t n = Utf8SequenceLength(rest);
    if (n == 0) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
      ++i;
      continue;
    }
    const uint32_t cp = DecodeUtf8(rest, n);
    if ((cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) ||
        (cp >= 0x2066 && cp <= 0x2069)) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", cp));
    } else {
      out.append(s.data() + i, n);
    }
    i += n;
  }
  return out;
}

std::string Truncate(absl::string_view s, size_t width, bool unicode) {
  if (DisplayWidth(s) <= width) return std::string(s);
  const absl::string_view ellipsis = unicode ? "…" : "...";
  const size_t ellipsis_width = DisplayWidth(ellipsis);
  if (width <= ellipsis_width) return std::string(ellipsis.substr(0, width));
  const size_t keep = width - ellipsis_width;
  size_t cols = 0;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (cols == keep) break;
      ++cols;
    }
  }
  return absl::StrCat(s.substr(0, i), ellipsis);
}

// ---------------------------------------------------------------------------
// Bars and tables

std::string RenderBar(double fraction, int width, bool unicode) {
  if (width <= 0) return "";
  if (!(fraction > 0)) fraction = 0;  // also NaN
  fraction = std::min(fraction, 1.0);
  std::string out;
  int used = 0;
  if (unicode) {
    // U+2588 FULL BLOCK, then U+2589..U+258F for 7/8 .. 1/8.
    static constexpr const char* kPartial[] = {"",  "▏", "▎", "▍",
                                               "▌", "▋", "▊", "▉"};
    const int64_t eighths = std::llround(fraction * width * 8);
    const int full = static_cast<int>(eighths / 8);
    const int rest = static_cast<int>(eighths % 8);
    for (int i = 0; i < full; ++i) out += "█";
    used = full;
    if (rest > 0) {
      out += kPartial[rest];
      ++used;
    }
  } else {
    used = static_cast<int>(std::lround(fraction * width));
    out.append(static_cast<size_t>(used), '#');
  }
  out.append(static_cast<size_t>(width - used), ' ');
  return out;
}

std::string FormatTable(const Table& table) {
  const size_t columns = table.header.size();
  std::vector<size_t> widths(columns, 0);
  auto measure = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < columns && c < cells.size(); ++c) {
      widths[c] = std::max(widths[c], DisplayWidth(cells[c]));
    }
  };
  measure(table.header);
  for (const auto& row : table.rows) measure(row);

  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const Align align =
          c < table.align.size() ? table.align[c] : Align::kLeft;
      if (c > 0) line += "  ";
      const size_t pad = widths[c] - DisplayWidth(cell);
      if (align == Align::kRight) line.append(pad, ' ');
      line += cell;
      if (align == Align::kLeft) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  emit(table.header);
  for (const auto& row : table.rows) emit(row);
  return out;
}

// ---------------------------------------------------------------------------
// Command outputs

std::string FormatDistribution(const v1::RatingScale& scale,
                               const v1::ItemPrediction& prediction,
                               const TextStyle& style) {
  std::string out = TerminalSafe(prediction.item_id());
  if (!prediction.title().empty()) {
    absl::StrAppend(
        &out, "  ",
        Truncate(TerminalSafe(prediction.title()),
                 static_cast<size_t>(style.max_title_width), style.unicode));
  }
  absl::StrAppend(&out, "  expected ",
                  absl::StrFormat("%.2f", prediction.expected_rating()));
  if (prediction.fallback()) {
    absl::StrAppend(&out, "  (fallback: item unknown to the model)");
  }
  out += '\n';

  std::vector<std::string> labels;
  for (int k = 0; k < prediction.probabilities_size(); ++k) {
    labels.push_back(k < scale.values_size() ? FormatRating(scale.values(k))
                                             : absl::StrCat("#", k + 1));
  }
  size_t label_width = 0;
  for (const auto& l : labels) label_width = std::max(label_width, l.size());
  for (int k = 0; k < prediction.probabilities_size(); ++k) {
    const double p = prediction.probabilities(k);
    absl::StrAppend(&out, "    ",
                    PadLeft(labels[static_cast<size_t>(k)], label_width), "  ",
                    RenderBar(p, style.bar_width, style.unicode), "  ",
                    PadLeft(absl::StrFormat("%.1f%%", 100.0 * p), 6), "\n");
  }
  return out;
}

std::string FormatPredictions(const v1::PredictRatingsResponse& response,
                              absl::string_view user, v1::Method method,
                              const TextStyle& style) {
  std::string out = user.empty() ? std::string("anonymous user")
                                 : absl::StrCat("user ", TerminalSafe(user));
  absl::StrAppend(&out, "  model v", response.model_version(), "  ",
                  method == v1::MEAN_FIELD ? "mean-field" : "exact");
  if (response.folded_in()) absl::StrAppend(&out, "  (folded in)");
  out += '\n';
  for (const auto& prediction : response.predictions()) {
    out += '\n';
    out += FormatDistribution(response.scale(), prediction, style);
  }
  return out;
}

std::string FormatSimilar(const v1::SimilarItemsResponse& response,
                          const TextStyle& style) {
  Table table;
  table.header = {"rank", "item", "title", "score"};
  table.align = {Align::kRight, Align::kLeft, Align::kLeft, Align::kRight};
  for (const auto& s : response.items()) {
    table.rows.push_back(
        {absl::StrCat(s.rank()), TerminalSafe(s.item_id()),
         Truncate(TerminalSafe(s.title()),
                  static_cast<size_t>(style.max_title_width), style.unicode),
         absl::StrFormat("%.3f", s.score())});
  }
  std::string out = absl::StrCat("model v", response.model_version(), "\n");
  if (response.items().empty()) return out + "no similar items\n";
  return out + FormatTable(table);
}

std::string FormatRecommendations(const v1::RecommendResponse& response,
                                  const v1::RecommendRequest& request,
                                  const TextStyle& style) {
  // The ranking the server used (older servers do not say: the request's).
  const v1::RankBy by = response.rank_by() != v1::RANK_BY_UNSPECIFIED
                            ? response.rank_by()
                            : request.rank_by();
  const double threshold =
      response.threshold() != 0 ? response.threshold() : request.threshold();
  const bool by_probability = by == v1::PROBABILITY_AT_LEAST ||
                              by == v1::PROBABILITY_RATED_AT_LEAST ||
                              by == v1::ITEM_REGRESSION_AT_LEAST;
  const bool by_rated =
      by == v1::PROBABILITY_RATED || by == v1::PROBABILITY_RATED_AT_LEAST;
  const bool by_regression = by == v1::ITEM_REGRESSION_AT_LEAST;
  Table table;
  table.header = {"rank", "item", "title", "expected"};
  table.align = {Align::kRight, Align::kLeft, Align::kLeft, Align::kRight};
  if (by_probability) {
    table.header.push_back(absl::StrCat("P(>=", FormatRating(threshold), ")"));
    table.align.push_back(Align::kRight);
  }
  if (by_rated) {
    table.header.push_back("P(rated)");
    table.align.push_back(Align::kRight);
  }
  if (by_regression) {
    table.header.push_back("regression");
    table.align.push_back(Align::kRight);
  }
  for (const auto& r : response.recommendations()) {
    std::vector<std::string> row = {
        absl::StrCat(r.rank()), TerminalSafe(r.item_id()),
        Truncate(TerminalSafe(r.title()),
                 static_cast<size_t>(style.max_title_width), style.unicode),
        absl::StrFormat("%.2f", r.expected_rating())};
    if (by_probability) {
      row.push_back(
          absl::StrFormat("%.1f%%", 100.0 * r.probability_at_least()));
    }
    if (by_rated) {
      row.push_back(absl::StrFormat("%.1f%%", 100.0 * r.probability_rated()));
    }
    if (by_regression) {
      row.push_back(absl::StrFormat("%.3f", r.item_regression_score()));
    }
    table.rows.push_back(std::move(row));
  }
  std::string out = absl::StrCat("model v", response.model_version());
  // Older servers do not count the candidates (0).
  if (response.candidates() > 0) {
    absl::StrAppend(&out, ", ", response.candidates(), " candidates");
  }
  out += "\n";
  if (response.fallback() == v1::FALLBACK_EMPTY_USER) {
    out +=
        "cold start: the user has no ratings; the fallback for users "
        "without ratings (the model's answer for an empty user)\n";
  } else if (response.fallback() == v1::FALLBACK_POPULAR) {
    out +=
        "cold start: the user has no ratings; the fallback for users "
        "without ratings (the most-rated items)\n";
  }
  if (response.recommendations().empty()) {
    out += response.candidates() > 0
               ? "no recommendations on this page (offset past the "
                 "candidates)\n"
               : "no recommendations (no unrated item passes the filters)\n";
    return out;
  }
  return out + FormatTable(table);
}

std::string FormatModels(const v1::ListModelsResponse& response) {
  if (response.models().empty()) {
    return "no models yet (run 'rbmrec train')\n";
  }
  Table table;
  table.header = {"",      "version", "created",    "kind",   "pinned", "users",
                  "items", "ratings", "valid RMSE", "epochs", "size"};
  table.align = {Align::kLeft,  Align::kRight, Align::kLeft,  Align::kLeft,
                 Align::kLeft,  Align::kRight, Align::kRight, Align::kRight,
                 Align::kRight, Align::kRight, Align::kRight};
  for (const auto& m : response.models()) {
    table.rows.push_back(
        {m.active() ? "*" : "", absl::StrCat("v", m.version()),
         FormatTimestampMs(m.created_unix_ms()), TerminalSafe(m.kind()),
         m.pinned() ? "pinned" : "", FormatCount(m.n_users()),
         FormatCount(m.n_items()), FormatCount(m.n_ratings()),
         m.validation_rmse() > 0 ? absl::StrFormat("%.4f", m.validation_rmse())
                                 : "-",
         absl::StrCat(m.epochs()), FormatBytes(m.size_bytes())});
    if (!m.corrupt().empty()) {
      table.rows.back()[4] = m.pinned() ? "pinned CORRUPT" : "CORRUPT";
    }
  }
  std::string out = FormatTable(table);
  for (const auto& m : response.models()) {
    if (m.corrupt().empty()) continue;
    absl::StrAppend(&out, "v", m.version(),
                    " is CORRUPT: ", TerminalSafe(m.corrupt()),
                    " (it cannot serve; 'rbmrec models delete ", m.version(),
                    "' removes it)\n");
  }
  return out;
}

std::string FormatDeleteUser(const std::string& user,
                             const v1::DeleteUserResponse& response) {
  std::string out =
      absl::StrCat("deleted ", FormatCount(response.deleted_ratings()),
                   " ratings of user ", TerminalSafe(user), "\n");
  if (response.erased_from_served_model() ||
      response.model_versions_rewritten() > 0) {
    absl::StrAppend(
        &out, "erased the user from ",
        response.erased_from_served_model() ? "the served model and " : "",
        response.model_versions_rewritten(), " stored model version",
        response.model_versions_rewritten() == 1 ? "" : "s",
        " (per-user weights and their part of the item inputs)\n");
  }
  if (response.retrain_started()) {
    absl::StrAppend(&out,
                    "a full training started: the weights shared by all "
                    "users will no longer carry the user\n");
  } else if (response.erasures_since_training() > 0) {
    absl::StrAppend(&out, "the weights shared by all users carry ",
                    FormatCount(response.erasures_since_training()),
                    " erased user",
                    response.erasures_since_training() == 1 ? "" : "s",
                    " until the next training ('rbmrec train')\n");
  }
  return out;
}

std::string FormatModelInfo(const v1::ModelInfo& m) {
  std::string out = absl::StrCat(
      "model v", m.version(), m.active() ? " (active)" : "",
      m.pinned() ? " (pinned)" : "", ": ", TerminalSafe(m.kind()), ", created ",
      FormatTimestampMs(m.created_unix_ms()), ", ", FormatCount(m.n_users()),
      " users, ", FormatCount(m.n_items()), " items, ",
      FormatCount(m.n_ratings()), " ratings");
  if (m.validation_rmse() > 0) {
    absl::StrAppend(&out,
                    absl::StrFormat(", valid RMSE %.4f", m.validation_rmse()));
  }
  return out + "\n";
}

std::string FormatStats(const v1::GetStatsResponse& stats) {
  std::string training = "idle";
  if (stats.training().running()) {
    training = absl::StrCat("running, epoch ", stats.training().epoch(), "/",
                            stats.training().max_epochs(), ", ",
                            FormatDuration(stats.training().elapsed_seconds()));
  }
  Table table;
  table.header = {"users", FormatCount(stats.users())};
  table.align = {Align::kLeft, Align::kLeft};
  table.rows = {
      {"items", FormatCount(stats.items())},
      {"ratings", FormatCount(stats.ratings())},
      {"active model", stats.active_model_version() > 0
                           ? absl::StrCat("v", stats.active_model_version())
                           : "none"},
      {"training", training},
      {"online updates", FormatCount(stats.online_updates())},
      {"model versions", FormatCount(stats.model_versions())},
  };
  if (stats.views() > 0) {  // interactions without a rating, when any
    table.rows.insert(table.rows.begin() + 2,
                      {"views", FormatCount(stats.views())});
  }
  if (stats.database_file_bytes() > 0) {
    // The file and the WAL apart: the server's --db-max-mb limits the
    // database's pages only, not the write-ahead log next to it.
    std::string file = FormatBytes(stats.database_file_bytes());
    if (stats.database_max_bytes() > 0) {
      absl::StrAppend(
          &file, " of ", FormatBytes(stats.database_max_bytes()),
          absl::StrFormat(" (%.0f%% of the --db-max-mb limit)",
                          100.0 *
                              static_cast<double>(stats.database_file_bytes()) /
                              static_cast<double>(stats.database_max_bytes())));
    }
    table.rows.push_back({"database file", file});
    table.rows.push_back(
        {"database WAL",
         absl::StrCat(FormatBytes(stats.wal_bytes()),
                      stats.database_max_bytes() > 0
                          ? " (write-ahead log; not counted against the limit)"
                          : " (write-ahead log)")});
  } else {
    // A server that sends only the total (file and WAL), or none.
    table.rows.push_back(
        {"database size", stats.database_bytes() > 0
                              ? FormatBytes(stats.database_bytes())
                              : "unknown"});
  }
  if (!stats.leader_address().empty()) {
    // Replicas on one PostgreSQL database (a SQLite server, or a server
    // older than replicas, sends no address).
    const std::string leader = TerminalSafe(stats.leader_address());
    table.rows.push_back(
        {"replica", stats.leader() ? absl::StrCat("leader (", leader, ")")
                                   : absl::StrCat("follower of ", leader)});
  }
  if (!stats.model_load_error().empty()) {
    table.rows.push_back(
        {"model error", TerminalSafe(stats.model_load_error())});
  }
  return FormatTable(table);
}

absl::string_view TrainStateName(v1::TrainProgress::State state) {
  switch (state) {
    case v1::TrainProgress::QUEUED:
      return "QUEUED";
    case v1::TrainProgress::RUNNING:
      return "RUNNING";
    case v1::TrainProgress::SUCCEEDED:
      return "SUCCEEDED";
    case v1::TrainProgress::CANCELLED:
      return "CANCELLED";
    case v1::TrainProgress::FAILED:
      return "FAILED";
    default:
      return "STATE_UNSPECIFIED";
  }
}

namespace {
constexpr const char* kEpochRowFormat = "%-13s %9s  %10s  %10s  %8s  %8s\n";
}  // namespace

std::string EpochTableHeader() {
  return absl::StrFormat(kEpochRowFormat, "rbm", "epoch", "train RMSE",
                         "valid RMSE", "elapsed", "ETA");
}

std::string FormatEpochRow(const v1::TrainProgress& p) {
  const std::string epoch = absl::StrCat(p.epoch(), "/", p.max_epochs());
  std::string valid = p.validation_rmse() > 0
                          ? absl::StrFormat("%.4f", p.validation_rmse())
                          : "-";
  if (p.validation_ndcg() > 0) {
    valid = absl::StrFormat("nDCG %.3f", p.validation_ndcg());
  }
  const std::string eta =
      p.eta_seconds() > 0 ? FormatDuration(p.eta_seconds()) : "-";
  return absl::StrFormat(kEpochRowFormat, TerminalSafe(p.rbm()), epoch,
                         absl::StrFormat("%.4f", p.train_rmse()), valid,
                         FormatDuration(p.elapsed_seconds()), eta);
}

std::string FormatTrainResult(const v1::TrainProgress& last) {
  std::string out;
  if (last.state() == v1::TrainProgress::SUCCEEDED) {
    out = absl::StrCat("published model v", last.model_version(), " after ",
                       last.epoch(), " epochs (all RBMs) in ",
                       FormatDuration(last.elapsed_seconds()));
    if (last.validation_rmse() > 0) {
      absl::StrAppend(&out, absl::StrFormat(", validation RMSE %.4f",
                                            last.validation_rmse()));
    }
    absl::StrAppend(&out, last.activated() ? "; now active"
                                           : "; NOT activated (the previous "
                                             "active model stays)");
  } else {
    out = absl::StrCat("training ",
                       absl::AsciiStrToLower(TrainStateName(last.state())),
                       " after ", last.epoch(), " epochs");
  }
  if (!last.message().empty()) {
    absl::StrAppend(&out, ": ", TerminalSafe(last.message()));
  }
  return out + "\n";
}

std::string FormatImportProgress(const ImportProgress& p) {
  std::string out = absl::StrCat("sent ", FormatCount(p.rows_sent));
  if (p.rows_total > 0) {
    absl::StrAppend(&out, "/", FormatCount(p.rows_total), " rows (",
                    100 * p.rows_sent / p.rows_total, "%)");
  } else {
    absl::StrAppend(&out, " rows");
  }
  if (p.done_sending) {
    absl::StrAppend(&out, ", waiting for the server to commit");
    return out;
  }
  const double rate = p.elapsed_seconds > 0
                          ? static_cast<double>(p.rows_sent) / p.elapsed_seconds
                          : 0;
  if (rate > 0) {
    absl::StrAppend(&out, "  ", FormatCount(std::llround(rate)), " rows/s");
    if (p.rows_total > 0) {
      const double eta = static_cast<double>(p.rows_total - p.rows_sent) / rate;
      absl::StrAppend(&out, "  ETA ", FormatDuration(eta));
    }
  }
  return out;
}

void EvalMetrics::Add(double predicted, double actual, bool fallback) {
  const double e = predicted - actual;
  ++n;
  if (fallback) ++n_fallback;
  sum_squared_error += e * e;
  sum_absolute_error += std::abs(e);
}

double EvalMetrics::rmse() const {
  return n > 0 ? std::sqrt(sum_squared_error / static_cast<double>(n)) : 0.0;
}

double EvalMetrics::mae() const {
  return n > 0 ? sum_absolute_error / static_cast<double>(n) : 0.0;
}

std::string FormatEvalMetrics(const EvalMetrics& m) {
  Table table;
  table.header = {"RMSE", absl::StrFormat("%.4f", m.rmse())};
  table.align = {Align::kLeft, Align::kLeft};
  table.rows = {
      {"MAE", absl::StrFormat("%.4f", m.mae())},
      {"n", FormatCount(m.n)},
      {"n_fallback", FormatCount(m.n_fallback)},
      {"users", FormatCount(m.users)},
      {"model", absl::StrCat("v", m.model_version)},
  };
  if (m.n_skipped > 0) {
    std::string skipped = FormatCount(m.n_skipped);
    if (m.n_off_scale > 0) {
      absl::StrAppend(&skipped, " (", FormatCount(m.n_off_scale),
                      " off the rating scale)");
    }
    table.rows.insert(table.rows.begin() + 3, {"n_skipped", skipped});
  }
  return FormatTable(table);
}

// ---------------------------------------------------------------------------
// JSON

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

bool Is64BitInteger(const FieldDescriptor* field) {
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT64:
      return true;
    default:
      return false;
  }
}

// Copies compact JSON printed by protobuf for a message of a known type,
// writing the values of 64-bit integer fields (quoted by the proto3 JSON
// mapping) as numbers. Follows the message's descriptor through nested
// messages, repeated fields and maps; values of unknown keys are copied
// unchanged. The input is well-formed (protobuf printed it); reading past
// its end yields '\0', which ends every loop.
class Int64Unquoter {
 public:
  explicit Int64Unquoter(absl::string_view in) : in_(in) {}

  std::string Run(const Descriptor* type) {
    if (Peek() == '{') Object(type);
    out_.append(in_.data() + pos_, in_.size() - pos_);
    return std::move(out_);
  }

 private:
  char Peek() const { return pos_ < in_.size() ? in_[pos_] : '\0'; }
  void Copy() {
    if (pos_ < in_.size()) out_.push_back(in_[pos_++]);
  }

  // Skips a string token starting at '"'; returns its text with quotes.
  absl::string_view StringToken() {
    const size_t start = pos_++;
    while (pos_ < in_.size() && in_[pos_] != '"') {
      pos_ += in_[pos_] == '\\' ? 2 : 1;
    }
    pos_ = std::min(pos_ + 1, in_.size());
    return in_.substr(start, pos_ - start);
  }

  // One value of `field` (null: untyped); `element`: inside its array.
  void Value(const FieldDescriptor* field, bool element) {
    const char c = Peek();
    if (c == '{') {
      if (field != nullptr && field->is_map() && !element) {
        Map(field->message_type()->map_value());
      } else {
        Object(field != nullptr &&
                       field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE
                   ? field->message_type()
                   : nullptr);
      }
    } else if (c == '[') {
      Copy();
      while (Peek() != ']' && Peek() != '\0') {
        if (Peek() == ',') Copy();
        Value(field, true);
      }
      Copy();
    } else if (c == '"') {
      const absl::string_view token = StringToken();
      const absl::string_view inner = token.substr(1, token.size() - 2);
      int64_t i64;
      uint64_t u64;
      const bool integer =
          token.size() >= 2 &&
          (absl::SimpleAtoi(inner, &i64) || absl::SimpleAtoi(inner, &u64)) &&
          inner.find_first_not_of("-0123456789") == absl::string_view::npos;
      if (field != nullptr && Is64BitInteger(field) && integer) {
        absl::StrAppend(&out_, inner);
      } else {
        absl::StrAppend(&out_, token);
      }
    } else {  // number, true, false, null
      while (Peek() != ',' && Peek() != '}' && Peek() != ']' &&
             Peek() != '\0') {
        Copy();
      }
    }
  }

  void Object(const Descriptor* type) {
    Copy();  // '{'
    while (Peek() != '}' && Peek() != '\0') {
      if (Peek() == ',') Copy();
      const absl::string_view key = StringToken();
      absl::StrAppend(&out_, key);
      Copy();  // ':'
      const FieldDescriptor* field =
          type == nullptr ? nullptr
                          : type->FindFieldByName(
                                std::string(key.substr(1, key.size() - 2)));
      Value(field, false);
    }
    Copy();  // '}'
  }

  // A map field's object: every value is of `value_field`.
  void Map(const FieldDescriptor* value_field) {
    Copy();  // '{'
    while (Peek() != '}' && Peek() != '\0') {
      if (Peek() == ',') Copy();
      absl::StrAppend(&out_, StringToken());
      Copy();  // ':'
      Value(value_field, false);
    }
    Copy();  // '}'
  }

  absl::string_view in_;
  size_t pos_ = 0;
  std::string out_;
};

}  // namespace

Json JsonNumber(double value) {
  if (!std::isfinite(value)) return Json(nullptr);
  return Json(value);
}

Json ProtoJson(const google::protobuf::Message& message) {
  return Json::parse(ProtoToJson(message));
}

std::string DumpJson(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string ProtoToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    // Only a string field with invalid UTF-8 can fail, which protobuf never
    // parses off the wire; say so rather than print a partial object.
    return DumpJson(
        Json{{"error", absl::StrCat("cannot print ", message.GetTypeName(),
                                    " as JSON: ", status.ToString())}});
  }
  return Int64Unquoter(json).Run(message.GetDescriptor());
}

}  // namespace rbmrec::client
