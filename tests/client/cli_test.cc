#include "client/cli.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rbmrec::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

using Args = std::vector<std::string>;

ParsedArgs ParseOk(const Args& args, const std::string& env = "") {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, env);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : ParsedArgs();
}

std::string ParseError(const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, "");
  EXPECT_FALSE(parsed.ok());
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(parsed.status().message());
}

std::vector<std::string> Path(const ParsedArgs& p) {
  return p.command == nullptr ? std::vector<std::string>{} : p.command->path;
}

TEST(ParseArgsTest, GlobalFlagsAnywhereAndServerDefaults) {
  ParsedArgs p = ParseOk({"--json", "stats"});
  EXPECT_THAT(Path(p), ElementsAre("stats"));
  EXPECT_TRUE(p.global.json);
  EXPECT_EQ(p.global.server, "127.0.0.1:50051");
  EXPECT_EQ(p.global.timeout_seconds, kDefaultTimeoutSeconds);

  EXPECT_EQ(ParseOk({"stats"}, "env:2").global.server, "env:2");
  p = ParseOk({"stats", "--server", "h:1", "--timeout=2.5"}, "env:2");
  EXPECT_EQ(p.global.server, "h:1");
  EXPECT_EQ(p.global.timeout_seconds, 2.5);
  EXPECT_FALSE(p.global.json);
}

TEST(ParseArgsTest, TlsAndTokenFlagsAreGlobalAndMayBeEmpty) {
  ParsedArgs p = ParseOk({"stats", "--tls-ca", "ca.pem", "--tls-cert=c.pem",
                          "--tls-key", "c.key", "--tls-server-name", "rbmrec",
                          "--token-file", "admin.token"});
  EXPECT_THAT(Path(p), ElementsAre("stats"));
  EXPECT_EQ(p.global.security.tls_ca, "ca.pem");
  EXPECT_EQ(p.global.security.tls_cert, "c.pem");
  EXPECT_EQ(p.global.security.tls_key, "c.key");
  EXPECT_EQ(p.global.security.tls_server_name, "rbmrec");
  EXPECT_EQ(p.global.security.token_file, "admin.token");
  EXPECT_FALSE(p.global.security.token.has_value());

  // Absent: nullopt (the environment applies); given empty: "" (it does
  // not), in both spellings.
  p = ParseOk({"--tls-cert", "", "--tls-key=", "health"});
  EXPECT_THAT(Path(p), ElementsAre("health"));
  EXPECT_FALSE(p.global.security.tls_ca.has_value());
  EXPECT_EQ(p.global.security.tls_cert, "");
  EXPECT_EQ(p.global.security.tls_key, "");
  EXPECT_THAT(ParseError({"stats", "--token-file", "a", "--token-file", "b"}),
              HasSubstr("--token-file given more than once"));
}

TEST(ParseArgsTest, PositionalsFlagsAndRepeatedFlags) {
  ParsedArgs p = ParseOk({"--server=h:1", "predict", "u", "i1", "--method",
                          "meanfield", "i2", "--rate", "50=4", "--rate=a=b=3"});
  EXPECT_THAT(Path(p), ElementsAre("predict"));
  EXPECT_THAT(p.positional, ElementsAre("u", "i1", "i2"));
  EXPECT_EQ(p.Get("method", ""), "meanfield");
  EXPECT_THAT(p.GetAll("rate"), ElementsAre("50=4", "a=b=3"));
  EXPECT_FALSE(p.Has("model"));
  EXPECT_EQ(p.Get("model", "dflt"), "dflt");
}

TEST(ParseArgsTest, ShortFlagsDashAndDoubleDash) {
  ParsedArgs p = ParseOk({"recommend", "u", "-n", "5"});
  EXPECT_EQ(p.Get("n", ""), "5");
  p = ParseOk({"recommend", "-", "-n=7"});
  EXPECT_THAT(p.positional, ElementsAre("-"));
  EXPECT_EQ(p.Get("n", ""), "7");
  p = ParseOk({"predict", "--json", "--", "-u", "--i"});
  EXPECT_THAT(p.positional, ElementsAre("-u", "--i"));
  EXPECT_TRUE(p.global.json);
}

TEST(ParseArgsTest, SubcommandsAndGroups) {
  EXPECT_THAT(Path(ParseOk({"items", "import", "u.item"})),
              ElementsAre("items", "import"));
  EXPECT_THAT(Path(ParseOk({"models"})), ElementsAre("models"));
  ParsedArgs p = ParseOk({"models", "activate", "3"});
  EXPECT_THAT(Path(p), ElementsAre("models", "activate"));
  EXPECT_THAT(p.positional, ElementsAre("3"));
  EXPECT_THAT(ParseOk({"import", "f", "--lenient"}).flags.at("lenient"),
              ElementsAre("true"));
}

TEST(ParseArgsTest, CommandWordsLaterAreArguments) {
  ParsedArgs p = ParseOk({"delete-ratings", "u", "import", "models", "-5"});
  EXPECT_THAT(Path(p), ElementsAre("delete-ratings"));
  EXPECT_THAT(p.positional, ElementsAre("u", "import", "models", "-5"));
  p = ParseOk({"models", "delete", "3", "--force", "--json"});
  EXPECT_THAT(Path(p), ElementsAre("models", "delete"));
  EXPECT_THAT(p.positional, ElementsAre("3"));
  EXPECT_TRUE(p.Has("force"));
  EXPECT_TRUE(p.global.json);
  p = ParseOk({"models", "prune", "--keep-full=2", "--keep-online", "-1"});
  EXPECT_EQ(p.Get("keep-full", ""), "2");
  EXPECT_EQ(p.Get("keep-online", ""), "-1");
  EXPECT_THAT(Path(ParseOk({"models", "unpin", "4"})),
              ElementsAre("models", "unpin"));
  EXPECT_EQ(ParseError({"models", "pin"}),
            "'rbmrec models pin': missing argument VERSION");
  EXPECT_EQ(ParseError({"stats", "--force"}),
            "unknown flag --force for 'rbmrec stats'");
}

TEST(ParseArgsTest, TrainActivationAndLearningRateAlias) {
  absl::StatusOr<v1::TrainRequest> r = BuildTrainRequest(
      ParseOk({"train", "--activate", "if-better", "--lr", "0.5"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->activation(), v1::ACTIVATE_IF_BETTER);
  EXPECT_EQ(r->options().learning_rate(), 0.5);
  r = BuildTrainRequest(ParseOk({"train", "--learning-rate", "0.25"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->options().learning_rate(), 0.25);
  EXPECT_EQ(r->activation(), v1::ACTIVATION_POLICY_UNSPECIFIED);
  EXPECT_EQ(
      BuildTrainRequest(ParseOk({"train", "--lr", "1", "--learning-rate", "2"}))
          .status()
          .message(),
      "--lr is an alias of --learning-rate; give only one");
  EXPECT_EQ(*ParseActivation("always"), v1::ACTIVATE_ALWAYS);
  EXPECT_EQ(*ParseActivation("never"), v1::ACTIVATE_NEVER);
}

TEST(ParseArgsTest, UsageErrorsNameTheArgument) {
  EXPECT_EQ(ParseError({}), "missing command");
  EXPECT_EQ(ParseError({"bogus"}), "unknown command 'bogus'");
  EXPECT_EQ(ParseError({"items", "bogus"}), "unknown command 'items bogus'");
  EXPECT_EQ(ParseError({"items"}),
            "'items' needs a subcommand: import, hide, unhide");
  EXPECT_EQ(ParseError({"import", "f", "--bogus"}),
            "unknown flag --bogus for 'rbmrec import'");
  EXPECT_EQ(ParseError({"import", "f", "-x"}),
            "unknown flag -x for 'rbmrec import'");
  EXPECT_EQ(ParseError({"--format", "csv", "import", "f"}),
            "unknown flag --format (command flags go after the command)");
  EXPECT_EQ(ParseError({"import", "f", "--batch"}),
            "--batch needs a value (N)");
  EXPECT_EQ(ParseError({"import", "f", "--batch", "1", "--batch=2"}),
            "--batch given more than once");
  EXPECT_EQ(ParseError({"import", "f", "--lenient=yes"}),
            "--lenient takes no value");
  EXPECT_EQ(ParseError({"import"}), "'rbmrec import': missing argument FILE");
  EXPECT_EQ(ParseError({"import", "a", "b"}),
            "'rbmrec import': unexpected argument 'b'");
  EXPECT_EQ(ParseError({"predict", "u"}),
            "'rbmrec predict': missing argument ITEM...");
  EXPECT_EQ(ParseError({"models", "foo"}),
            "'rbmrec models': unexpected argument 'foo'");
  EXPECT_EQ(ParseError({"--timeout", "0", "stats"}),
            "--timeout: must be a positive number of seconds, got '0'");
  EXPECT_EQ(ParseError({"--timeout", "abc", "stats"}),
            "--timeout: expected a number, got 'abc'");
  EXPECT_EQ(ParseError({"--server=", "stats"}), "--server: must not be empty");
  EXPECT_EQ(ParseError({"stats", "--server"}),
            "--server needs a value (HOST:PORT)");
}

TEST(ParseArgsTest, HelpOnEveryLevel) {
  ParsedArgs p = ParseOk({"--help"});
  EXPECT_TRUE(p.help);
  EXPECT_EQ(p.command, nullptr);
  EXPECT_THAT(HelpText(p), HasSubstr("\nUsage: rbmrec [OPTIONS] COMMAND\n"));
  EXPECT_THAT(HelpText(p), HasSubstr("\nCommands:\n"));

  p = ParseOk({"import", "--help"});  // no FILE needed with --help
  EXPECT_TRUE(p.help);
  EXPECT_THAT(HelpText(p),
              HasSubstr("\nUsage: rbmrec import [OPTIONS] FILE\n"));
  EXPECT_THAT(HelpText(p), HasSubstr("--lenient"));

  p = ParseOk({"help", "items", "import"});
  EXPECT_THAT(HelpText(p), HasSubstr("Usage: rbmrec items import [OPTIONS] "
                                     "FILE\n"));

  p = ParseOk({"items", "-h"});
  EXPECT_THAT(p.group, ElementsAre("items"));
  EXPECT_THAT(HelpText(p),
              StartsWith("Usage: rbmrec items [OPTIONS] COMMAND\n"));
  EXPECT_THAT(HelpText(p), HasSubstr("\n  items import FILE "));

  p = ParseOk({"models", "--help", "--json"});
  EXPECT_TRUE(p.global.json);
  EXPECT_THAT(HelpText(p),
              HasSubstr("Usage: rbmrec models [OPTIONS] [COMMAND]\n"));
  EXPECT_THAT(HelpText(p), HasSubstr("\n  models activate VERSION "));

  p = ParseOk({"help"});
  EXPECT_EQ(HelpText(p), CommandHelp({}));

  // Help does not hide a usage error in the flags.
  EXPECT_EQ(ParseError({"import", "--help", "--bogus"}),
            "unknown flag --bogus for 'rbmrec import'");
  EXPECT_EQ(ParseError({"--help=yes"}), "--help takes no value");
}

// The words a help row starts with: "models delete VERSION".
std::string Row(const CommandSpec& c) {
  return absl::StrCat("\n  ", absl::StrJoin(c.path, " "),
                      c.args.empty() ? "" : " ", c.args, " ");
}

TEST(UsageTest, TopLevelListsEveryCommandAndGlobalOption) {
  const std::string top = CommandHelp({});
  EXPECT_THAT(top, StartsWith("rbmrec: client of the rbmrec "
                              "collaborative-filtering server.\n\n"));
  for (const CommandSpec& c : Commands()) {
    EXPECT_THAT(top, HasSubstr(Row(c)));
    EXPECT_THAT(top, HasSubstr(c.summary));
  }
  for (const FlagSpec& f : GlobalFlags()) {
    EXPECT_THAT(top, HasSubstr("--" + f.name));
  }
  EXPECT_THAT(top, HasSubstr("\n  -h,--help "));
  EXPECT_THAT(top, HasSubstr("\n  --server HOST:PORT "));
  EXPECT_THAT(top, HasSubstr("\nExit codes: 0 ok, 1 usage error"));
  EXPECT_EQ(CommandHelp({"bogus"}), top);
}

TEST(UsageTest, EveryCommandListsItsFlagsAndTheGlobalOnes) {
  for (const CommandSpec& c : Commands()) {
    const std::string name = absl::StrJoin(c.path, " ");
    const std::string usage = CommandHelp(c.path);
    EXPECT_THAT(usage,
                HasSubstr(absl::StrCat("\nUsage: rbmrec ", name, " [OPTIONS]",
                                       c.args.empty() ? "" : " ", c.args)));
    EXPECT_THAT(usage, HasSubstr("\nOptions:\n  -h,--help "));
    for (const FlagSpec& f : c.flags) {
      EXPECT_THAT(usage, HasSubstr("--" + f.name)) << name;
    }
    const size_t global = usage.find("\nGlobal options:\n");
    ASSERT_NE(global, std::string::npos) << name;
    for (const FlagSpec& f : GlobalFlags()) {
      if (f.name == "help") continue;  // the command's own -h,--help
      EXPECT_NE(usage.find("--" + f.name, global), std::string::npos) << name;
    }
    // A command's subcommands are listed in its help ("models").
    for (const CommandSpec& sub : Commands()) {
      if (sub.path.size() > c.path.size() &&
          std::equal(c.path.begin(), c.path.end(), sub.path.begin())) {
        EXPECT_THAT(usage, HasSubstr(Row(sub)));
      }
    }
  }
}

TEST(UsageTest, ExamplesParseAsTheirCommandAndEndItsHelp) {
  for (const CommandSpec& c : Commands()) {
    EXPECT_FALSE(c.examples.empty()) << absl::StrJoin(c.path, " ");
    const std::string usage = CommandHelp(c.path);
    const size_t examples = usage.find("\nExamples:\n");
    ASSERT_NE(examples, std::string::npos);
    EXPECT_LT(examples, usage.find("\nGlobal options:\n"));
    for (const auto& [line, what] : c.examples) {
      const std::vector<std::string> words = absl::StrSplit(line, ' ');
      ASSERT_EQ(words.front(), "rbmrec");
      EXPECT_EQ(Path(ParseOk(Args(words.begin() + 1, words.end()))), c.path)
          << line;
      EXPECT_NE(usage.find("\n  " + line + "\n", examples), std::string::npos)
          << line;
      EXPECT_THAT(usage, HasSubstr(what.substr(0, 20)));
    }
  }
}

TEST(UsageTest, FitsInEightyColumns) {
  std::vector<std::vector<std::string>> all = {{}, {"items"}};
  for (const CommandSpec& c : Commands()) all.push_back(c.path);
  for (const auto& words : all) {
    for (absl::string_view line : absl::StrSplit(CommandHelp(words), '\n')) {
      EXPECT_LE(line.size(), 80u) << line;
    }
  }
}

TEST(GuessCommandTest, SkipsFlags) {
  EXPECT_EQ(GuessCommand({"--json", "import", "x", "--bogus"}), &Commands()[0]);
  ASSERT_NE(GuessCommand({"items", "import"}), nullptr);
  EXPECT_THAT(GuessCommand({"items", "import"})->path,
              ElementsAre("items", "import"));
  EXPECT_EQ(GuessCommand({"bogus"}), nullptr);
  EXPECT_EQ(GuessCommand({"items"}), nullptr);
}

TEST(TypedFlagsTest, IntsAndDoublesWithRanges) {
  ParsedArgs p = ParseOk({"import", "f", "--batch", "x"});
  EXPECT_EQ(GetInt(p, "batch", 5, 1, 10).status().message(),
            "--batch: expected an integer, got 'x'");
  p = ParseOk({"import", "f", "--batch", "0"});
  EXPECT_EQ(GetInt(p, "batch", 5, 1, 10).status().message(),
            "--batch: must be in [1, 10], got 0");
  p = ParseOk({"import", "f"});
  EXPECT_EQ(*GetInt(p, "batch", 5, 1, 10), 5);
  EXPECT_EQ(ParseDouble("inf", "X").status().message(),
            "X: expected a number, got 'inf'");
  EXPECT_EQ(*ParseDouble("2.5", "X"), 2.5);
}

TEST(ParseValuesTest, MethodRankByItemRating) {
  EXPECT_EQ(*ParseMethod("exact"), v1::EXACT);
  EXPECT_EQ(*ParseMethod("MeanField"), v1::MEAN_FIELD);
  EXPECT_EQ(*ParseMethod("mean-field"), v1::MEAN_FIELD);
  EXPECT_EQ(ParseMethod("gibbs").status().message(),
            "--method: expected exact or meanfield, got 'gibbs'");
  EXPECT_EQ(*ParseRankBy("prob"), v1::PROBABILITY_AT_LEAST);
  EXPECT_EQ(*ParseRankBy("expected"), v1::EXPECTED_RATING);
  EXPECT_FALSE(ParseRankBy("best").ok());

  absl::StatusOr<v1::ItemRating> r = ParseItemRating("a=b=4.5");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->item_id(), "a=b");
  EXPECT_EQ(r->rating(), 4.5);
  EXPECT_EQ(ParseItemRating("50").status().message(),
            "--rate: expected ITEM=RATING, got '50'");
  EXPECT_EQ(ParseItemRating("=4").status().message(),
            "--rate: expected ITEM=RATING, got '=4'");
  EXPECT_EQ(ParseItemRating("50=x").status().message(),
            "--rate 50: expected a number, got 'x'");
  EXPECT_EQ(*UserArgument("-"), "");
  EXPECT_EQ(*UserArgument("196"), "196");
  // A rating is a plain decimal number, as in a file.
  EXPECT_EQ(ParseItemRating("50=0x4").status().message(),
            "--rate 50: expected a number, got '0x4'");
  EXPECT_EQ(ParseItemRating("50=nan").status().message(),
            "--rate 50: expected a number, got 'nan'");
}

TEST(IdArgumentTest, IdsAreTrimmedLikeTheFieldsOfAFile) {
  // `import` trims spaces and tabs around every field; so does every id
  // argument, or " u " would name another user than the imported "u".
  EXPECT_EQ(*IdArgument(" u\t", "USER"), "u");
  EXPECT_EQ(*IdArgument("a b", "USER"), "a b");
  EXPECT_EQ(IdArgument(" \t ", "ITEM").status().message(),
            "ITEM: the id is empty (spaces and tabs around ids are dropped, "
            "as in rating files)");
  EXPECT_EQ(*UserArgument(" 196 "), "196");
  EXPECT_EQ(*UserArgument(" - "), "");  // still the anonymous user
  // An empty USER is an error, not the anonymous user.
  EXPECT_EQ(UserArgument("  ").status().message(),
            "USER: the id is empty (spaces and tabs around ids are dropped, "
            "as in rating files)");

  absl::StatusOr<v1::PredictRatingsRequest> p = BuildPredictRequest(
      ParseOk({"predict", " 196 ", " 50", "172\t", "--rate", " 1 = 5 "}));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->user_id(), "196");
  EXPECT_THAT(p->item_ids(), ElementsAre("50", "172"));
  ASSERT_EQ(p->ratings_size(), 1);
  EXPECT_EQ(p->ratings(0).item_id(), "1");
  EXPECT_EQ(p->ratings(0).rating(), 5);
  EXPECT_FALSE(BuildPredictRequest(ParseOk({"predict", " ", "50"})).ok());
  EXPECT_FALSE(BuildPredictRequest(ParseOk({"predict", "u", " "})).ok());
  EXPECT_FALSE(
      BuildPredictRequest(ParseOk({"predict", "u", "i", "--rate", " =4"}))
          .ok());

  absl::StatusOr<v1::RecommendRequest> r =
      BuildRecommendRequest(ParseOk({"recommend", "\t196 "}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->user_id(), "196");
  EXPECT_FALSE(BuildRecommendRequest(ParseOk({"recommend", " "})).ok());
}

TEST(BuildTrainRequestTest, OnlyGivenOptionsArePresent) {
  absl::StatusOr<v1::TrainRequest> r = BuildTrainRequest(ParseOk({"train"}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->options().has_hidden());
  EXPECT_FALSE(r->options().has_seed());

  r = BuildTrainRequest(ParseOk({"train",
                                 "--hidden",
                                 "50",
                                 "--epochs",
                                 "3",
                                 "--batch-size",
                                 "100",
                                 "--lr",
                                 "0.01",
                                 "--momentum",
                                 "0.9",
                                 "--weight-decay",
                                 "0.001",
                                 "--cd-steps",
                                 "3",
                                 "--seed",
                                 "18446744073709551615",
                                 "--threads",
                                 "2",
                                 "--validation-fraction",
                                 "0",
                                 "--ensemble",
                                 "4",
                                 "--average",
                                 "0.5",
                                 "--ordinal",
                                 "false"}));
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::TrainOptions& o = r->options();
  EXPECT_EQ(o.hidden(), 50);
  EXPECT_EQ(o.epochs(), 3);
  EXPECT_EQ(o.batch_size(), 100);
  EXPECT_EQ(o.learning_rate(), 0.01);
  EXPECT_EQ(o.momentum(), 0.9);
  EXPECT_EQ(o.weight_decay(), 0.001);
  EXPECT_EQ(o.cd_steps(), 3);
  EXPECT_EQ(o.seed(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(o.threads(), 2);
  EXPECT_TRUE(o.has_validation_fraction());
  EXPECT_EQ(o.validation_fraction(), 0);
  EXPECT_EQ(o.ensemble(), 4);
  EXPECT_EQ(o.average(), 0.5);
  EXPECT_TRUE(o.has_ordinal());
  EXPECT_FALSE(o.ordinal());
  EXPECT_FALSE(o.has_conditional());
  EXPECT_FALSE(o.has_item_regression());
  absl::StatusOr<v1::TrainRequest> c =
      BuildTrainRequest(ParseOk({"train", "--conditional"}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->options().conditional());
  c = BuildTrainRequest(ParseOk({"train", "--item-regression", "-1"}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->options().has_item_regression());
  EXPECT_EQ(c->options().item_regression(), -1);
}

TEST(BuildTrainRequestTest, BadValuesNameTheFlag) {
  EXPECT_EQ(
      BuildTrainRequest(ParseOk({"train", "--hidden", "x"})).status().message(),
      "--hidden: expected an integer, got 'x'");
  EXPECT_THAT(BuildTrainRequest(ParseOk({"train", "--epochs", "3000000000"}))
                  .status()
                  .message(),
              HasSubstr("--epochs: must be in"));
  EXPECT_EQ(
      BuildTrainRequest(ParseOk({"train", "--seed", "-1"})).status().message(),
      "--seed: expected a non-negative integer, got '-1'");
  EXPECT_EQ(
      BuildTrainRequest(ParseOk({"train", "--lr", "fast"})).status().message(),
      "--lr: expected a number, got 'fast'");
  EXPECT_EQ(BuildTrainRequest(ParseOk({"train", "--ordinal", "yes"}))
                .status()
                .message(),
            "--ordinal: expected true or false, got 'yes'");
}

TEST(BuildPredictRequestTest, UserItemsRatingsMethodModel) {
  absl::StatusOr<v1::PredictRatingsRequest> r =
      BuildPredictRequest(ParseOk({"predict", "-", "50", "172", "--rate", "1=5",
                                   "--method", "meanfield", "--model", "3"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->user_id(), "");
  EXPECT_THAT(r->item_ids(), ElementsAre("50", "172"));
  ASSERT_EQ(r->ratings_size(), 1);
  EXPECT_EQ(r->ratings(0).item_id(), "1");
  EXPECT_EQ(r->ratings(0).rating(), 5);
  EXPECT_EQ(r->method(), v1::MEAN_FIELD);
  EXPECT_EQ(r->model_version(), 3);

  r = BuildPredictRequest(ParseOk({"predict", "196", "50"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->user_id(), "196");
  EXPECT_EQ(r->method(), v1::METHOD_UNSPECIFIED);
  EXPECT_EQ(r->model_version(), 0);
  EXPECT_THAT(r->ratings(), IsEmpty());

  EXPECT_EQ(BuildPredictRequest(ParseOk({"predict", "u", "i", "--model", "0"}))
                .status()
                .message(),
            "--model: must be in [1, 9223372036854775807], got 0");
  EXPECT_FALSE(
      BuildPredictRequest(ParseOk({"predict", "u", "i", "--method", "x"}))
          .ok());
  EXPECT_FALSE(
      BuildPredictRequest(ParseOk({"predict", "u", "i", "--rate", "i"})).ok());
}

TEST(BuildRecommendRequestTest, RankingChoices) {
  absl::StatusOr<v1::RecommendRequest> r =
      BuildRecommendRequest(ParseOk({"recommend", "196"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->user_id(), "196");
  EXPECT_EQ(r->n(), 10);
  EXPECT_EQ(r->rank_by(), v1::RANK_BY_UNSPECIFIED);  // the server's default
  EXPECT_EQ(r->threshold(), 0);

  r = BuildRecommendRequest(ParseOk({"recommend", "196", "--by", "rated"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank_by(), v1::PROBABILITY_RATED);
  EXPECT_EQ(r->threshold(), 0);

  r = BuildRecommendRequest(ParseOk(
      {"recommend", "196", "--by", "rated-prob", "--threshold", "4.5"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank_by(), v1::PROBABILITY_RATED_AT_LEAST);
  EXPECT_EQ(r->threshold(), 4.5);

  r = BuildRecommendRequest(ParseOk({"recommend", "196", "--by", "expected"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank_by(), v1::EXPECTED_RATING);

  r = BuildRecommendRequest(ParseOk({"recommend", "196", "--by", "prob"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank_by(), v1::PROBABILITY_AT_LEAST);
  EXPECT_EQ(r->threshold(), 4);

  r = BuildRecommendRequest(
      ParseOk({"recommend", "196", "--threshold", "3.5", "-n", "3"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank_by(), v1::RANK_BY_UNSPECIFIED);
  EXPECT_EQ(r->threshold(), 3.5);
  EXPECT_EQ(r->n(), 3);

  EXPECT_EQ(BuildRecommendRequest(ParseOk({"recommend", "u", "--by", "expected",
                                           "--threshold", "4"}))
                .status()
                .message(),
            "--threshold applies only with --by prob, rated-prob or "
            "regression-prob");
  EXPECT_FALSE(BuildRecommendRequest(ParseOk({"recommend", "u", "--by", "rated",
                                              "--threshold", "4"}))
                   .ok());
  EXPECT_EQ(BuildRecommendRequest(ParseOk({"recommend", "u", "-n", "0"}))
                .status()
                .message(),
            "-n: must be in [1, 2147483647], got 0");
  EXPECT_FALSE(
      BuildRecommendRequest(ParseOk({"recommend", "u", "--by", "x"})).ok());
}

}  // namespace
}  // namespace rbmrec::client
