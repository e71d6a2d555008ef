// The command table of the rbmrec CLI (client/cli.h): every command with
// its arguments, flags and help, the global flags, and the program's own
// lines of --help. The CLI11 app tree (cli.cc) and so its --help
// (cli_formatter.cc) are built from it.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli.h"
#include "client/command_context.h"

namespace rbmrec::client {
namespace {

FlagSpec Bool(std::string name, std::string help) {
  return FlagSpec{std::move(name), 0, FlagKind::kBool, "", std::move(help)};
}

FlagSpec Value(std::string name, std::string value_name, std::string help,
               char short_name = 0) {
  return FlagSpec{std::move(name), short_name, FlagKind::kValue,
                  std::move(value_name), std::move(help)};
}

FlagSpec Repeated(std::string name, std::string value_name, std::string help) {
  return FlagSpec{std::move(name), 0, FlagKind::kRepeated,
                  std::move(value_name), std::move(help)};
}

FlagSpec FormatFlag() {
  return Value("format", "FORMAT",
               "auto|ml100k|dat|mlcsv|csv|tsv|space (default auto: detected "
               "from the file name and first lines)");
}

FlagSpec MethodFlag() {
  return Value("method", "METHOD",
               "exact|meanfield: exact conditional (default) or the faster "
               "mean-field approximation");
}

FlagSpec ModelFlag() {
  return Value("model", "VERSION",
               "answer with this model version (default: the active one)");
}

FlagSpec RateFlag() {
  return Repeated("rate", "ITEM=RATING",
                  "an extra rating for this request only (repeatable); merged "
                  "over the user's stored ratings, or the ratings of the "
                  "anonymous user '-'");
}

// Commands that load data: import, items import.
void AddImportCommands(std::vector<CommandSpec>& c) {
  c.push_back(CommandSpec{
      {"import"},
      "FILE",
      1,
      1,
      "load ratings from a file (MovieLens, CSV, TSV)",
      "Reads ratings from FILE and streams them to the server in batches. "
      "Each batch is committed atomically; a later rating of the same "
      "(user, item) replaces an earlier one. Malformed file lines fail the "
      "import before anything is sent (or, with --lenient, are skipped); so "
      "does a file without any rating (empty, or only a header); "
      "rows the server rejects are listed with their file line numbers and "
      "make the command exit 3 (unless --allow-rejected). If the import "
      "fails part way, the rows certainly stored are printed; re-running the "
      "same import is always safe (ratings are upserted).",
      {FormatFlag(),
       Value("batch", "N",
             "rows per batch, each one transaction (default 10000, the "
             "server's default --max-batch); lower it when a batch is over "
             "the server's --max-message-mb (the error says how far)"),
       Bool("lenient", "skip malformed lines instead of failing"),
       Bool("allow-rejected",
            "exit 0 even when the server rejected rows (default: exit 3)"),
       Value("kind", "KIND",
             "rating|view (default rating): with view every row is stored "
             "as a view, an interaction without a rating (the file's rating "
             "column is read and ignored)")},
      {{"rbmrec import ml-100k/u1.base",
        "80,000 MovieLens ratings, streamed in batches"},
       {"rbmrec import clicks.tsv --kind view",
        "user, item, rating, timestamp rows stored as views"},
       {"rbmrec import data.csv --format csv --lenient",
        "a CSV file, skipping its malformed lines"}},
      RunImport});
  c.push_back(CommandSpec{
      {"items", "import"},
      "FILE",
      1,
      1,
      "load item titles (u.item, movies.dat/.csv)",
      "Reads item ids, titles and genres from FILE (format detected from the "
      "content) and stores them on the server, so answers show titles. "
      "Genres are stored as the item's categories (for recommend "
      "--category) and as the attribute \"genres\". Importing an item "
      "again replaces its categories and makes it visible.",
      {Value("batch", "N", "items per request (default 5000)")},
      {{"rbmrec items import ml-100k/u.item",
        "titles and genres, so answers show names"}},
      RunItemsImport});
  c.push_back(CommandSpec{
      {"items", "hide"},
      "ITEM...",
      1,
      -1,
      "never recommend these items",
      "Marks the items hidden: Recommend never returns them, whatever its "
      "filters; PredictRatings still predicts them when asked by id. Their "
      "titles and categories stay. Unknown ids are created hidden.",
      {},
      {{"rbmrec items hide 50 181", "withdraws items 50 and 181"}},
      RunItemsHide});
  c.push_back(CommandSpec{
      {"items", "unhide"},
      "ITEM...",
      1,
      -1,
      "recommend hidden items again",
      "Makes hidden items visible to Recommend again.",
      {},
      {{"rbmrec items unhide 50", "item 50 may be recommended again"}},
      RunItemsUnhide});
}

// recommend: its flags are the most (ranking, filters, page).
// recommend, also for every user (--all-users).
CommandSpec RecommendCommand() {
  return CommandSpec{
      {"recommend"},
      "USER",
      0,
      1,
      "the top N items a user has not rated",
      "Ranks the items the user has not rated. By default (the server's "
      "choice) by how strongly the items the user rated point to an item "
      "times P(rating >= threshold) (--by regression-prob, models with the "
      "item regression), else by how likely the user is to rate an item "
      "and rate it at least the threshold (--by rated-prob, models with the "
      "rated RBM), else by expected rating. USER '-' is an anonymous user "
      "described "
      "only by --rate. A user without ratings gets the cold-start fallback "
      "(the model's answer for an empty user), marked as such. With "
      "--all-users (no USER): every stored user's list (or --users FILE's), "
      "streamed by the server into --out FILE, one write of whole lines "
      "per batch of users; --resume continues after the last complete user "
      "in FILE.",
      {Value("n", "N", "number of items (default 10)", 'n'),
       Value("by", "expected|prob|rated|rated-prob|regression-prob",
             "rank by expected rating, P(rating >= threshold), P(rated), "
             "P(rated) x P(rating >= threshold), or the item regression's "
             "score x P(rating >= threshold) (default: the server's, "
             "regression-prob or rated-prob when the model has it)"),
       Value("threshold", "X",
             "the rating threshold of --by prob (default 4), rated-prob and "
             "regression-prob "
             "(default: the server's, the first value at or above the mean "
             "rating); without --by, the server's default ranking with this "
             "threshold"),
       Repeated("category", "NAME",
                "only items of this category (repeatable: any of them)"),
       Value("all-categories", "A,B",
             "only items with every one of these categories"),
       Value("exclude", "ID,..", "never these items"),
       Value("candidates", "FILE_OR_LIST",
             "rank only among these items: a file of ids (one a line or "
             "comma-separated) or a comma-separated list"),
       Value("offset", "N", "skip the first N of the ranked list (a page)"),
       MethodFlag(), RateFlag(), ModelFlag(),
       Bool("all-users",
            "every stored user (or --users FILE's), into --out FILE"),
       Value("out", "FILE", "--all-users: the output file"),
       Value("format", "csv|jsonl",
             "--all-users: CSV rows (user, rank, item, ...) or one JSON "
             "line per user (default: from FILE's name, .jsonl = jsonl, "
             "else csv)"),
       Value("users", "FILE",
             "--all-users: only these users (one id a line), in that order"),
       Bool("resume",
            "--all-users: keep FILE's complete users and continue after "
            "the last one")},
      {{"rbmrec recommend 1 -n 10", "the top 10 items user 1 has not rated"},
       {"rbmrec recommend 1 --category Comedy --exclude 50,181",
        "only comedies, never items 50 and 181"},
       {"rbmrec recommend 1 -n 10 --offset 10", "the second page of 10"},
       {"rbmrec recommend --all-users --out top10.csv",
        "the top 10 of every stored user, one CSV row per item"},
       {"rbmrec recommend --all-users --out top10.csv --resume",
        "continues an interrupted run after its last complete user"},
       {"rbmrec recommend 1 --by expected",
        "ranked by expected rating instead"},
       {"rbmrec recommend - --rate 50=5 --rate 181=4 -n 5",
        "an anonymous user, from two ratings"}},
      RunRecommend};
}

// Item-to-item: similar.
void AddItemToItemCommands(std::vector<CommandSpec>& c) {
  c.push_back(CommandSpec{
      {"similar"},
      "ITEM...",
      1,
      -1,
      "the items most similar to an item (or to a few)",
      "Lists the N items the model finds most similar to ITEM (with several "
      "ITEMs, to all of them on average): the cosine of the ranking model's "
      "item weight vectors plus a popularity term (docs/model.md). With "
      "--user, items that user rated are skipped.",
      {Value("n", "N", "number of items (default 10)", 'n'),
       Value("user", "USER", "skip the items this user rated"),
       Value("exclude", "ID,..", "never these items"),
       Repeated("category", "NAME",
                "only items of this category (repeatable: any of them)"),
       Value("all-categories", "A,B",
             "only items with every one of these categories"),
       ModelFlag()},
      {{"rbmrec similar 50 -n 5", "the 5 items most like item 50"},
       {"rbmrec similar 50 181 --user 1",
        "like items 50 and 181, skipping what user 1 rated"}},
      RunSimilar});
}

// Reads of stored data: ratings, item.
void AddReadCommands(std::vector<CommandSpec>& c) {
  c.push_back(CommandSpec{
      {"ratings"},
      "USER",
      1,
      1,
      "a user's stored ratings",
      "Lists USER's stored ratings (item, title, rating, time), a page at a "
      "time in the store's order (the order the items were first stored); "
      "the first line says which ratings of how many are shown. Needs the "
      "write role when the server checks tokens.",
      {Value("offset", "N", "skip the first N ratings (default 0)"),
       Value("limit", "N",
             "at most N ratings (default: the server's page, 100; at most "
             "the server's --max-batch)")},
      {{"rbmrec ratings 196", "user 196's first 100 stored ratings"},
       {"rbmrec ratings 196 --offset 100 --limit 100", "the next 100"}},
      RunRatings});
  c.push_back(CommandSpec{
      {"item"},
      "ITEM",
      1,
      1,
      "an item's metadata and ratings histogram",
      "Shows ITEM's stored metadata (title, categories, hidden, attributes) "
      "and, when a model is served, the histogram of the item's ratings the "
      "model holds (its training ratings plus online updates) as bars, with "
      "their number and mean.",
      {},
      {{"rbmrec item 50", "item 50's title and ratings histogram"}},
      RunItem});
}

// Commands that train and use a model: train, predict, recommend, evaluate.
void AddModelUseCommands(std::vector<CommandSpec>& c) {
  c.push_back(CommandSpec{
      {"train"},
      "",
      0,
      0,
      "train a new model on all stored ratings",
      "Starts a training job on the server and shows its progress: one table "
      "row per epoch. When it succeeds the new model version is stored and, "
      "per --activate, becomes active (the output says whether it did). "
      "Ctrl-C asks the server to cancel the job (a "
      "second Ctrl-C quits at once, leaving the job running). Options not "
      "given take the server's defaults.",
      {Value("hidden", "N", "number of hidden units"),
       Value("epochs", "N", "maximum number of epochs"),
       Value("batch-size", "N", "users per mini-batch"),
       Value("learning-rate", "X", "learning rate (alias --lr)"),
       Value("lr", "X", "alias of --learning-rate"),
       Value("momentum", "X", "momentum, in [0, 1)"),
       Value("weight-decay", "X", "L2 weight decay"),
       Value("cd-steps", "N", "Gibbs steps per CD update"),
       Value("seed", "N", "random seed"),
       Value("threads", "N", "worker threads"),
       Value("validation-fraction", "X",
             "fraction of ratings held out for validation, 0 disables"),
       Value("ensemble", "N", "number of RBMs averaged"),
       Value("ordinal", "true|false",
             "ordinal sharing between rating values (default: the "
             "server's, true)"),
       Bool("conditional",
            "the conditional RBM: the rating model also sees which items "
            "each user viewed (import --kind view) and, when predicting, "
            "the items asked about"),
       Value("average", "X",
             "parameter averaging over epochs, in [0, 1), 0 = off"),
       Value("item-regression", "N",
             "the item regression behind the regression-prob ranking (the "
             "default ranking of a model that has it): -1 = every item "
             "when the catalogue fits its size rule, else the 4,096 most "
             "rated, 0 = off, 1 = every item (default: the server's, -1)"),
       Value("factors", "N",
             "factored training through N factors (-1 = size rule, 0 = "
             "unfactored)"),
       Value("mf-factors", "N",
             "factors of the matrix factorisation blended into the "
             "predictions, kept when it lowers the validation RMSE (0 = "
             "never; default: the server's, 128)"),
       Value("activate", "always|if-better|never",
             "whether the new model becomes active: always, only if its "
             "validation RMSE is not worse than the active model's "
             "(if-better), or never (activate later with 'models "
             "activate'); default: the server's --activate")},
      {{"rbmrec train",
        "one table row per epoch; the first model becomes active"},
       {"rbmrec train --hidden 50 --activate never",
        "a second model, stored but not served"}},
      RunTrain});
  c.push_back(CommandSpec{
      {"predict"},
      "USER ITEM...",
      2,
      -1,
      "a user's predicted rating distributions",
      "Prints, for each ITEM, the probability of each rating value as a bar "
      "chart, and the expected rating. USER '-' is an anonymous user "
      "described only by --rate.",
      {MethodFlag(), RateFlag(), ModelFlag()},
      {{"rbmrec predict 1 50 100",
        "user 1's rating distributions for items 50 and 100"},
       {"rbmrec predict 1 50 --model 2",
        "asks a stored version that is not active"},
       {"rbmrec --json predict 1 50", "one JSON object, for scripts"}},
      RunPredict});
  c.push_back(RecommendCommand());
  c.push_back(CommandSpec{
      {"evaluate"},
      "FILE",
      1,
      1,
      "RMSE/MAE of the served model on a test file",
      "Reads held-out ratings from FILE (not stored), predicts each with the "
      "served model and prints RMSE, MAE, the number of ratings n and how "
      "many used a fallback (n_fallback: item unknown to the model). Ratings "
      "of users the server cannot predict for (no stored ratings) and "
      "ratings off the server's rating scale are excluded and counted as "
      "n_skipped, with a warning giving the count of each. When no rating "
      "can be evaluated the command fails (exit 2) saying why.",
      {FormatFlag(), Bool("lenient", "skip malformed lines instead of failing"),
       MethodFlag(), ModelFlag(),
       Value("batch", "N",
             "items per request (default 1000; lowered to the server's "
             "--max-predict-items when that is smaller)")},
      {{"rbmrec evaluate ml-100k/u1.test",
        "RMSE and MAE on held-out ratings (not stored)"}},
      RunEvaluate});
}

// The stored model versions: models and its subcommands.
void AddModelsCommands(std::vector<CommandSpec>& c) {
  c.push_back(CommandSpec{{"models"},
                          "",
                          0,
                          0,
                          "list the stored model versions",
                          "Lists the stored model versions, newest first; "
                          "'*' marks the active one, 'pinned' the versions "
                          "retention never removes, 'CORRUPT' the ones whose "
                          "stored file is damaged (as far as the server has "
                          "found; --verify checks every one).",
                          {Bool("verify",
                                "read every stored version and check its "
                                "checksum (about 1 s per GB)")},
                          {{"rbmrec models", "stored versions, * = active"},
                           {"rbmrec models --verify",
                            "the same, every stored file's checksum checked"}},
                          RunModels});
  c.push_back(
      CommandSpec{{"models", "activate"},
                  "VERSION",
                  1,
                  1,
                  "make a stored model version the active one",
                  "Makes VERSION the model that answers requests "
                  "(e.g. to roll back).",
                  {},
                  {{"rbmrec models activate 2",
                    "serve version 2 (activate the first one to roll back)"}},
                  RunModelsActivate});
  c.push_back(CommandSpec{
      {"models", "delete"},
      "VERSION",
      1,
      1,
      "delete a stored model version",
      "Deletes VERSION and gives its space back. The active version cannot "
      "be deleted; a pinned one only with --force.",
      {Bool("force", "delete the version even when it is pinned")},
      {{"rbmrec models delete 3 --force",
        "delete version 3 even when it is pinned"}},
      RunModelsDelete});
  c.push_back(CommandSpec{
      {"models", "pin"},
      "VERSION",
      1,
      1,
      "keep a model version through retention",
      "Pins VERSION: the retention policy (and 'models "
      "prune') never removes it.",
      {},
      {{"rbmrec models pin 2", "retention never removes version 2"}},
      RunModelsPinTrue});
  c.push_back(CommandSpec{
      {"models", "unpin"},
      "VERSION",
      1,
      1,
      "let retention remove a model version again",
      "Unpins VERSION.",
      {},
      {{"rbmrec models unpin 2", "retention may remove version 2 again"}},
      RunModelsPinFalse});
  c.push_back(CommandSpec{
      {"models", "prune"},
      "",
      0,
      0,
      "apply the retention policy now",
      "Deletes the stored versions the retention policy does not keep: it "
      "keeps the active version, every pinned one, the newest --keep-full "
      "\"full\" and the newest --keep-online \"online\" versions (default: "
      "the server's --keep-full-models / --keep-online-models).",
      {Value("keep-full", "N", "full (trained) versions to keep, >= 0"),
       Value("keep-online", "N", "online versions to keep, >= 0")},
      {{"rbmrec models prune --keep-full 2 --keep-online 0",
        "keep the newest 2 full versions, no online one (and the active and "
        "pinned ones)"}},
      RunModelsPrune});
}

// Server state and erasure: stats, health, delete-user, delete-ratings.
void AddServerCommands(std::vector<CommandSpec>& c) {
  c.push_back(
      CommandSpec{{"stats"},
                  "",
                  0,
                  0,
                  "counts of users, items, ratings; server state",
                  "Shows the numbers of stored users, items and "
                  "ratings, the active model, the training state, "
                  "the stored model versions and the database size: "
                  "the database file (against the server's "
                  "--db-max-mb, which limits the file only) and its "
                  "write-ahead log apart.",
                  {},
                  {{"rbmrec stats",
                    "users, items, ratings, the active model, the database"}},
                  RunStats});
  c.push_back(CommandSpec{{"health"},
                          "[SERVICE]",
                          0,
                          1,
                          "check that the server is serving",
                          "Calls the standard grpc.health.v1 Check for "
                          "SERVICE (default: the whole server). Exits 0 when "
                          "SERVING, 2 otherwise.",
                          {},
                          {{"rbmrec health rbmrec.v1.Rbmrec",
                            "exit 0 only when a model is serving"}},
                          RunHealth});
  c.push_back(
      CommandSpec{{"delete-user"},
                  "USER",
                  1,
                  1,
                  "delete every rating of a user",
                  "Deletes every stored rating of USER.",
                  {},
                  {{"rbmrec delete-user 196", "every rating of user 196"}},
                  RunDeleteUser});
  c.push_back(CommandSpec{{"delete-ratings"},
                          "USER ITEM...",
                          2,
                          -1,
                          "delete some ratings of a user",
                          "Deletes USER's ratings of the given items; items "
                          "the user has not rated are ignored. A USER with "
                          "no stored ratings is NOT_FOUND (exit 2).",
                          {},
                          {{"rbmrec delete-ratings 196 50 172",
                            "user 196's ratings of items 50 and 172"}},
                          RunDeleteRatings});
}

// Every command, in the order of the top-level usage text.
std::vector<CommandSpec> MakeCommands() {
  std::vector<CommandSpec> c;
  AddImportCommands(c);
  AddModelUseCommands(c);
  AddItemToItemCommands(c);
  AddReadCommands(c);
  AddModelsCommands(c);
  AddServerCommands(c);
  return c;
}

std::vector<FlagSpec> MakeGlobalFlags() {
  return {
      Value("server", "HOST:PORT",
            absl::StrCat("the server (default $RBMREC_SERVER, else ",
                         kDefaultServer,
                         "); a gRPC target URI spreads the calls over "
                         "several servers round-robin: dns:///HOST:PORT "
                         "(every address of HOST) or ipv4:A:P,B:P")),
      Bool("json", "print exactly one JSON object on stdout"),
      Value("timeout", "SECONDS",
            absl::StrCat("deadline of each request (default ",
                         kDefaultTimeoutSeconds,
                         "; import and train streams have none)")),
      Value("tls-ca", "FILE",
            "use TLS, verifying the server's certificate against this PEM CA "
            "(default $RBMREC_TLS_CA; without it: no TLS)"),
      Value("tls-cert", "FILE",
            "client certificate (PEM) for a server that requires one (mTLS; "
            "default $RBMREC_TLS_CERT); needs --tls-key"),
      Value("tls-key", "FILE",
            "private key (PEM) of --tls-cert (default $RBMREC_TLS_KEY)"),
      Value("tls-server-name", "NAME",
            "the name expected in the server's certificate (default "
            "$RBMREC_TLS_SERVER_NAME, else the host of --server)"),
      Value("token-file", "FILE",
            "send the token on the first line of FILE with every request "
            "(default: $RBMREC_TOKEN, the token itself, else "
            "$RBMREC_TOKEN_FILE); health needs none. A flag given as '' "
            "ignores its variable"),
      FlagSpec{"help", 'h', FlagKind::kBool, "", "show help and exit"},
  };
}

}  // namespace

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec>* const kCommands =
      new std::vector<CommandSpec>(MakeCommands());
  return *kCommands;
}

const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec>* const kFlags =
      new std::vector<FlagSpec>(MakeGlobalFlags());
  return *kFlags;
}

absl::string_view ProgramDescription() {
  return "rbmrec: client of the rbmrec collaborative-filtering server.";
}

absl::string_view ProgramFooter() {
  return "Run 'rbmrec COMMAND --help' for a command's options; global "
         "options go before or after the command.\n"
         "Exit codes: 0 ok, 1 usage error or unreadable input, 2 RPC error "
         "or failed outcome, 3 rows rejected by the server (import, unless "
         "--allow-rejected).";
}

}  // namespace rbmrec::client
