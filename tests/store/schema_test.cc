// Schema versions and migrations of the SQLite store (store/schema.h), on
// files written the way older builds wrote them.

#include "store/schema.h"

#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"

namespace rbmrec::store {
namespace {

using ::rbmrec::store::testing_util::Flatten;
using ::rbmrec::store::testing_util::RawDb;
using ::rbmrec::store::testing_util::ScratchDir;
using ::testing::ElementsAre;

// The schema of version 1 exactly as builds with kSchemaVersion 1 created
// it (journal_mode=WAL, auto_vacuum=NONE).
constexpr const char* kSchemaV1 = R"sql(
PRAGMA journal_mode=WAL;
CREATE TABLE users(
  idx INTEGER PRIMARY KEY AUTOINCREMENT,
  ext_id TEXT UNIQUE NOT NULL
);
CREATE TABLE items(
  idx INTEGER PRIMARY KEY AUTOINCREMENT,
  ext_id TEXT UNIQUE NOT NULL,
  title TEXT,
  attributes TEXT  -- a JSON object, or NULL
);
CREATE TABLE ratings(
  user_idx INTEGER NOT NULL REFERENCES users(idx),
  item_idx INTEGER NOT NULL REFERENCES items(idx),
  rating REAL NOT NULL,
  ts INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(user_idx, item_idx)
) WITHOUT ROWID;
CREATE TABLE models(
  version INTEGER PRIMARY KEY AUTOINCREMENT,
  created_unix_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  n_users INTEGER NOT NULL,
  n_items INTEGER NOT NULL,
  n_ratings INTEGER NOT NULL,
  metrics TEXT,  -- a JSON object, or NULL
  size_bytes INTEGER NOT NULL,
  model BLOB NOT NULL
);
CREATE TABLE meta(
  key TEXT PRIMARY KEY,
  value TEXT
);
PRAGMA user_version = 1;
)sql";

// Creates a version 1 database at `path` with ratings, items and model
// versions 1..4 of `blob_bytes` random bytes each, version 4 deleted (so the
// AUTOINCREMENT counter is above every stored version) and 2 active.
void WriteV1Database(const std::string& path, int blob_bytes) {
  RawDb raw(path);
  ASSERT_EQ(raw.Exec(kSchemaV1), SQLITE_OK);
  ASSERT_EQ(raw.Exec("INSERT INTO users(ext_id) VALUES('alice'),('bob');"
                     "INSERT INTO items(ext_id, title) VALUES('x','The X'),"
                     "('y',NULL);"
                     "INSERT INTO ratings VALUES(1,1,4.5,881250949),"
                     "(1,2,2,0),(2,2,3,17);"),
            SQLITE_OK);
  for (int v = 1; v <= 4; ++v) {
    ASSERT_EQ(raw.Exec(absl::StrCat(
                  "INSERT INTO models(created_unix_ms, kind, n_users, n_items,"
                  " n_ratings, metrics, size_bytes, model) VALUES(",
                  1000 + v, ", '", v == 3 ? "online" : "full", "', 2, 2, 3, ",
                  v == 1 ? "'{\"rmse\": 0.9}'" : "NULL", ", ", blob_bytes,
                  ", randomblob(", blob_bytes, "))")),
              SQLITE_OK);
  }
  ASSERT_EQ(raw.Exec("DELETE FROM models WHERE version=4;"
                     "INSERT INTO meta VALUES('active_model_version','2');"),
            SQLITE_OK);
  ASSERT_EQ(raw.QueryInt("PRAGMA auto_vacuum"), 0);
}

TEST(SchemaTest, MigratesAVersion1File) {
  ScratchDir dir;
  const std::string path = dir.File("v1.db");
  ASSERT_NO_FATAL_FAILURE(WriteV1Database(path, 5000));
  std::string blob2;
  {
    RawDb raw(path);
    blob2 = raw.QueryText("SELECT hex(model) FROM models WHERE version=2");
  }
  // Read-only: not migrated, a clear error.
  StoreOptions ro;
  ro.read_only = true;
  absl::StatusOr<std::unique_ptr<Store>> old = Store::Open(path, ro);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(old.status().message()),
              testing::HasSubstr("schema version 1"));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  {
    RawDb raw(path);
    EXPECT_EQ(raw.QueryInt("PRAGMA user_version"), kSchemaVersion);
    EXPECT_EQ(raw.QueryInt("PRAGMA auto_vacuum"), 2);  // INCREMENTAL
    EXPECT_EQ(raw.QueryText("PRAGMA journal_mode"), "wal");
    // pinned sits before the blob, which stays the last column.
    EXPECT_EQ(raw.QueryText("SELECT group_concat(name, ',') FROM "
                            "pragma_table_info('models')"),
              "version,created_unix_ms,kind,n_users,n_items,n_ratings,"
              "metrics,size_bytes,pinned,validation_rmse,epochs,"
              "train_seconds,model");
    EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM sqlite_schema "
                           "WHERE name IN ('models_v2', 'models_v3')"),
              0);
    EXPECT_EQ(raw.QueryText("SELECT hex(model) FROM models WHERE version=2"),
              blob2);
    EXPECT_EQ(raw.QueryText("PRAGMA integrity_check"), "ok");
  }
  ASSERT_OK_AND_ASSIGN(std::vector<ModelInfo> models, store->ListModels());
  ASSERT_EQ(models.size(), 3u);
  EXPECT_EQ(models[0].version, 3);
  EXPECT_EQ(models[0].kind, "online");
  EXPECT_EQ(models[1].version, 2);
  EXPECT_TRUE(models[1].active);
  EXPECT_EQ(models[2].version, 1);
  EXPECT_EQ(models[2].metrics_json, R"({"rmse": 0.9})");
  EXPECT_EQ(models[2].created_unix_ms, 1001);
  EXPECT_EQ(models[2].size_bytes, 5000);
  for (const ModelInfo& m : models) EXPECT_FALSE(m.pinned);
  ASSERT_OK_AND_ASSIGN(std::string blob, store->LoadModelBlob(1));
  EXPECT_EQ(blob.size(), 5000u);

  // Ratings, timestamps and titles are intact.
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store->ReadSnapshot());
  EXPECT_THAT(Flatten(snap),
              ElementsAre("alice/x=4.5", "alice/y=2", "bob/y=3"));
  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> alice,
                       store->GetUserRatings("alice"));
  ASSERT_EQ(alice.size(), 2u);
  EXPECT_EQ(alice[0].timestamp, 881250949);
  const std::vector<std::string> q = {"x", "y"};
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> titles, store->GetTitles(q));
  EXPECT_THAT(titles, ElementsAre("The X", ""));

  // The new features work on the migrated file; deleted version 4 is not
  // reused.
  ASSERT_OK(store->PinModel(1, true));
  ModelInfo meta;
  meta.kind = "full";
  ASSERT_OK_AND_ASSIGN(int64_t v, store->InsertModel(meta, "new", false));
  EXPECT_EQ(v, 5);
  ASSERT_OK_AND_ASSIGN(PruneResult pruned,
                       store->PruneModels(RetentionPolicy{1, 0}));
  EXPECT_THAT(pruned.deleted_versions, ElementsAre(3));
  ASSERT_OK_AND_ASSIGN(models, store->ListModels());
  ASSERT_EQ(models.size(), 3u);
  EXPECT_TRUE(models[2].pinned);

  // Reopening does not migrate or vacuum again.
  store.reset();
  ASSERT_OK_AND_ASSIGN(store, Store::Open(path));
  ASSERT_OK_AND_ASSIGN(models, store->ListModels());
  EXPECT_EQ(models.size(), 3u);
}

// A version 2 database (the models table as builds with kSchemaVersion 2
// created it: the training's metrics only in the metrics JSON) with model
// versions 1..5, version 3 pinned, version 6 deleted.
void WriteV2Database(const std::string& path) {
  RawDb raw(path);
  ASSERT_EQ(raw.Exec(kSchemaV1), SQLITE_OK);
  ASSERT_EQ(raw.Exec(R"sql(
DROP TABLE models;
CREATE TABLE models(
  version INTEGER PRIMARY KEY AUTOINCREMENT,
  created_unix_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  n_users INTEGER NOT NULL,
  n_items INTEGER NOT NULL,
  n_ratings INTEGER NOT NULL,
  metrics TEXT,  -- a JSON object, or NULL
  size_bytes INTEGER NOT NULL,
  pinned INTEGER NOT NULL DEFAULT 0,  -- 1: never removed by retention
  model BLOB NOT NULL
);
INSERT INTO models(created_unix_ms, kind, n_users, n_items, n_ratings,
                   metrics, size_bytes, pinned, model) VALUES
  (1001, 'full', 2, 2, 3, '{"validation_rmse":0.87654321012345678,'
   || '"epochs":12,"train_seconds":3.250,"base_version":0}', 3, 0, 'ab1'),
  (1002, 'online', 2, 2, 3, '{"validation_rmse":0,"epochs":0,'
   || '"train_seconds":0,"base_version":1}', 3, 0, 'ab2'),
  (1003, 'full', 2, 2, 3, NULL, 3, 1, 'ab3'),
  (1004, 'full', 2, 2, 3, '{"rmse": 0.9}', 3, 0, 'ab4'),
  (1005, 'full', 2, 2, 3, '{"validation_rmse":"0.5","epochs":7}', 3, 0, 'ab5'),
  (1006, 'full', 2, 2, 3, NULL, 3, 0, 'ab6');
DELETE FROM models WHERE version = 6;
INSERT INTO meta VALUES('active_model_version', '1');
PRAGMA user_version = 2;
)sql"),
            SQLITE_OK);
}

TEST(SchemaTest, MigratesTheMetricsOfAVersion2FileIntoColumns) {
  ScratchDir dir;
  const std::string path = dir.File("v2.db");
  ASSERT_NO_FATAL_FAILURE(WriteV2Database(path));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  {
    RawDb raw(path);
    EXPECT_EQ(raw.QueryInt("PRAGMA user_version"), kSchemaVersion);
    EXPECT_EQ(raw.QueryText("SELECT group_concat(name, ',') FROM "
                            "pragma_table_info('models')"),
              "version,created_unix_ms,kind,n_users,n_items,n_ratings,"
              "metrics,size_bytes,pinned,validation_rmse,epochs,"
              "train_seconds,model");
    EXPECT_EQ(raw.QueryText("SELECT model FROM models WHERE version=5"), "ab5");
    EXPECT_EQ(raw.QueryText("PRAGMA integrity_check"), "ok");
  }
  ASSERT_OK_AND_ASSIGN(std::vector<ModelInfo> models, store->ListModels());
  ASSERT_EQ(models.size(), 5u);
  // Newest first: versions 5..1.
  const ModelInfo& v1 = models[4];
  EXPECT_EQ(v1.version, 1);
  EXPECT_TRUE(v1.active);
  EXPECT_EQ(v1.validation_rmse, 0.87654321012345678);
  EXPECT_EQ(v1.epochs, 12);
  EXPECT_EQ(v1.train_seconds, 3.25);
  EXPECT_EQ(v1.metrics_json,
            R"({"validation_rmse":0.87654321012345678,"epochs":12,)"
            R"("train_seconds":3.250,"base_version":0})");
  EXPECT_EQ(models[3].kind, "online");
  EXPECT_EQ(models[3].validation_rmse, 0);
  EXPECT_EQ(models[3].epochs, 0);
  EXPECT_TRUE(models[2].pinned);
  EXPECT_EQ(models[2].validation_rmse, 0);  // no metrics
  EXPECT_EQ(models[2].metrics_json, "");
  EXPECT_EQ(models[1].validation_rmse, 0);  // other keys only
  EXPECT_EQ(models[1].metrics_json, R"({"rmse": 0.9})");
  EXPECT_EQ(models[0].validation_rmse, 0);  // not a number
  EXPECT_EQ(models[0].epochs, 7);
  // Deleted version 6 is not reused; new versions store the fields.
  ModelInfo meta;
  meta.kind = "full";
  meta.validation_rmse = 0.91;
  meta.epochs = 20;
  meta.train_seconds = 1.5;
  ASSERT_OK_AND_ASSIGN(int64_t v, store->InsertModel(meta, "new", false));
  EXPECT_EQ(v, 7);
  store.reset();
  ASSERT_OK_AND_ASSIGN(store, Store::Open(path));
  ASSERT_OK_AND_ASSIGN(models, store->ListModels());
  ASSERT_EQ(models.size(), 6u);
  EXPECT_EQ(models[0].validation_rmse, 0.91);
  EXPECT_EQ(models[0].epochs, 20);
  EXPECT_EQ(models[0].train_seconds, 1.5);
  EXPECT_EQ(models[0].metrics_json, "");
}

TEST(SchemaTest, MigratesAVersion3FileToTheItemCatalogue) {
  ScratchDir dir;
  const std::string path = dir.File("v3.db");
  { ASSERT_OK(Store::Open(path).status()); }
  {
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("DROP TABLE views;"
                       "ALTER TABLE items DROP COLUMN categories;"
                       "ALTER TABLE items DROP COLUMN hidden;"
                       "INSERT INTO items(ext_id, title) VALUES('x','The X'),"
                       "('y',NULL);"
                       "PRAGMA user_version = 3;"),
              SQLITE_OK);
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  {
    RawDb raw(path);
    EXPECT_EQ(raw.QueryInt("PRAGMA user_version"), kSchemaVersion);
    EXPECT_EQ(raw.QueryText("SELECT group_concat(name, ',') FROM "
                            "pragma_table_info('items')"),
              "idx,ext_id,title,attributes,categories,hidden");
  }
  ASSERT_OK_AND_ASSIGN(std::vector<CatalogueRow> cat, store->ReadCatalogue());
  EXPECT_TRUE(cat.empty());
  const std::vector<ItemRow> items = {{"y", "Y", "", {"Drama"}, true}};
  ASSERT_OK(store->PutItems(items));
  ASSERT_OK_AND_ASSIGN(cat, store->ReadCatalogue());
  ASSERT_EQ(cat.size(), 1u);
  EXPECT_EQ(cat[0].item, "y");
  EXPECT_THAT(cat[0].categories, ElementsAre("Drama"));
  EXPECT_TRUE(cat[0].hidden);
  const std::vector<std::string> query = {"x"};
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> titles,
                       store->GetTitles(query));
  EXPECT_THAT(titles, ElementsAre("The X"));
}

TEST(SchemaTest, MigratesAVersion4FileToViews) {
  ScratchDir dir;
  const std::string path = dir.File("v4.db");
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
    ASSERT_TRUE(store->UpsertRatings({RatingRow{"u", "a", 4.0, 7}}).ok());
  }
  {
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("DROP TABLE views; PRAGMA user_version = 4;"),
              SQLITE_OK);
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  {
    RawDb raw(path);
    EXPECT_EQ(raw.QueryInt("PRAGMA user_version"), kSchemaVersion);
    EXPECT_EQ(raw.QueryText("SELECT group_concat(name, ',') FROM "
                            "pragma_table_info('views')"),
              "user_idx,item_idx,ts");
  }
  ASSERT_OK_AND_ASSIGN(Stats stats, store->GetStats());
  EXPECT_EQ(stats.ratings, 1);
  EXPECT_EQ(stats.views, 0);
  RatingRow view{"u", "b", 0.0, 9};
  view.view = true;
  ASSERT_TRUE(store->UpsertRatings({view}).ok());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> uv, store->GetUserViews("u"));
  EXPECT_THAT(uv, ElementsAre("b"));
}

// The one-time VACUUM that converts an existing file to incremental vacuum:
// its time on a file with 64 MiB of model blobs (printed; the bound is loose).
TEST(SchemaTest, ConvertingAVersion1FileTakesTimeProportionalToItsSize) {
  ScratchDir dir;
  const std::string path = dir.File("big_v1.db");
  ASSERT_NO_FATAL_FAILURE(WriteV1Database(path, 16 << 20));
  const auto bytes = std::filesystem::file_size(path);  // WAL checkpointed
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  ASSERT_OK_AND_ASSIGN(Stats stats, store->GetStats());
  std::printf(
      "[ PERF     ] migrating + vacuuming a version 1 file of %.1f MiB: "
      "%.0f ms (now %.1f MiB)\n",
      static_cast<double>(bytes) / 1048576.0, ms,
      static_cast<double>(stats.database_bytes) / 1048576.0);
  EXPECT_EQ(stats.model_versions, 3);
  EXPECT_LT(ms, 30000.0);
  // Deleting a version now gives its space back.
  ASSERT_OK_AND_ASSIGN(int64_t freed, store->DeleteModel(3));
  EXPECT_EQ(freed, 16 << 20);
  RawDb raw(path);
  EXPECT_LT(
      raw.QueryInt("PRAGMA page_count") * raw.QueryInt("PRAGMA page_size"),
      (32 << 20) + (1 << 20));
}

TEST(SchemaTest, NewDatabasesAreIncrementalFromTheStart) {
  ScratchDir dir;
  const std::string path = dir.File("new.db");
  { ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path)); }
  RawDb raw(path);
  EXPECT_EQ(raw.QueryInt("PRAGMA auto_vacuum"), 2);
  EXPECT_EQ(raw.QueryInt("PRAGMA user_version"), kSchemaVersion);
}

}  // namespace
}  // namespace rbmrec::store
