#ifndef RBMREC_SERVER_LOG_H_
#define RBMREC_SERVER_LOG_H_

// Structured log lines on stderr, one line per event:
//   2024-05-01T12:00:00.123Z level=info event=train_done version=3 rmse=0.91
// Values containing spaces, '=' or quotes are double-quoted with escapes.
// Thread-safe: each line is written with a single write().

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rbmrec::server {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Parses "debug", "info", "warn"/"warning", "error"; false when unknown.
bool ParseLogLevel(std::string_view text, LogLevel* out);
// Lines below `level` are dropped. Default kInfo. Thread-safe.
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

using LogField = std::pair<std::string_view, std::string>;

// Writes one line: time, level, event=EVENT, then the fields in order.
void Log(LogLevel level, std::string_view event,
         std::initializer_list<LogField> fields = {});

// A field from any value absl::StrCat accepts.
template <typename T>
LogField F(std::string_view key, const T& value) {
  return LogField(key, absl::StrCat(value));
}

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_LOG_H_
