// The --help texts of the rbmrec CLI (client/cli.h): CLI11's own help of the
// app tree that ParseArgs parses with (cli.cc), through a CLI::Formatter
// that names a command's arguments and summary from the command table
// (cli_table.cc), lists a group's commands with all their words, wraps text
// at 79 columns and ends a command's help with the table's examples and the
// global options.

#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/cli.h"
#include "client/cli_internal.h"

namespace rbmrec::client {
namespace {

constexpr size_t kWidth = 79;   // columns of a help line
constexpr size_t kColumn = 30;  // where the descriptions of rows start

// `text` with each of its lines wrapped at `width` columns.
std::string Wrap(absl::string_view text, size_t width) {
  std::vector<std::string> lines;
  for (absl::string_view paragraph : absl::StrSplit(text, '\n')) {
    std::string line;
    for (absl::string_view word :
         absl::StrSplit(paragraph, ' ', absl::SkipEmpty())) {
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        lines.push_back(std::move(line));
        line.clear();
      }
      absl::StrAppend(&line, line.empty() ? "" : " ", word);
    }
    lines.push_back(std::move(line));
  }
  return absl::StrJoin(lines, "\n");
}

// The table's command of `app` (from its words), or null (root, "items").
const CommandSpec* CommandOf(const CLI::App* app) {
  std::vector<std::string> words;
  for (; app->get_parent() != nullptr; app = app->get_parent()) {
    words.insert(words.begin(), app->get_name());
  }
  for (const CommandSpec& c : Commands()) {
    if (c.path == words) return &c;
  }
  return nullptr;
}

// The "Examples:" section of a command's help: each command line, and what
// it does below it; "" when the table gives none.
std::string Examples(const CommandSpec* command) {
  if (command == nullptr || command->examples.empty()) return std::string();
  constexpr size_t kIndent = 6;
  const std::string indent(kIndent, ' ');
  std::string out = "Examples:\n";
  for (const auto& [line, what] : command->examples) {
    const std::string text = absl::StrReplaceAll(Wrap(what, kWidth - kIndent),
                                                 {{"\n", "\n" + indent}});
    absl::StrAppend(&out, "  ", line, "\n", indent, text, "\n");
  }
  return out + "\n";
}

class TableFormatter : public CLI::Formatter {
 public:
  TableFormatter() { column_width(kColumn); }

  // CLI11's help with one blank line between sections (CLI11 writes two
  // after the options when the hidden positional's group comes last).
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    std::string help = CLI::Formatter::make_help(app, std::move(name), mode);
    while (absl::StrContains(help, "\n\n\n")) {
      absl::StrReplaceAll({{"\n\n\n", "\n\n"}}, &help);
    }
    return help;
  }

  // The program's line, a command's paragraph; none for a group.
  std::string make_description(const CLI::App* app) const override {
    const std::string& text = app->get_description();
    return text.empty() ? std::string() : Wrap(text, kWidth) + "\n\n";
  }

  // "Usage: rbmrec models delete [OPTIONS] VERSION": the arguments as the
  // table names them (CLI11's catch-all positional stays out of help).
  std::string make_usage(const CLI::App* app, std::string name) const override {
    const CommandSpec* command = CommandOf(app);
    std::string out = absl::StrCat(get_label("Usage"), ": ", name);
    if (!app->get_options(
                [](const CLI::Option* o) { return o->nonpositional(); })
             .empty()) {
      absl::StrAppend(&out, " [", get_label("OPTIONS"), "]");
    }
    if (command != nullptr && !command->args.empty()) {
      absl::StrAppend(&out, " ", command->args);
    }
    if (!app->get_subcommands({}).empty()) {
      const std::string label = get_label("COMMAND");
      absl::StrAppend(&out, " ",
                      command == nullptr ? label : "[" + label + "]");
    }
    return out + "\n";
  }

  // A row per command: its words, arguments and summary; then the rows of
  // its own commands ("models activate VERSION" below "models").
  std::string make_subcommand(const CLI::App* sub) const override {
    std::ostringstream out;
    if (const CommandSpec* c = CommandOf(sub)) {
      std::string left = Joined(c->path);
      if (!c->args.empty()) absl::StrAppend(&left, " ", c->args);
      CLI::detail::format_help(out, left, Wrap(c->summary, kWidth - kColumn),
                               kColumn);
    }
    for (const CLI::App* child : sub->get_subcommands({})) {
      out << make_subcommand(child);
    }
    return out.str();
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    return Wrap(opt->get_description(), kWidth - kColumn);
  }

  // The program's footer; below a command, its examples and the global
  // options.
  std::string make_footer(const CLI::App* app) const override {
    const CLI::App* root = app;
    while (root->get_parent() != nullptr) root = root->get_parent();
    if (root == app) {
      const std::string& footer = app->get_footer();
      return footer.empty() ? std::string() : Wrap(footer, kWidth) + "\n";
    }
    const std::vector<const CLI::Option*> global =
        root->get_options([root](const CLI::Option* o) {
          return o->nonpositional() && o != root->get_help_ptr();
        });
    // make_group starts with the blank line make_help already wrote.
    return Examples(CommandOf(app)) +
           make_group(get_label("Global options"), false, global).substr(1);
  }
};

}  // namespace

std::shared_ptr<CLI::Formatter> MakeHelpFormatter() {
  return std::make_shared<TableFormatter>();
}

std::string CommandHelp(const std::vector<std::string>& words) {
  CLI::App root;
  AppTree nodes;
  BuildAppTree(root, nodes);
  const auto it = nodes.find(words);
  if (words.empty() || it == nodes.end()) return root.help();
  // CLI11 names the app by the words before it and its own name.
  std::vector<std::string> before = {root.get_name()};
  before.insert(before.end(), words.begin(), words.end() - 1);
  return it->second.app->help(Joined(before));
}

std::string HelpText(const ParsedArgs& parsed) {
  if (parsed.command != nullptr) return CommandHelp(parsed.command->path);
  return CommandHelp(parsed.group);
}

}  // namespace rbmrec::client
