// Evidence at the experiments layer: pretraining seeds as variants, the report's intervals and
// chance marks from stored predictions, the runner storing predictions and the floor, the
// bag-of-words control (shuffled words stay at chance), and every claim's verdict on
// hand-made stores (supported, contradicted, inconclusive, not run).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "experiments/claims.h"
#include "experiments/config_loader.h"
#include "experiments/experiment.h"
#include "experiments/ranking.h"
#include "experiments/report.h"
#include "experiments/result_store.h"
#include "experiments/runner.h"
#include "experiments/synthetic_tasks.h"
#include "support/test_support.h"

using namespace experiments;
namespace fs = std::filesystem;

namespace {

class EvidenceTest : public test_support::TempDirTest {
  protected:
    EvidenceTest() : TempDirTest(test_support::per_test_name("tupe_evidence")) {}
};

// A store with one experiment; pretrain runs with validation curves and fine-tuning runs
// with predictions are added by the helpers.
struct HandStore {
    ResultStore store;
    int64_t experiment = 0;
    explicit HandStore(const fs::path& path) : store(ResultStore::open(path.string())) {
        experiment = store.get_or_create_experiment("hand", "hand.yaml", "name: hand\n");
    }
    // validation/loss at steps 0, 100, ..., 1000: from 8 down to `final`, reached linearly
    // by `reach_step` then flat.
    int64_t pretrain(const std::string& variant, int64_t seed, double final,
                     int64_t reach_step = 1000) {
        RunRecord r;
        r.experiment_id = experiment;
        r.kind = "pretrain";
        r.name = variant + "@seed" + std::to_string(seed);
        r.variant = r.name;
        r.seed = seed;
        r.status = "finished";
        const int64_t id = store.upsert_run(r);
        std::vector<MetricPoint> points;
        for (int64_t step = 0; step <= 1000; step += 100) {
            const double f =
                std::min(1.0, static_cast<double>(step) / static_cast<double>(reach_step));
            points.push_back({"validation/loss", step, 8.0 + f * (final - 8.0), 0});
        }
        store.add_metrics(id, points);
        return id;
    }
    // A fine-tuning run on "syn-rte" (accuracy) whose dev predictions are right on the first
    // `correct` of n examples (gold alternates 0/1).
    void finetune(const std::string& variant, int64_t parent, int64_t seed, int n, int correct,
                  const std::string& task = "syn-rte") {
        RunRecord r;
        r.experiment_id = experiment;
        r.kind = "finetune";
        r.name = variant + "/" + task + "/seed" + std::to_string(seed);
        r.variant = variant;
        r.parent_run_id = parent;
        r.seed = seed;
        r.status = "finished";
        const int64_t id = store.upsert_run(r);
        PredictionSet p{id, "dev", {}, {}};
        for (int i = 0; i < n; ++i) {
            const double gold = i % 2;
            p.gold.push_back(gold);
            p.predicted.push_back(i < correct ? gold : 1 - gold);
        }
        store.set_predictions(p);
        GlueResultRecord g;
        g.run_id = id;
        g.task = task;
        g.split = "dev";
        g.metric = selection_metric(task);
        g.value = 100.0 * correct / n;
        g.checkpoint_step = 1000;
        g.lr = 1e-3;
        g.seed = seed;
        store.add_glue_result(g);
    }
};

const Claim& claim(const std::vector<Claim>& claims, const std::string& id) {
    for (const auto& c : claims)
        if (c.id == id) return c;
    throw std::runtime_error("no claim " + id);
}

}  // namespace

TEST(VariantGroup, StripsOnlyASeedSuffix) {
    EXPECT_EQ(variant_group("tupe-a@seed2"), "tupe-a");
    EXPECT_EQ(variant_group("tupe-a"), "tupe-a");
    EXPECT_EQ(variant_group("a@seedling"), "a@seedling");
    EXPECT_EQ(variant_group("x@seed"), "x@seed");
}

TEST_F(EvidenceTest, PretrainSeedsMakeOneVariantPerSeedWithItsGroup) {
    auto spec =
        load_experiment(write("s.yaml",
                              "name: s\nvariants: [bert-a, tupe-a]\npretrain_seeds: [3, 7]\n"
                              "train: {steps: 10}\nglue: {tasks: [syn-cola]}\n")
                            .string());
    ASSERT_EQ(spec.variants.size(), 4u);
    EXPECT_EQ(spec.variants[0].name, "bert-a@seed3");
    EXPECT_EQ(spec.variants[0].group, "bert-a");
    EXPECT_EQ(spec.variants[0].config.train.seed, 3u);
    EXPECT_EQ(spec.variants[3].name, "tupe-a@seed7");
    EXPECT_EQ(spec.variants[3].config.train.seed, 7u);
    EXPECT_EQ(spec.variants[3].config.model.preset, "tupe-a");
    // One seed is named like any other (one naming rule) and sets train.seed.
    auto one = load_experiment(
        write("o.yaml", "name: o\nvariants: [bert-a]\npretrain_seeds: [5]\n").string());
    ASSERT_EQ(one.variants.size(), 1u);
    EXPECT_EQ(one.variants[0].name, "bert-a@seed5");
    EXPECT_EQ(one.variants[0].group, "bert-a");
    EXPECT_EQ(one.variants[0].config.train.seed, 5u);
    try {
        load_experiment(
            write("d.yaml", "name: d\nvariants: [bert-a]\npretrain_seeds: [1, 1]\n").string());
        FAIL() << "expected ConfigError";
    } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("pretrain_seeds"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("d.yaml:3"), std::string::npos) << e.what();
    }
}

TEST_F(EvidenceTest, AVariantsOwnSeedsReplaceTheStudysAndKeepTheSeedNames) {
    // More seeds for the variants whose comparison is undecided, the others untouched.
    auto spec = load_experiment(
        write("m.yaml",
              "name: m\nvariants:\n  - bert-a\n  - {preset: tupe-a, seeds: [1, 2, 4]}\n"
              "  - {name: solo, preset: bert-r, seeds: [9]}\npretrain_seeds: [1, 2]\n")
            .string());
    std::vector<std::string> names;
    for (const auto& v : spec.variants)
        names.push_back(v.name + "=" + std::to_string(v.config.train.seed));
    EXPECT_EQ(names,
              (std::vector<std::string>{"bert-a@seed1=1", "bert-a@seed2=2", "tupe-a@seed1=1",
                                        "tupe-a@seed2=2", "tupe-a@seed4=4", "solo@seed9=9"}));
    EXPECT_EQ(spec.variants[4].group, "tupe-a");
    EXPECT_EQ(spec.variants[5].group, "solo");
    // Without pretrain_seeds, one variant with several seeds names them all.
    auto alone = load_experiment(
        write("a.yaml", "name: a\nvariants: [bert-a, {preset: tupe-a, seeds: [3, 5]}]\n").string());
    ASSERT_EQ(alone.variants.size(), 3u);
    EXPECT_EQ(alone.variants[0].name, "bert-a");
    EXPECT_EQ(alone.variants[2].name, "tupe-a@seed5");
    for (const char* bad : {"[]", "[2, 2]", "[-1]"}) {
        try {
            load_experiment(write("b.yaml", std::string("name: b\nvariants:\n  - {preset: "
                                                        "tupe-a, seeds: ") +
                                                bad + "}\n")
                                .string());
            FAIL() << "expected ConfigError for seeds: " << bad;
        } catch (const ConfigError& e) {
            EXPECT_NE(std::string(e.what()).find("variants.seeds"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("b.yaml:3"), std::string::npos) << e.what();
        }
    }
}

TEST_F(EvidenceTest, AVariantsOwnFineTuningSeedsReplaceTheStudysForItsFineTunedTasks) {
    // More fine-tuning seeds where a variant's cells are bimodal over fine-tuning runs; the
    // zero-shot pair tasks train nothing and stay one job per snapshot.
    auto spec = load_experiment(
        write("f.yaml",
              "name: f\nvariants: [bert-a, {preset: tupe-a, finetune_seeds: [1, 2, 3]}]\n"
              "train: {steps: 10}\ncheckpoints: [0.5, 1.0]\n"
              "glue: {tasks: [syn-cola, syn-bshift]}\nfinetune: {lrs: [1.0e-3], seeds: [1]}\n")
            .string());
    std::map<std::string, std::set<std::string>> seeds_of;  // variant/step/task -> seeds
    for (const auto& j : make_plan(spec))
        if (j.kind == Job::Kind::kFinetune)
            seeds_of[j.variant + "/" + std::to_string(j.checkpoint_step) + "/" + j.task].insert(
                std::to_string(j.seed));
    EXPECT_EQ(seeds_of.at("bert-a/10/syn-cola"), (std::set<std::string>{"1"}));
    EXPECT_EQ(seeds_of.at("tupe-a/5/syn-cola"), (std::set<std::string>{"1", "2", "3"}));
    EXPECT_EQ(seeds_of.at("tupe-a/10/syn-cola"), (std::set<std::string>{"1", "2", "3"}));
    EXPECT_EQ(seeds_of.at("tupe-a/10/syn-bshift"), (std::set<std::string>{"1"}));
    EXPECT_EQ(seeds_of.size(), 8u);
    try {
        load_experiment(
            write("b.yaml", "name: b\nvariants:\n  - {preset: tupe-a, finetune_seeds: [2, 2]}\n")
                .string());
        FAIL() << "expected ConfigError";
    } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("variants.finetune_seeds"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("b.yaml:3"), std::string::npos) << e.what();
    }
}

TEST(ShuffleWords, KeepsTheWordsAndDropsTheOrderDeterministically) {
    const std::string s = "the quick brown fox jumps over the lazy dog";
    const std::string a = shuffle_words(s, 1), b = shuffle_words(s, 1);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, s);
    auto words = [](const std::string& t) {
        std::multiset<std::string> w;
        std::istringstream in(t);
        for (std::string x; in >> x;) w.insert(x);
        return w;
    };
    EXPECT_EQ(words(a), words(s));
    EXPECT_EQ(shuffle_words("one", 1), "one");
    EXPECT_EQ(shuffle_words("  a\tb  ", 1).size(), 3u);
}

TEST_F(EvidenceTest, ReportIntervalsAndChanceFromStoredPredictions) {
    HandStore h(dir_ / "db.sqlite");
    // tupe-a: 2 pretraining seeds x 1 fine-tuning seed, 90% right on 400 examples.
    // bert-a: 51% right: its interval reaches the chance level (50%).
    for (int64_t seed : {1, 2}) {
        h.finetune("tupe-a@seed" + std::to_string(seed), h.pretrain("tupe-a", seed, 5.0), 1, 400,
                   360);
        h.finetune("bert-a@seed" + std::to_string(seed), h.pretrain("bert-a", seed, 6.0), 1, 400,
                   204);
    }
    const Report report = load_report(h.store, "hand");
    ASSERT_EQ(report.rows.size(), 2u);  // grouped by variant, seeds pooled
    const ReportRow& tupe = report.rows[0].variant == "tupe-a" ? report.rows[0] : report.rows[1];
    const ReportRow& bert = report.rows[0].variant == "bert-a" ? report.rows[0] : report.rows[1];
    const ReportCell& t = tupe.cells.at("syn-rte");
    EXPECT_EQ(t.n, 2);
    EXPECT_EQ(t.pretrain_seeds, 2);
    ASSERT_TRUE(t.has_interval && t.has_chance);
    EXPECT_DOUBLE_EQ(t.chance, 50.0);
    // Both seeds are identical here, so the interval is the examples' one: 90 +- 1.96 * 1.5.
    EXPECT_NEAR(t.lo, 90 - 1.96 * std::sqrt(0.9 * 0.1 / 400) * 100, 0.8);
    EXPECT_NEAR(t.hi, 90 + 1.96 * std::sqrt(0.9 * 0.1 / 400) * 100, 0.8);
    EXPECT_TRUE(t.above_chance);
    EXPECT_FALSE(bert.cells.at("syn-rte").above_chance);
    ASSERT_TRUE(tupe.average_cell.has_interval);
    const std::string table = render_report(report, ReportFormat::kTable);
    EXPECT_NE(table.find("chance"), std::string::npos) << table;
    EXPECT_NE(table.find("51.00 ["), std::string::npos) << table;
    EXPECT_NE(table.find("] ~"), std::string::npos) << table;  // bert-a marked
    const std::string csv = render_report(report, ReportFormat::kCsv);
    EXPECT_NE(csv.find("SYN-RTE,SYN-RTE_lo,SYN-RTE_hi,SYN-RTE_chance,SYN-RTE_above_chance"),
              std::string::npos)
        << csv;
    const std::string json = render_report(report, ReportFormat::kJson);
    EXPECT_NE(json.find("\"above_chance\": false"), std::string::npos);
    EXPECT_NE(json.find("\"ci95\""), std::string::npos);
    EXPECT_NE(render_report(report, ReportFormat::kLatex).find("$^{\\sim}$"), std::string::npos);
    EXPECT_NE(render_report(report, ReportFormat::kMarkdown).find(" ~"), std::string::npos);
}

TEST_F(EvidenceTest, ClaimsSupportedWhenTupeIsClearlyBetter) {
    HandStore h(dir_ / "db.sqlite");
    // TUPE-A ends ~1 nat lower on every seed and reaches BERT-A's final loss by step ~260.
    const double bert_final[] = {6.40, 6.45, 6.38}, tupe_final[] = {5.40, 5.48, 5.41};
    for (int s = 0; s < 3; ++s) {
        const int64_t b = h.pretrain("bert-a", s + 1, bert_final[s]);
        const int64_t t = h.pretrain("tupe-a", s + 1, tupe_final[s], 300);
        h.finetune("bert-a@seed" + std::to_string(s + 1), b, 1, 400, 210);
        h.finetune("tupe-a@seed" + std::to_string(s + 1), t, 1, 400, 330);
    }
    const auto claims = evaluate_claims(h.store, "hand", [](const engine::ModelConfig& c) {
        return static_cast<int64_t>(c.preset == "tupe-a" ? 101 : 100);
    });
    EXPECT_EQ(claim(claims, "1").verdict, Verdict::kSupported) << claim(claims, "1").evidence;
    EXPECT_EQ(claim(claims, "2").verdict, Verdict::kSupported) << claim(claims, "2").evidence;
    // The order claims are about three adjacent pairs: one pair run is not the claim.
    EXPECT_EQ(claim(claims, "3a").verdict, Verdict::kPartlyTested);
    EXPECT_NE(claim(claims, "3a").evidence.find("1 of 3 pairs (tupe-r, bert-r not run)"),
              std::string::npos)
        << claim(claims, "3a").evidence;
    EXPECT_EQ(claim(claims, "3b").verdict, Verdict::kPartlyTested) << claim(claims, "3b").evidence;
    // The task average's test again task by task (one task here: SYN-RTE, 82.5 vs 52.5).
    const auto& d3b = claim(claims, "3b").details;
    ASSERT_EQ(d3b.size(), 2u);
    EXPECT_EQ(
        d3b[1].rfind("per task, tupe-a - bert-a: above 0 on 1 of 1, below 0 on 0 (SYN-RTE +", 0),
        0u)
        << d3b[1];
    EXPECT_EQ(claim(claims, "4").verdict, Verdict::kNotRun);  // no tupe-a-tie-cls
    EXPECT_EQ(claim(claims, "5").verdict, Verdict::kNotRun);  // no analysis artifacts
    EXPECT_EQ(claim(claims, "6").verdict, Verdict::kNotRun);
    EXPECT_EQ(claim(claims, "7").verdict, Verdict::kSupported);  // +1%
    EXPECT_NE(claim(claims, "1").evidence.find("3 seed(s)"), std::string::npos)
        << claim(claims, "1").evidence;
    const std::string json = render_claims("hand", claims, ClaimsFormat::kJson);
    EXPECT_NE(json.find("\"verdict\": \"not run\""), std::string::npos);
    EXPECT_NE(render_claims("hand", claims, ClaimsFormat::kTable).find("partly tested"),
              std::string::npos);
    // With all four variants in the paper's order, every pair is run and 3a is supported.
    const double tupe_r_final[] = {5.00, 5.05, 4.98}, bert_r_final[] = {5.90, 5.95, 5.88};
    for (int s = 0; s < 3; ++s) {
        h.pretrain("tupe-r", s + 1, tupe_r_final[s], 300);
        h.pretrain("bert-r", s + 1, bert_r_final[s]);
    }
    const auto all_four = evaluate_claims(h.store, "hand");
    EXPECT_EQ(claim(all_four, "3a").verdict, Verdict::kSupported) << claim(all_four, "3a").evidence;
    EXPECT_EQ(claim(all_four, "3a").details.size(), 3u);
    EXPECT_EQ(claim(all_four, "3a").evidence.find("of 3 pairs"), std::string::npos);
}

// Four variants, 3 seeds: two near 5.4 nats and two near 6.4, each pair of neighbours within
// seed noise. The ranking tells the two levels apart (every cross pair 1 nat apart on every
// seed) and not the neighbours: groups a, a, b, b. Holm never lowers a p-value. On the tasks
// the same split holds: 330 against 210 of 400 correct.
TEST_F(EvidenceTest, RankingGroupsWhatTheCorrectedPairwiseTestsCannotTellApart) {
    HandStore h(dir_ / "db.sqlite");
    const std::map<std::string, std::vector<double>> finals = {{"va", {5.40, 5.45, 5.42}},
                                                               {"vb", {5.41, 5.47, 5.40}},
                                                               {"vc", {6.40, 6.45, 6.41}},
                                                               {"vd", {6.41, 6.44, 6.43}}};
    for (const auto& [name, losses] : finals)
        for (int s = 0; s < 3; ++s) {
            const int64_t id = h.pretrain(name, s + 1, losses[static_cast<size_t>(s)]);
            const bool good = name == "va" || name == "vb";
            h.finetune(name + "@seed" + std::to_string(s + 1), id, 1, 400, good ? 330 : 210);
        }
    const auto rankings = rank_variants(h.store, "hand");
    ASSERT_EQ(rankings.size(), 2u);
    const Ranking& loss = rankings[0];
    ASSERT_EQ(loss.variants.size(), 4u);
    EXPECT_EQ(loss.variants[0].variant, "va");
    EXPECT_EQ(loss.variants[3].variant, "vd");
    EXPECT_EQ(loss.variants[0].seeds, 3);
    EXPECT_NEAR(loss.variants[0].value, (5.40 + 5.45 + 5.42) / 3, 1e-9);
    EXPECT_LT(loss.variants[0].lo, loss.variants[0].value);
    EXPECT_EQ(loss.variants[0].groups, "a");
    EXPECT_EQ(loss.variants[1].groups, "a");
    EXPECT_EQ(loss.variants[2].groups, "b");
    EXPECT_EQ(loss.variants[3].groups, "b");
    ASSERT_EQ(loss.pairs.size(), 6u);
    int apart = 0;
    for (const auto& p : loss.pairs) {
        EXPECT_GE(p.p_holm, p.p) << p.better << " vs " << p.worse;
        apart += p.apart;
        const bool cross =
            (p.better == "va" || p.better == "vb") == (p.worse == "vc" || p.worse == "vd");
        EXPECT_EQ(p.apart, cross) << p.better << " vs " << p.worse << ": p " << p.p;
    }
    EXPECT_EQ(apart, 4);
    const Ranking& tasks = rankings[1];
    ASSERT_EQ(tasks.variants.size(), 4u);
    EXPECT_FALSE(tasks.lower_is_better);
    EXPECT_NEAR(tasks.variants[0].value, 82.5, 1e-9);
    EXPECT_EQ(tasks.variants[0].groups, "a");
    EXPECT_EQ(tasks.variants[3].groups, "b");
    const std::string table = render_rankings("hand", rankings, ClaimsFormat::kTable);
    EXPECT_NE(table.find("pairs told apart: 4 of 6"), std::string::npos) << table;
    EXPECT_NE(table.find("Holm"), std::string::npos) << table;
    const auto json = nlohmann::json::parse(render_rankings("hand", rankings, ClaimsFormat::kJson));
    EXPECT_EQ(json.at("rankings").size(), 2u);
    EXPECT_EQ(json["rankings"][0]["variants"][2]["groups"], "b");
    // A column the study does not have is an error naming it and the ones it has.
    try {
        rank_variants(h.store, "hand", {{"syn-cola"}, 0.05});
        FAIL() << "no error";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("no task 'syn-cola' (it has: syn-rte)"),
                  std::string::npos)
            << e.what();
    }
}

TEST_F(EvidenceTest, ClaimsContradictedWhenTupeIsClearlyWorse) {
    HandStore h(dir_ / "db.sqlite");
    const double bert_final[] = {5.40, 5.45, 5.38}, tupe_final[] = {6.40, 6.48, 6.41};
    for (int s = 0; s < 3; ++s) {
        h.finetune("bert-a@seed" + std::to_string(s + 1),
                   h.pretrain("bert-a", s + 1, bert_final[s], 300), 1, 400, 330);
        h.finetune("tupe-a@seed" + std::to_string(s + 1),
                   h.pretrain("tupe-a", s + 1, tupe_final[s]), 1, 400, 210);
        h.finetune("tupe-a-tie-cls@seed" + std::to_string(s + 1),
                   h.pretrain("tupe-a-tie-cls", s + 1, 6.4), 1, 400, 330);
    }
    const auto claims = evaluate_claims(h.store, "hand", [](const engine::ModelConfig& c) {
        return static_cast<int64_t>(c.preset == "tupe-a" ? 110 : 100);  // +10%
    });
    EXPECT_EQ(claim(claims, "1").verdict, Verdict::kContradicted);
    EXPECT_EQ(claim(claims, "2").verdict, Verdict::kContradicted) << claim(claims, "2").evidence;
    EXPECT_EQ(claim(claims, "2").evidence, "tupe-a never reaches bert-a's final loss in 3 seed(s)");
    EXPECT_EQ(claim(claims, "3a").verdict, Verdict::kContradicted);
    EXPECT_EQ(claim(claims, "3b").verdict, Verdict::kContradicted);
    EXPECT_EQ(claim(claims, "4").verdict, Verdict::kContradicted) << claim(claims, "4").evidence;
    EXPECT_EQ(claim(claims, "7").verdict, Verdict::kContradicted);
}

TEST_F(EvidenceTest, ClaimsOfAnLrGridAreJudgedAtEveryLrAndAtEachVariantsBestLr) {
    HandStore h(dir_ / "db.sqlite");
    // Final losses per lr (seed 1, seed 2): TUPE-A ahead at 1e-3 and 2e-3, behind at 4e-3,
    // where BERT-A does best. At each one's best lr (TUPE-A 2e-3, BERT-A 4e-3) TUPE-A leads.
    struct At {
        const char* lr;
        double tupe[2], bert[2];
    };
    const At grid[] = {{"1.0e-3", {5.50, 5.51}, {6.50, 6.52}},
                       {"2.0e-3", {5.00, 5.01}, {6.00, 6.02}},
                       {"4.0e-3", {6.80, 6.81}, {5.80, 5.82}}};
    for (const auto& at : grid)
        for (int s = 0; s < 2; ++s) {
            h.pretrain(std::string("tupe-a,lr=") + at.lr, s + 1, at.tupe[s]);
            h.pretrain(std::string("bert-a,lr=") + at.lr, s + 1, at.bert[s]);
        }
    const auto claims = evaluate_claims(h.store, "hand");
    const Claim& one = claim(claims, "1");
    ASSERT_EQ(one.by_lr.size(), 3u);
    EXPECT_EQ(one.by_lr[0].lr, "1.0e-3");
    EXPECT_EQ(one.by_lr[0].verdict, Verdict::kSupported);
    EXPECT_EQ(one.by_lr[1].verdict, Verdict::kSupported);
    EXPECT_EQ(one.by_lr[2].verdict, Verdict::kContradicted);
    EXPECT_EQ(one.verdict, Verdict::kSupported) << one.evidence;  // at the best lrs
    EXPECT_EQ(one.lr_summary,
              "depends on the lr: supported at 1.0e-3, 2.0e-3, contradicted at 4.0e-3");
    EXPECT_NE(one.evidence.find("bert-a 4.0e-3, tupe-a 2.0e-3"), std::string::npos) << one.evidence;
    EXPECT_NE(one.details.front().find("lr 1.0e-3: supported"), std::string::npos);
    const std::string json = render_claims("hand", claims, ClaimsFormat::kJson);
    EXPECT_NE(json.find("\"by_lr\""), std::string::npos);
    EXPECT_NE(json.find("\"lr_summary\": \"depends on the lr"), std::string::npos);

    // The same gap at every lr: supported at every lr tried.
    HandStore g(dir_ / "every.sqlite");
    for (const char* lr : {"1.0e-3", "2.0e-3"})
        for (int s = 0; s < 2; ++s) {
            g.pretrain(std::string("tupe-a,lr=") + lr, s + 1, 5.0 + 0.01 * s);
            g.pretrain(std::string("bert-a,lr=") + lr, s + 1, 6.0 + 0.02 * s);
        }
    const auto every = evaluate_claims(g.store, "hand");
    EXPECT_EQ(claim(every, "1").lr_summary, "supported at every lr tried");
    EXPECT_EQ(claim(every, "1").verdict, Verdict::kSupported);
    // A plain study (no lr grid) has no per-lr breakdown.
    HandStore plain(dir_ / "plain.sqlite");
    for (int s = 0; s < 2; ++s) {
        plain.pretrain("tupe-a", s + 1, 5.0 + 0.01 * s);
        plain.pretrain("bert-a", s + 1, 6.0 + 0.02 * s);
    }
    EXPECT_TRUE(claim(evaluate_claims(plain.store, "hand"), "1").by_lr.empty());
    // Claim 8 is judged per lr too: without its variants, at none.
    EXPECT_EQ(claim(claims, "8").lr_summary, "not run at any lr");
    EXPECT_EQ(claim(claims, "8").by_lr.size(), 3u);
}

TEST_F(EvidenceTest, ClaimsInconclusiveOnMixedOrSingleSeeds) {
    HandStore h(dir_ / "db.sqlite");
    // Seed 1: TUPE better; seed 2: worse. No test can decide.
    h.finetune("bert-a@seed1", h.pretrain("bert-a", 1, 6.0), 1, 400, 220);
    h.finetune("tupe-a@seed1", h.pretrain("tupe-a", 1, 5.8), 1, 400, 222);
    h.finetune("bert-a@seed2", h.pretrain("bert-a", 2, 6.0), 1, 400, 221);
    h.finetune("tupe-a@seed2", h.pretrain("tupe-a", 2, 6.2), 1, 400, 219);
    auto claims = evaluate_claims(h.store, "hand");
    EXPECT_EQ(claim(claims, "1").verdict, Verdict::kInconclusive);
    EXPECT_EQ(claim(claims, "2").verdict, Verdict::kInconclusive);
    EXPECT_EQ(claim(claims, "3b").verdict, Verdict::kInconclusive);
    EXPECT_EQ(claim(claims, "7").verdict, Verdict::kNotRun);  // no parameter counter given
    // One seed: no paired test, whatever the gap.
    HandStore one(dir_ / "one.sqlite");
    one.pretrain("bert-a", 1, 6.5);
    one.pretrain("tupe-a", 1, 5.0, 200);
    claims = evaluate_claims(one.store, "hand");
    EXPECT_EQ(claim(claims, "1").verdict, Verdict::kInconclusive);
    EXPECT_NE(claim(claims, "1").evidence.find("one seed"), std::string::npos)
        << claim(claims, "1").evidence;
    EXPECT_EQ(claim(claims, "2").verdict, Verdict::kInconclusive);
    EXPECT_EQ(claim(claims, "3b").verdict, Verdict::kNotRun);  // no fine-tuning at all
    EXPECT_THROW(evaluate_claims(one.store, "absent"), std::invalid_argument);
    // A finished pretrain run without a validation curve is left out, not dereferenced.
    RunRecord bare;
    bare.experiment_id = one.experiment;
    bare.kind = "pretrain";
    bare.name = bare.variant = "bert-r@seed1";
    bare.seed = 1;
    bare.status = "finished";
    one.store.upsert_run(bare);
    claims = evaluate_claims(one.store, "hand");
    EXPECT_NE(claim(claims, "3a").evidence.find("tupe-a"), std::string::npos);
}

// Claim 8 on the modern backbone: modern-tupe-a against modern-rope and modern-bert-a, each
// pair by the loss test of claim 1 and the task-average interval of claim 3b.
TEST_F(EvidenceTest, ClaimsModernBackboneSupportedWhenTupeLeadsBothOnLossAndTasks) {
    HandStore h(dir_ / "db.sqlite");
    const std::map<std::string, std::pair<std::vector<double>, int>> runs = {
        {"modern-tupe-a", {{5.28, 5.25, 5.32}, 330}},
        {"modern-rope", {{5.34, 5.30, 5.39}, 300}},
        {"modern-bert-a", {{6.27, 6.15, 6.40}, 240}}};
    for (const auto& [variant, finals_correct] : runs)
        for (int s = 0; s < 3; ++s)
            h.finetune(variant + "@seed" + std::to_string(s + 1),
                       h.pretrain(variant, s + 1, finals_correct.first[static_cast<size_t>(s)]), 1,
                       400, finals_correct.second);
    const auto claims = evaluate_claims(h.store, "hand");
    const Claim& c = claim(claims, "8");
    EXPECT_EQ(c.verdict, Verdict::kSupported) << c.evidence;
    EXPECT_EQ(c.evidence.rfind("modern-tupe-a - modern-rope at step 1000: mean -0.060 nats over 3 "
                               "seed(s)",
                               0),
              0u)
        << c.evidence;
    EXPECT_NE(c.evidence.find("modern-tupe-a - modern-bert-a at step 1000"), std::string::npos);
    EXPECT_NE(c.evidence.find("on Avg: 82.50 vs 75.00, difference 7.50"), std::string::npos)
        << c.evidence;
    // Per pair: the loss, the average and the average task by task.
    ASSERT_EQ(c.details.size(), 6u);
    EXPECT_EQ(c.details[0].rfind("supported: modern-tupe-a - modern-rope at step 1000", 0), 0u);
    EXPECT_EQ(c.details[1].rfind("supported: modern-tupe-a @ 1000 - modern-rope @ 1000 on Avg", 0),
              0u)
        << c.details[1];
    EXPECT_EQ(c.details[2].rfind("per task, modern-tupe-a - modern-rope: above 0 on 1 of 1", 0), 0u)
        << c.details[2];
    EXPECT_EQ(c.view, AppView::kCurves);
    EXPECT_EQ(c.runs.size(), 9u);
    // The paper's claims have nothing to read; claim 8 is reported after them, whatever order
    // they are judged in.
    EXPECT_EQ(claim(claims, "1").verdict, Verdict::kNotRun);
    EXPECT_EQ(claims.back().id, "8");
    const auto json = nlohmann::json::parse(render_claims("hand", claims, ClaimsFormat::kJson));
    EXPECT_EQ(json["claims"].back()["id"], "8");
    EXPECT_EQ(json["claims"].back()["verdict"], "supported");
    EXPECT_EQ(json["claims"].back()["view"], "curves");
}

TEST_F(EvidenceTest, ClaimsModernBackboneContradictedByEitherPairAndInconclusiveOnATie) {
    // modern-tupe-a clearly behind modern-rope on the loss, clearly ahead of modern-bert-a: one
    // pair decided against it contradicts the claim.
    HandStore h(dir_ / "db.sqlite");
    const double tupe[] = {5.40, 5.45, 5.41}, rope[] = {5.20, 5.22, 5.19}, bert[] = {6.3, 6.2, 6.4};
    for (int s = 0; s < 3; ++s) {
        h.pretrain("modern-tupe-a", s + 1, tupe[s]);
        h.pretrain("modern-rope", s + 1, rope[s]);
        h.pretrain("modern-bert-a", s + 1, bert[s]);
    }
    const Claim against = claim(evaluate_claims(h.store, "hand"), "8");
    EXPECT_EQ(against.verdict, Verdict::kContradicted) << against.evidence;
    ASSERT_EQ(against.details.size(), 2u);  // no fine-tuning: the losses only
    EXPECT_EQ(against.details[0].rfind("contradicted: ", 0), 0u);
    EXPECT_EQ(against.details[1].rfind("supported: ", 0), 0u);

    // Ahead of both on the loss in every seed, level on the tasks: the task average is a test
    // of the claim too, and a tie leaves it undecided. The study has tasks but modern-bert-a has
    // no results on them: said, not dropped silently.
    HandStore tie(dir_ / "tie.sqlite");
    for (int s = 0; s < 3; ++s) {
        const std::string seed = "@seed" + std::to_string(s + 1);
        tie.finetune("modern-tupe-a" + seed, tie.pretrain("modern-tupe-a", s + 1, 5.0 + 0.01 * s),
                     1, 400, 300);
        tie.finetune("modern-rope" + seed, tie.pretrain("modern-rope", s + 1, 5.5 + 0.02 * s), 1,
                     400, 300);
        tie.pretrain("modern-bert-a", s + 1, 6.0 + 0.03 * s);
    }
    const Claim level = claim(evaluate_claims(tie.store, "hand"), "8");
    EXPECT_EQ(level.verdict, Verdict::kInconclusive) << level.evidence;
    EXPECT_NE(level.evidence.find("difference 0.00"), std::string::npos) << level.evidence;
    EXPECT_NE(std::find(level.details.begin(), level.details.end(),
                        "no task average: modern-bert-a has no fine-tuning results"),
              level.details.end());

    // Seeds that disagree: no test decides.
    HandStore mixed(dir_ / "mixed.sqlite");
    const double m_tupe[] = {5.2, 5.6}, m_rope[] = {5.4, 5.4};
    for (int s = 0; s < 2; ++s) {
        mixed.pretrain("modern-tupe-a", s + 1, m_tupe[s]);
        mixed.pretrain("modern-rope", s + 1, m_rope[s]);
    }
    const Claim undecided = claim(evaluate_claims(mixed.store, "hand"), "8");
    EXPECT_EQ(undecided.verdict, Verdict::kInconclusive) << undecided.evidence;
}

TEST_F(EvidenceTest, ClaimsModernBackboneNotRunWithoutItsVariantsAndPartlyTestedWithOnePair) {
    // The paper's variants on BERT's backbone say nothing about the modern one.
    HandStore h(dir_ / "db.sqlite");
    for (int s = 0; s < 2; ++s) {
        h.pretrain("tupe-a", s + 1, 5.0 + 0.01 * s);
        h.pretrain("bert-a", s + 1, 6.0 + 0.02 * s);
        h.pretrain("modern-rope", s + 1, 5.5 + 0.02 * s);
    }
    const Claim none = claim(evaluate_claims(h.store, "hand"), "8");
    EXPECT_EQ(none.verdict, Verdict::kNotRun);
    EXPECT_EQ(none.evidence,
              "needs modern-tupe-a and modern-rope or modern-bert-a; missing: modern-tupe-a, "
              "modern-bert-a");
    EXPECT_TRUE(none.runs.size() == 2u && none.runs[0].rfind("modern-rope", 0) == 0);
    // With modern-tupe-a, one pair is run: agreement on it is not the whole claim.
    for (int s = 0; s < 2; ++s) h.pretrain("modern-tupe-a", s + 1, 5.0 + 0.01 * s);
    const Claim one = claim(evaluate_claims(h.store, "hand"), "8");
    EXPECT_EQ(one.verdict, Verdict::kPartlyTested) << one.evidence;
    EXPECT_EQ(one.evidence.rfind("1 of 2 pairs (modern-bert-a not run); modern-tupe-a - "
                                 "modern-rope",
                                 0),
              0u)
        << one.evidence;
}

TEST_F(EvidenceTest, ClaimsWithoutExperimentJudgeEveryExperiment) {
    const fs::path db = dir_ / "db.sqlite";
    {
        HandStore h(db);  // experiment "hand"
        h.pretrain("bert-a", 1, 6.0);
        h.experiment = h.store.get_or_create_experiment("later", "later.yaml", "name: later\n");
        h.pretrain("tupe-a", 1, 5.0);
    }
    const auto table =
        test_support::run_tupe("claims --db " + test_support::quote(db.string()), dir_ / "err.txt");
    ASSERT_EQ(table.status, 0) << test_support::read_file(dir_ / "err.txt");
    EXPECT_NE(table.out.find("experiment 'hand'"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("experiment 'later'"), std::string::npos) << table.out;
    const auto json = test_support::run_tupe(
        "claims --format json --db " + test_support::quote(db.string()), dir_ / "err.txt");
    ASSERT_EQ(json.status, 0);
    const auto j = nlohmann::json::parse(json.out);
    ASSERT_EQ(j.at("experiments").size(), 2u);
    EXPECT_EQ(j["experiments"][0]["experiment"], "hand");
    EXPECT_EQ(j["experiments"][1]["experiment"], "later");
    // (With --experiment the JSON is one claims object: ClaimsService.RealCli* in tests/app.)
}

TEST_F(EvidenceTest, ClaimsFromAnalysisArtifacts) {
    HandStore h(dir_ / "db.sqlite");
    const int64_t b = h.pretrain("bert-a", 1, 6.0);
    const int64_t t = h.pretrain("tupe-a", 1, 5.0);
    auto index = [&](const std::string& name, const std::string& files,
                     const std::string& step = "step1000") {
        const fs::path d = dir_ / name / "analysis" / step;
        fs::create_directories(d);
        std::ofstream(d / "index.json") << "{\"files\": [" << files << "]}";
        return (d / "index.json").string();
    };
    std::string terms;
    for (int hd = 0; hd < 4; ++hd)
        for (auto [what, u] : std::vector<std::pair<std::string, double>>{
                 {"word_word", 2.0}, {"word_pos", 0.5}, {"pos_word", 0.4}})
            terms += std::string(terms.empty() ? "" : ",") + "{\"what\": \"" + what +
                     "\", \"head\": " + std::to_string(hd) +
                     ", \"layer\": 0, \"statistics\": {\"uniformity\": " + std::to_string(u) + "}}";
    std::string heads;
    const char* labels[] = {"local", "previous", "next", "global"};
    for (int hd = 0; hd < 4; ++hd)
        for (const char* ext : {"npy", "csv"})  // one head, two files: counted once
            heads += std::string(heads.empty() ? "" : ",") +
                     "{\"what\": \"tupe_total\", \"file\": \"x." + ext +
                     "\", \"head\": " + std::to_string(hd) + ", \"layer\": null, \"label\": \"" +
                     labels[hd] + "\"}";
    h.store.add_artifact({0, b, "analysis-index", index("bert-a", terms), 0, "", ""});
    h.store.add_artifact({0, t, "analysis-index", index("tupe-a", heads), 0, "", ""});
    const auto claims = evaluate_claims(h.store, "hand");
    EXPECT_EQ(claim(claims, "5").verdict, Verdict::kSupported) << claim(claims, "5").evidence;
    EXPECT_NE(claim(claims, "5").evidence.find("8 of 8"), std::string::npos)
        << claim(claims, "5").evidence;
    EXPECT_EQ(claim(claims, "6").verdict, Verdict::kSupported) << claim(claims, "6").evidence;
    EXPECT_NE(claim(claims, "6").evidence.find("4 heads"), std::string::npos)
        << claim(claims, "6").evidence;
    EXPECT_NE(claim(claims, "5").evidence.find("no untrained control"), std::string::npos);
    EXPECT_NE(claim(claims, "6").details.back().find("taxonomy: previous/next if"),
              std::string::npos);
    // The control: an untrained model (step 0) with the cross terms as flat. Then the
    // flatness is not training's doing, and the verdict says so.
    h.store.add_artifact({0, b, "analysis-index", index("bert-a", terms, "step0"), 0, "", ""});
    const auto controlled = evaluate_claims(h.store, "hand");
    EXPECT_EQ(claim(controlled, "5").verdict, Verdict::kInconclusive)
        << claim(controlled, "5").evidence;
    EXPECT_NE(claim(controlled, "5").evidence.find("untrained control: 8 of 8"), std::string::npos)
        << claim(controlled, "5").evidence;
    EXPECT_NE(claim(controlled, "5").evidence.find("not training's doing"), std::string::npos);
}

TEST_F(EvidenceTest, RunnerStoresPredictionsAndTheFloorAndTheShuffledControlStaysAtChance) {
    test_support::write_toy_corpus(dir_, 20, 30, 7, 7);
    const std::string yaml =
        "name: tiny\nvariants: [bert-a]\n"
        "model: {size: tiny, max_position_embeddings: 32}\n"
        "data: {corpus: " +
        (dir_ / "corpus.txt").string() + ", vocab: " + (dir_ / "vocab.txt").string() +
        ", cache_dir: " + (dir_ / "cache").string() +
        ", max_seq_len: 32, validation_fraction: 0.25}\n"
        "train: {steps: 20, batch_size: 8, eval_interval: 10, checkpoint_interval: 10, threads: "
        "1}\n"
        "glue: {data: builtin, tasks: [syn-cola, syn-mrpc, syn-stsb, syn-rte, syn-bshift, "
        "syn-rev], synthetic_train: 200, synthetic_dev: 200}\n"
        "finetune: {lrs: [1.0e-3], seeds: [1], batch_size: 16, epochs: 2, max_seq_len: 32, "
        "shuffle_words: true}\n"
        "database: " +
        (dir_ / "db.sqlite").string() + "\nruns_dir: " + (dir_ / "runs").string() + "\n";
    const auto spec = load_experiment(write("t.yaml", yaml).string());
    const auto summary = run_experiment(spec, {}, {});
    ASSERT_EQ(summary.failed, 0);
    auto store = ResultStore::open(spec.database, OpenMode::kReadOnly);
    const auto e = store.find_experiment("tiny");
    ASSERT_TRUE(e);
    const auto pre = store.find_run(e->id, "bert-a");
    ASSERT_TRUE(pre);
    const auto params = store.params(pre->id);
    ASSERT_TRUE(params.count("floor.unigram_nats"));
    EXPECT_GT(std::stod(params.at("floor.unigram_nats")), 0);
    EXPECT_TRUE(fs::exists(fs::path(spec.runs_dir) / "bert-a" / "floor.txt"));
    const auto preds = store.predictions(e->id);
    ASSERT_EQ(preds.size(), 6u);  // one dev split per task
    for (const auto& p : preds) EXPECT_EQ(p.gold.size(), 200u);
    for (const auto& r : store.list_runs(e->id))
        if (r.kind == "finetune")
            EXPECT_NE(r.config_text.find("shuffle_words = true"), std::string::npos);
    // With the words shuffled, the classes (or scores) of every built-in task are the same bag
    // of words: no model can tell them apart, whatever it learned. A task that leaked a
    // non-order cue (length, a dropped word) would show up here above chance.
    const Report report = load_report(store, "tiny");
    for (const std::string task :
         {"syn-cola", "syn-mrpc", "syn-stsb", "syn-rte", "syn-bshift", "syn-rev"}) {
        const ReportCell& c = report.rows.at(0).cells.at(task);
        ASSERT_TRUE(c.has_interval) << task;
        EXPECT_FALSE(c.above_chance)
            << task << " " << c.median << " [" << c.lo << ", " << c.hi << "], chance " << c.chance;
    }
    // A minimal pair is one bag of words: its control shows both sentences in one order, every
    // pair ties, and the balanced labels give exactly chance.
    for (const std::string task : {"syn-bshift", "syn-rev"})
        EXPECT_DOUBLE_EQ(report.rows.at(0).cells.at(task).median, 50.0) << task;
}

// Runs multiplied with different BLAS kernels are pooled with a note naming each set; runs of
// one set, or recorded before runs.blas, get none.
TEST_F(EvidenceTest, PretrainingSummaryNotesRunsOfDifferentBlasKernels) {
    HandStore h(dir_ / "blas.sqlite");
    const int64_t a = h.pretrain("bert-a", 1, 6.0);
    const int64_t b = h.pretrain("bert-a", 2, 6.1);
    EXPECT_EQ(pretraining_summary(h.store, "hand").find("BLAS"), std::string::npos);
    for (const auto& [id, kernels] :
         {std::pair{a, std::string("OpenBLAS 0.3.21, kernels Haswell (OPENBLAS_CORETYPE=Haswell)")},
          std::pair{b, std::string("OpenBLAS 0.3.21, kernels Cooperlake (chosen by OpenBLAS)")}}) {
        RunRecord r = *h.store.get_run(id);
        r.blas = kernels;
        h.store.upsert_run(r);
    }
    const std::string summary = pretraining_summary(h.store, "hand");
    EXPECT_NE(summary.find("note: these runs multiplied with 2 BLAS kernel sets (OpenBLAS "
                           "0.3.21, kernels Cooperlake (chosen by OpenBLAS): 1 run(s); OpenBLAS "
                           "0.3.21, kernels Haswell (OPENBLAS_CORETYPE=Haswell): 1 run(s)); "
                           "their numbers agree to rounding, not bit for bit"),
              std::string::npos)
        << summary;
}

TEST_F(EvidenceTest, AStoreOfTheOldSchemaIsMigratedForReading) {
    const std::string path = (dir_ / "old.sqlite").string();
    {
        HandStore h(dir_ / "old.sqlite");
        h.pretrain("bert-a", 1, 6.0);
    }
    {
        // Back to schema 1: the predictions, job_claims and gathered_jobs tables, the
        // identities of runs and artifacts and the runs' BLAS did not exist then.
        auto rw = ResultStore::open(path);
        (void)rw;
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db,
                     "DROP TABLE predictions; DROP TABLE job_claims; DROP TABLE gathered_jobs; "
                     "DROP INDEX runs_fingerprint; "
                     "ALTER TABLE runs DROP COLUMN identity; ALTER TABLE runs DROP COLUMN "
                     "fingerprint; ALTER TABLE runs DROP COLUMN cell; "
                     "ALTER TABLE runs DROP COLUMN blas; "
                     "ALTER TABLE artifacts DROP COLUMN identity; PRAGMA user_version = 1;",
                     nullptr, nullptr, nullptr),
        SQLITE_OK);
    sqlite3_close(db);
    EXPECT_THROW(ResultStore::open(path, OpenMode::kReadOnly), StoreError);
    auto store = ResultStore::open_for_reading(path);
    EXPECT_EQ(store.schema_version(), ResultStore::latest_schema_version());
    const auto e = store.find_experiment("hand");
    ASSERT_TRUE(e);
    EXPECT_EQ(store.list_runs(e->id).size(), 1u);  // nothing lost
    EXPECT_TRUE(store.predictions(e->id).empty());
    EXPECT_THROW(ResultStore::open_for_reading((dir_ / "absent.sqlite").string()), StoreError);
}

// RFC 4180: a field holding a comma or a double quote is quoted, inner quotes doubled, so a
// spreadsheet reads the label back whole and every row has the header's column count.
TEST(ReportCsv, QuotesFieldsWithCommasAndQuotes) {
    Report report;
    report.columns = {"cola", "a,b"};  // an unknown key is its own title
    ReportRow row;
    row.label = "tupe \"a\", 1";
    row.cells["cola"].present = true;
    row.cells["cola"].median = 58;
    row.has_average = true;
    row.average = 58;
    report.rows.push_back(row);
    const std::string csv = render_report(report, ReportFormat::kCsv);
    // Splits one CSV line into its fields (quoted fields unescaped).
    auto fields = [](const std::string& line) {
        std::vector<std::string> out(1);
        bool quoted = false;
        for (size_t i = 0; i < line.size(); ++i) {
            const char ch = line[i];
            if (quoted && ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                out.back() += '"';
                ++i;
            } else if (ch == '"') {
                quoted = !quoted;
            } else if (ch == ',' && !quoted) {
                out.emplace_back();
            } else {
                out.back() += ch;
            }
        }
        return out;
    };
    std::istringstream in(csv);
    std::string header_line, row_line;
    ASSERT_TRUE(std::getline(in, header_line)) << csv;
    ASSERT_TRUE(std::getline(in, row_line)) << csv;
    EXPECT_EQ(header_line, "model,CoLA,\"a,b\",Avg");
    EXPECT_EQ(row_line.rfind("\"tupe \"\"a\"\", 1\",", 0), 0u) << row_line;
    const std::vector<std::string> header = fields(header_line), cells = fields(row_line);
    ASSERT_EQ(header.size(), 4u) << header_line;
    EXPECT_EQ(header[2], "a,b");
    ASSERT_EQ(cells.size(), header.size()) << row_line;
    EXPECT_EQ(cells[0], "tupe \"a\", 1");
    EXPECT_EQ(cells[2], "");  // no value for a,b
}
