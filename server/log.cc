#include "server/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>

#include "absl/strings/str_format.h"

namespace rbmrec::server {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '=' || c == '"' || c == '\\' || c == '\n' ||
        c == '\t' || c == '\r') {
      return true;
    }
  }
  return false;
}

void AppendValue(std::string* line, std::string_view v) {
  if (!NeedsQuotes(v)) {
    line->append(v);
    return;
  }
  line->push_back('"');
  for (char c : v) {
    switch (c) {
      case '"':
        line->append("\\\"");
        break;
      case '\\':
        line->append("\\\\");
        break;
      case '\n':
        line->append("\\n");
        break;
      case '\r':
        line->append("\\r");
        break;
      case '\t':
        line->append("\\t");
        break;
      default:
        line->push_back(c);
    }
  }
  line->push_back('"');
}

}  // namespace

bool ParseLogLevel(std::string_view text, LogLevel* out) {
  if (text == "debug") {
    *out = LogLevel::kDebug;
  } else if (text == "info") {
    *out = LogLevel::kInfo;
  } else if (text == "warn" || text == "warning") {
    *out = LogLevel::kWarn;
  } else if (text == "error") {
    *out = LogLevel::kError;
  } else {
    return false;
  }
  return true;
}

void SetLogLevel(LogLevel level) {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void Log(LogLevel level, std::string_view event,
         std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      now.time_since_epoch())
                      .count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::string line = absl::StrFormat(
      "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=%s event=", tm.tm_year + 1900,
      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
      static_cast<int>(ms % 1000), LevelName(level));
  AppendValue(&line, event);
  for (const LogField& f : fields) {
    line.push_back(' ');
    line.append(f.first);
    line.push_back('=');
    AppendValue(&line, f.second);
  }
  line.push_back('\n');
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(2, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace rbmrec::server
