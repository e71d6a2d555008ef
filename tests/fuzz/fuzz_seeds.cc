// Writes the seed corpora of the fuzz targets: fuzz_seeds OUTDIR creates
// OUTDIR/fuzz_readers, OUTDIR/fuzz_model_file and (when built with the
// service) OUTDIR/fuzz_requests. Deterministic: the same build writes the
// same files. bench/fuzz.sh does not run it; the output is committed under
// tests/fuzz/corpus/ (regenerate it when a format changes).

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/fit.h"
#include "core/model_file.h"
#include "tests/core/synthetic.h"
#include "tests/fuzz/fuzz_data.h"

#ifdef RBMREC_FUZZ_SEEDS_REQUESTS
#include "proto/rbmrec.pb.h"
#endif

namespace rbmrec::fuzz {
namespace {

bool Write(const std::string& dir, const std::string& name,
           const std::string& bytes) {
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz_seeds: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

// fuzz_readers input: a mode byte (format, or 7 = items) then the text.
std::string Reader(int mode, const std::string& text) {
  return std::string(1, static_cast<char>(mode)) + text;
}

bool ReaderSeeds(const std::string& dir) {
  const std::vector<std::pair<std::string, std::string>> seeds = {
      {"auto_udata", Reader(0,
                            "196\t242\t3\t881250949\n186\t302\t3\t891717742"
                            "\n22\t377\t1\t878887116\n")},
      {"auto_dat", Reader(0,
                          "1::1193::5::978300760\n1::661::3::978302109\n"
                          "2::3068::4::978299000\n")},
      {"auto_mlcsv", Reader(0,
                            "userId,movieId,rating,timestamp\n1,1,4.0,"
                            "964982703\n1,3,4.0,964981247\n2,6,3.5,1\n")},
      {"auto_csv_header", Reader(0,
                                 "user,item,rating\nalice,film 1,5\n"
                                 "bob,\"film, 2\",3\r\n")},
      {"auto_tsv", Reader(0, "user\titem\trating\nann\tx\t2.5\nbo\ty\t1\n")},
      {"auto_space", Reader(0, "1 1 2.0\n1 2 4.0\n2 1 3.5\n")},
      {"udata", Reader(1, "1\t1\t5\t874965758\n1\t2\t3\t876893171\n\n")},
      {"dat", Reader(2, "3::1196::4::978297539\n3::1210::4::978297600\n")},
      {"mlcsv", Reader(3, "userId,movieId,rating,timestamp\n7,10,0.5,1\n")},
      {"csv", Reader(4, "u1,i1,1\nu1,i2,5,1234567890\nu2,i1,3\n")},
      {"tsv", Reader(5, "u1\ti1\t4\n u2 \t i2 \t 2 \n")},
      {"space", Reader(6, "10 20 3\n11 21 4.5\n")},
      {"csv_multiline", Reader(4,
                               "\"user\nid\",item,rating\r\nu1,\"i\n1\",4\n"
                               "\"u2,i2,0x4\nu3,i3,3\n")},
      // Hostile inputs: hex and near-step ratings,
      // a bidi override and a line separator in ids, an empty file.
      {"hostile_ratings", Reader(4,
                                 "u1,i1,0x4\nu1,i2,4.0000001\nu1,i3,4.000001"
                                 "\nu\xe2\x80\xae"
                                 "evil,i4,5\nu\xe2\x80\xa8"
                                 "x,i5,3\nu2,i6,inf\n")},
      {"empty", Reader(0, "")},
      {"lenient_mix", Reader(0,
                             "1\t2\t3\t4\nbad line\n5\t6\tx\t8\n9\t9\t1\t"
                             "1\n")},
      {"item_uitem", Reader(7,
                            "1|Toy Story (1995)|01-Jan-1995||http://us.imdb"
                            ".com/M/title-exact?Toy%20Story%20(1995)|0|0|0|"
                            "1|1|1|0|0|0|0|0|0|0|0|0|0|0|0|0\n2|GoldenEye "
                            "(1995)|01-Jan-1995||x|0|1|1|0|0|0|0|0|0|0|0|0|"
                            "0|0|0|0|1|0|0\n3|Caf\xe9 (1995)|||x|0\n")},
      {"item_moviesdat", Reader(7,
                                "1::Toy Story (1995)::Animation|Children's"
                                "|Comedy\n2::Jumanji (1995)::Adventure\n")},
      {"item_moviescsv", Reader(7,
                                "movieId,title,genres\n1,Toy Story (1995),"
                                "Adventure|Animation\n2,\"Heat, The (1995)"
                                "\",(no genres listed)\n")},
  };
  for (const auto& [name, bytes] : seeds) {
    if (!Write(dir, name, bytes)) return false;
  }
  return true;
}

bool ModelSeeds(const std::string& dir) {
  const testing_data::Split data =
      testing_data::PlantedRatings(12, 8, 2, 0.6, 3);
  struct Variant {
    const char* name;
    int hidden;
    int ensemble;
    bool item_based;
  };
  for (const Variant& v : {Variant{"tiny_irbm_2members.rbm", 3, 2, true},
                           Variant{"tiny_urbm.rbm", 2, 1, false}}) {
    TrainOptions o;
    o.hidden = v.hidden;
    o.max_epochs = 2;
    o.ensemble = v.ensemble;
    o.item_based = v.item_based;
    o.threads = 1;
    o.mf_factors = 4;  // the matrix factorisation, kept small
    // The rated RBM kept small too, factored so that the loader finds its
    // low-rank form: at the size rule's 50 hidden units the loader's F x F
    // eigensolver took ~17x the time of an execution with these 16.
    o.rated_hidden = 16;
    o.rated_factors = 2;
    absl::StatusOr<Model> m = FitModel(data.train, o);
    if (!m.ok()) {
      std::fprintf(stderr, "fuzz_seeds: training failed: %s\n",
                   m.status().ToString().c_str());
      return false;
    }
    if (!Write(dir, v.name, SerializeModel(*m))) return false;
  }
  return true;
}

#ifdef RBMREC_FUZZ_SEEDS_REQUESTS
std::string Request(Rpc rpc, const google::protobuf::Message& m) {
  return std::string(1, static_cast<char>(RpcByte(rpc))) +
         m.SerializeAsString();
}

bool RequestSeeds(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> seeds;
  {
    v1::AddRatingsRequest r;
    for (int i = 0; i < 4; ++i) {
      v1::Rating* row = r.add_ratings();
      row->set_user_id(U(i));
      row->set_item_id(I(i + 1));
      row->set_rating(1 + i);
      row->set_timestamp(1700000000 + i);
    }
    v1::Rating* fresh = r.add_ratings();
    fresh->set_user_id("new-user");
    fresh->set_item_id("new-item");
    fresh->set_rating(4.5);  // off the 1..5 step-1 scale: rejected
    seeds.emplace_back("add_ratings", Request(Rpc::kAddRatings, r));
  }
  {
    v1::PredictRatingsRequest r;
    r.set_user_id(U(3));
    r.add_item_ids(I(0));
    r.add_item_ids(I(25));
    r.add_item_ids("unknown-item");
    r.set_method(v1::MEAN_FIELD);
    seeds.emplace_back("predict_user", Request(Rpc::kPredictRatings, r));
    r.clear_user_id();
    v1::ItemRating* a = r.add_ratings();
    a->set_item_id(I(1));
    a->set_rating(5);
    r.set_method(v1::EXACT);
    seeds.emplace_back("predict_adhoc", Request(Rpc::kPredictRatings, r));
  }
  {
    v1::RecommendRequest r;
    r.set_user_id(U(4));
    r.set_n(5);
    seeds.emplace_back("recommend", Request(Rpc::kRecommend, r));
    r.set_rank_by(v1::PROBABILITY_AT_LEAST);
    r.set_threshold(4);
    r.set_method(v1::EXACT);
    v1::ItemRating* a = r.add_ratings();
    a->set_item_id(I(2));
    a->set_rating(1);
    seeds.emplace_back("recommend_threshold", Request(Rpc::kRecommend, r));
  }
  {
    v1::TrainRequest r;
    r.mutable_options()->set_hidden(3);
    r.mutable_options()->set_epochs(1);
    r.mutable_options()->set_batch_size(7);
    r.mutable_options()->set_learning_rate(0.1);
    r.mutable_options()->set_validation_fraction(0);
    r.set_activation(v1::ACTIVATE_NEVER);
    seeds.emplace_back("train", Request(Rpc::kTrain, r));
    r.mutable_options()->set_momentum(1.5);
    seeds.emplace_back("train_bad_momentum", Request(Rpc::kTrain, r));
  }
  {
    v1::PutItemsRequest r;
    v1::Item* it = r.add_items();
    it->set_item_id(I(0));
    it->set_title("Zero (1999)");
    (*it->mutable_attributes())["genres"] = "Drama|Comedy";
    seeds.emplace_back("put_items", Request(Rpc::kPutItems, r));
  }
  {
    v1::DeleteRatingsRequest r;
    r.set_user_id(U(5));
    r.add_item_ids(I(0));
    r.add_item_ids(I(1));
    seeds.emplace_back("delete_ratings", Request(Rpc::kDeleteRatings, r));
  }
  {
    v1::DeleteUserRequest r;
    r.set_user_id(U(6));
    seeds.emplace_back("delete_user", Request(Rpc::kDeleteUser, r));
  }
  {
    // Hostile inputs: ids with a bidi override and a
    // line separator, a near-step rating, a title over the limit.
    v1::AddRatingsRequest r;
    v1::Rating* row = r.add_ratings();
    row->set_user_id(
        "u\xe2\x80\xae"
        "evil");
    row->set_item_id(I(1));
    row->set_rating(4.0000001);
    row = r.add_ratings();
    row->set_user_id(U(1));
    row->set_item_id("i\xe2\x80\xa8x");
    row->set_rating(4.000001);
    seeds.emplace_back("add_ratings_hostile", Request(Rpc::kAddRatings, r));
    v1::PutItemsRequest items;
    v1::Item* it = items.add_items();
    it->set_item_id(I(2));
    it->set_title(std::string(2000, 't'));
    seeds.emplace_back("put_items_long_title", Request(Rpc::kPutItems, items));
    v1::DeleteRatingsRequest del;
    del.set_user_id("never-seen");
    del.add_item_ids(I(0));
    seeds.emplace_back("delete_ratings_unknown",
                       Request(Rpc::kDeleteRatings, del));
  }
  {
    v1::ActivateModelRequest r;
    r.set_version(1);
    seeds.emplace_back("activate", Request(Rpc::kActivateModel, r));
  }
  seeds.emplace_back("list_models",
                     Request(Rpc::kListModels, v1::ListModelsRequest()));
  seeds.emplace_back("get_stats",
                     Request(Rpc::kGetStats, v1::GetStatsRequest()));
  seeds.emplace_back(
      "cancel", Request(Rpc::kCancelTraining, v1::CancelTrainingRequest()));
  {
    v1::DeleteModelRequest r;
    r.set_version(1);
    seeds.emplace_back("delete_model", Request(Rpc::kDeleteModel, r));
  }
  {
    v1::PinModelRequest r;
    r.set_version(1);
    r.set_pinned(true);
    seeds.emplace_back("pin_model", Request(Rpc::kPinModel, r));
  }
  {
    v1::PruneModelsRequest r;
    r.set_keep_full(1);
    r.set_keep_online(0);
    seeds.emplace_back("prune_models", Request(Rpc::kPruneModels, r));
  }
  {
    v1::SimilarItemsRequest r;
    r.add_item_ids(I(1));
    r.set_n(5);
    r.set_user_id(U(0));
    seeds.emplace_back("similar_items", Request(Rpc::kSimilarItems, r));
  }
  {
    v1::GetUserRatingsRequest r;
    r.set_user_id(U(0));
    r.set_offset(1);
    r.set_limit(3);
    seeds.emplace_back("get_user_ratings", Request(Rpc::kGetUserRatings, r));
  }
  {
    v1::GetItemRequest r;
    r.set_item_id(I(1));
    seeds.emplace_back("get_item", Request(Rpc::kGetItem, r));
  }
  for (const auto& [name, bytes] : seeds) {
    if (!Write(dir, name, bytes)) return false;
  }
  return true;
}
#endif

}  // namespace
}  // namespace rbmrec::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds OUTDIR\n");
    return 2;
  }
  const std::string out = argv[1];
  bool ok = rbmrec::fuzz::ReaderSeeds(out + "/fuzz_readers") &&
            rbmrec::fuzz::ModelSeeds(out + "/fuzz_model_file");
#ifdef RBMREC_FUZZ_SEEDS_REQUESTS
  ok = ok && rbmrec::fuzz::RequestSeeds(out + "/fuzz_requests");
#endif
  return ok ? 0 : 1;
}
