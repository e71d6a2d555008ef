// The readers' shared text handling, declared in core/read_text.h.

#include "core/read_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/utf8.h"

namespace rbmrec {
namespace read_text {

std::string_view StripBom(std::string_view text) {
  if (absl::StartsWith(AV(text), "\xEF\xBB\xBF")) text.remove_prefix(3);
  return text;
}

bool IsBlank(std::string_view line) { return TrimBlanks(line).empty(); }

std::string Quote(std::string_view v) {
  if (v.size() <= kMaxQuotedBytes) return absl::StrCat("'", AV(v), "'");
  return absl::StrCat("'", AV(v.substr(0, kMaxQuotedBytes)), "...'");
}

void SplitChar(std::string_view line, char sep,
               std::vector<std::string_view>* fields) {
  fields->clear();
  while (true) {
    const size_t at = line.find(sep);
    fields->push_back(TrimBlanks(line.substr(0, at)));
    if (at == std::string_view::npos) return;
    line.remove_prefix(at + 1);
  }
}

bool CsvQuoteOpenAfter(std::string_view line, bool in_quotes) {
  size_t i = 0;
  while (true) {
    if (in_quotes) {
      const size_t quote = line.find('"', i);
      if (quote == std::string_view::npos) return true;
      if (quote + 1 < line.size() && line[quote + 1] == '"') {
        i = quote + 2;  // "" inside quotes
        continue;
      }
      in_quotes = false;
      i = quote + 1;
    } else {
      while (i < line.size() && IsBlankChar(line[i])) ++i;
      if (i < line.size() && line[i] == '"') {
        in_quotes = true;
        ++i;
        continue;
      }
    }
    const size_t comma = line.find(',', i);
    if (comma == std::string_view::npos) return false;
    i = comma + 1;
  }
}

bool SplitCsvLine(std::string_view line, std::vector<std::string>* owned,
                  std::vector<std::string_view>* fields, std::string* reason) {
  if (line.find('"') == std::string_view::npos) {
    SplitChar(line, ',', fields);
    return true;
  }
  owned->clear();
  size_t i = 0;
  while (true) {
    std::string& field = owned->emplace_back();
    while (i < line.size() && IsBlankChar(line[i])) ++i;
    if (i < line.size() && line[i] == '"') {
      const size_t field_number = owned->size();
      ++i;
      while (true) {
        const size_t quote = line.find('"', i);
        if (quote == std::string_view::npos) {
          *reason = absl::StrCat("field ", field_number,
                                 ": quoted field has no closing quote");
          return false;
        }
        field.append(line.data() + i, quote - i);
        i = quote + 1;
        if (i < line.size() && line[i] == '"') {  // "" inside quotes
          field.push_back('"');
          ++i;
          continue;
        }
        break;
      }
      while (i < line.size() && IsBlankChar(line[i])) ++i;
      if (i < line.size() && line[i] != ',') {
        *reason = absl::StrCat("field ", field_number,
                               ": unexpected character after closing quote");
        return false;
      }
    } else {
      const size_t comma = line.find(',', i);
      const std::string_view raw = line.substr(
          i,
          comma == std::string_view::npos ? std::string_view::npos : comma - i);
      if (raw.find('"') != std::string_view::npos) {
        *reason = absl::StrCat("field ", owned->size(),
                               ": quote inside an unquoted field");
        return false;
      }
      const std::string_view trimmed = TrimBlanks(raw);
      field.assign(trimmed.data(), trimmed.size());
      i = comma == std::string_view::npos ? line.size() : comma;
    }
    if (i >= line.size()) break;
    ++i;  // the ','
  }
  fields->clear();
  for (const std::string& f : *owned) fields->emplace_back(f);
  return true;
}

void SplitDoubleColon(std::string_view line,
                      std::vector<std::string_view>* fields) {
  fields->clear();
  while (true) {
    const size_t at = line.find("::");
    fields->push_back(TrimBlanks(line.substr(0, at)));
    if (at == std::string_view::npos) return;
    line.remove_prefix(at + 2);
  }
}

void SplitWhitespace(std::string_view line,
                     std::vector<std::string_view>* fields) {
  fields->clear();
  size_t i = 0;
  while (true) {
    while (i < line.size() && IsBlankChar(line[i])) ++i;
    if (i == line.size()) return;
    const size_t start = i;
    while (i < line.size() && !IsBlankChar(line[i])) ++i;
    fields->push_back(line.substr(start, i - start));
  }
}

bool StrtodReadsAll(std::string_view s, double* value) {
  if (s.empty()) return false;
  const std::string copy(s);
  char* end = nullptr;
  *value = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size();
}

bool IsNumber(std::string_view s) {
  double unused;
  return StrtodReadsAll(s, &unused);
}

std::string InvalidUtf8Reason(std::string_view line, size_t line_offset,
                              int64_t line_number) {
  const size_t at = FirstInvalidUtf8(line);
  return absl::StrFormat(
      "invalid UTF-8: byte 0x%02X at %scolumn %d (file offset %d); convert "
      "the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)",
      static_cast<unsigned char>(line[at]),
      line_number > 0 ? absl::StrCat("line ", line_number, " ") : "", at + 1,
      line_offset + at);
}

std::string ToUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out.push_back(ch);
    } else {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

bool CheckId(std::string_view id, std::string_view what, std::string* reason) {
  if (id.empty()) {
    *reason = absl::StrCat("empty ", AV(what), " id");
    return false;
  }
  if (id.size() > kMaxIdBytes) {
    *reason = absl::StrCat(AV(what), " id longer than ", kMaxIdBytes, " bytes");
    return false;
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    if (c == '\n') {  // from a quoted CSV field that spans lines
      *reason = absl::StrFormat("%s id contains a line break at byte %d",
                                AV(what), i + 1);
      return false;
    }
    if (c < 0x20 || c == 0x7F) {
      *reason = absl::StrFormat(
          "%s id contains the control character 0x%02X at byte %d", AV(what), c,
          i + 1);
      return false;
    }
  }
  if (!IsValidUtf8(id)) {
    *reason = absl::StrCat(AV(what), " id is not valid UTF-8");
    return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return absl::Status(absl::ErrnoToStatusCode(e),
                        absl::StrCat("cannot open ", path, ": ",
                                     std::generic_category().message(e)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  std::string data;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    // One spare byte so that the read seeing end-of-file needs no growth.
    data.resize(static_cast<size_t>(st.st_size) + 1);
  }
  size_t used = 0;
  while (true) {
    if (used == data.size()) {
      // Unknown size or the file grew: make room for more.
      data.resize(std::max<size_t>(data.size() * 2, 1 << 16));
    }
    const ssize_t got = ::read(fd, data.data() + used, data.size() - used);
    if (got < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      return absl::Status(absl::ErrnoToStatusCode(e),
                          absl::StrCat("cannot read ", path, ": ",
                                       std::generic_category().message(e)));
    }
    if (got == 0) break;
    used += static_cast<size_t>(got);
  }
  data.resize(used);
  return data;
}

}  // namespace read_text
}  // namespace rbmrec
