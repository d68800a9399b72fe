// A stored experiment as a factorial (experiments/factors.h): the factors found in the runs'
// stored configs (keys that change together are one factor), the metrics of each run (final
// loss, floors, tasks at the best lr, positional share, the ablation's whole-model row), and
// the main effects and interaction against numbers computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "analysis/evidence.h"
#include "engine/config.h"
#include "experiments/factors.h"
#include "experiments/result_store.h"
#include "support/test_support.h"

namespace {

using experiments::ResultStore;
using test_support::has;

// 2 x 2 cells (untie_cls, relative_position) x 2 seeds. The loss is 5 + 0.1 untie + 0.3 t5
// + 0.05 untie*t5, seed 1 at -0.01 and seed 2 at +0.01. attention_scale_factor changes with
// untie_cls in every run: an alias.
double loss_of(bool untie, bool t5, int seed) {
    return 5.0 + 0.1 * untie + 0.3 * t5 + 0.05 * (untie && t5) + (seed == 1 ? -0.01 : 0.01);
}

void fill_store(const std::string& db, int seeds, const std::string& dir) {
    auto store = ResultStore::open(db);
    const auto exp = store.get_or_create_experiment("fact", "fact.yaml", "name: fact\n");
    for (int untie = 0; untie < 2; ++untie)
        for (int t5 = 0; t5 < 2; ++t5)
            for (int seed = 1; seed <= seeds; ++seed) {
                engine::PretrainConfig c;
                c.model = engine::make_model_config("tupe-a", "tiny");
                c.model.untie_cls = untie;
                c.model.attention_scale_factor = untie ? 2.0 : 1.5;
                c.model.relative_position = t5 ? "t5" : "none";
                c.train.seed = static_cast<uint64_t>(seed);
                c.out_dir = dir + "/run" + std::to_string(untie) + std::to_string(t5) +
                            std::to_string(seed);  // differs in every run: not a factor
                experiments::RunRecord r;
                r.experiment_id = exp;
                r.name = "u" + std::to_string(untie) + "t" + std::to_string(t5) + "@seed" +
                         std::to_string(seed);
                r.variant = r.name;
                r.seed = seed;
                r.status = "finished";
                r.config_text = engine::config_to_text(c);
                const auto id = store.upsert_run(r);
                store.add_metrics(id, {{"validation/loss", 10, 9.0, 1.0},
                                       {"validation/loss", 20, loss_of(untie, t5, seed), 2.0},
                                       {"property/positional_share", 20, 0.25 + 0.5 * untie, 2.0}});
                store.add_params(
                    id, {{"floor.unigram_nats", "6.9"}, {"floor.context_free_nats", "6.3"}});
                // Two fine-tuning lrs x two seeds on one task at step 20 (and a worse step 10):
                // the score is the best lr's median.
                int k = 0;
                for (double lr : {1e-3, 2e-3})
                    for (int fs = 1; fs <= 2; ++fs) {
                        experiments::RunRecord f;
                        f.experiment_id = exp;
                        f.kind = "finetune";
                        f.name = r.name + "/syn-mrpc/" + std::to_string(k++);
                        f.parent_run_id = id;
                        f.status = "finished";
                        const auto fid = store.upsert_run(f);
                        experiments::GlueResultRecord g;
                        g.run_id = fid;
                        g.task = "syn-mrpc";
                        g.split = "dev";
                        g.metric = "accuracy";
                        g.value = (lr > 1.5e-3 ? 70.0 : 60.0) + fs + 10 * untie;
                        g.checkpoint_step = 20;
                        g.lr = lr;
                        g.seed = fs;
                        store.add_glue_result(g);
                    }
                if (untie && seed == 1) {
                    const std::string path = dir + "/" + r.name + "/ablation/ablation.json";
                    test_support::write_file(path,
                                             R"({"checkpoints": [{"rows": [
                            {"layer": 0, "head": 0, "delta_loss": 0.5},
                            {"layer": -1, "head": -1, "delta_loss": 0.75}]}]})");
                    experiments::ArtifactRecord a;
                    a.run_id = id;
                    a.kind = "ablation-json";
                    a.path = path;
                    store.add_artifact(a);
                }
            }
}

TEST(FactorTable, FindsTheFactorsInTheStoredConfigsAndEachRunsMetrics) {
    test_support::TempDir dir(test_support::per_test_name("tupe_factors"));
    fill_store(dir.file("db.sqlite"), 2, dir.path().string());
    auto store = ResultStore::open_for_reading(dir.file("db.sqlite"));
    const auto t = experiments::load_factor_table(store, "fact");
    ASSERT_EQ(t.factors.size(), 2u);
    EXPECT_EQ(t.factors[0].key, "model.relative_position");  // config order
    EXPECT_EQ(t.factors[0].levels, (std::vector<std::string>{"none", "t5"}));
    EXPECT_EQ(t.factors[1].key, "model.untie_cls");
    EXPECT_EQ(t.factors[1].levels, (std::vector<std::string>{"false", "true"}));
    EXPECT_EQ(t.factors[1].aliases, (std::vector<std::string>{"model.attention_scale_factor"}));
    EXPECT_EQ(t.factor_index("model.attention_scale_factor"), 1);
    ASSERT_EQ(t.runs.size(), 8u);
    const auto& r = t.runs.back();  // u1t1@seed2
    EXPECT_EQ(r.levels, (std::vector<std::string>{"t5", "true"}));
    EXPECT_DOUBLE_EQ(r.metric("val_loss"), loss_of(true, true, 2));
    EXPECT_DOUBLE_EQ(r.metric("below_context_free"), 6.3 - loss_of(true, true, 2));
    EXPECT_DOUBLE_EQ(r.metric("SYN-MRPC"), 81.5);  // lr 2e-3: median of 81 and 82
    EXPECT_DOUBLE_EQ(r.metric("task_avg"), 81.5);
    EXPECT_DOUBLE_EQ(r.metric("positional_share"), 0.75);
    EXPECT_TRUE(std::isnan(r.metric("ablation_delta")));
    EXPECT_DOUBLE_EQ(t.runs[6].metric("ablation_delta"), 0.75);  // u1t1@seed1: the whole model
    std::vector<std::string> keys;
    for (const auto& m : t.metrics) keys.push_back(m.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"val_loss", "below_context_free", "unigram_floor",
                                              "context_free_floor", "SYN-MRPC", "task_avg",
                                              "positional_share", "ablation_delta"}));
    EXPECT_THROW(experiments::load_factor_table(store, "nope"), std::invalid_argument);
}

TEST(FactorEffects, LevelMeansIntervalsAndContrastsAgreeWithTheHandComputation) {
    test_support::TempDir dir(test_support::per_test_name("tupe_factors"));
    fill_store(dir.file("db.sqlite"), 2, dir.path().string());
    auto store = ResultStore::open_for_reading(dir.file("db.sqlite"));
    const auto t = experiments::load_factor_table(store, "fact");
    const auto e = experiments::main_effects(t, "val_loss");
    // Pooled within-cell variance: every run is 0.01 from its cell mean, 8 runs, 4 cells.
    EXPECT_EQ(e.df, 4);
    EXPECT_NEAR(e.residual_sd, std::sqrt(8 * 1e-4 / 4), 1e-12);
    const double q = analysis::student_t_quantile(0.975, 4);
    ASSERT_EQ(e.effects.size(), 2u);
    const auto& untie = e.effects[1];
    ASSERT_EQ(untie.levels.size(), 2u);
    // false: cells (none, t5) at 5.0 and 5.3; true: 5.1 and 5.45.
    EXPECT_NEAR(untie.levels[0].mean, 5.15, 1e-12);
    EXPECT_NEAR(untie.levels[1].mean, 5.275, 1e-12);
    // se of a level mean: s sqrt(1/2 + 1/2) / 2.
    EXPECT_NEAR(untie.levels[1].hi - untie.levels[1].mean, q * e.residual_sd / 2, 1e-12);
    EXPECT_EQ(untie.levels[1].runs, 4);
    EXPECT_NEAR(untie.contrast.estimate, 0.125, 1e-12);
    const double se = e.residual_sd * std::sqrt(0.25 + 0.25);
    EXPECT_NEAR(untie.contrast.hi - untie.contrast.estimate, q * se, 1e-12);
    EXPECT_NEAR(untie.contrast.p, 2 * (1 - analysis::student_t_cdf(0.125 / se, 4)), 1e-12);
    // Within each level of relative_position: untie_cls's effect is 0.1 and 0.15.
    const auto within = experiments::main_effects(t, "val_loss", "model.relative_position");
    ASSERT_EQ(within.effects.size(), 2u);
    EXPECT_EQ(within.effects[0].within_level, "none");
    EXPECT_NEAR(within.effects[0].contrast.estimate, 0.1, 1e-12);
    EXPECT_NEAR(within.effects[1].contrast.estimate, 0.15, 1e-12);
    // The interaction contrast (m11 - m10) - (m01 - m00) = 0.05, se s sqrt(4 / 2).
    const auto x =
        experiments::interaction(t, "val_loss", "model.untie_cls", "model.relative_position");
    EXPECT_NEAR(x.cells[1][1].mean, 5.45, 1e-12);
    EXPECT_NEAR(x.contrast.estimate, 0.05, 1e-12);
    EXPECT_NEAR(x.contrast.hi - 0.05, q * e.residual_sd * std::sqrt(2.0), 1e-12);
    EXPECT_THROW(experiments::main_effects(t, "nope"), std::invalid_argument);
    EXPECT_THROW(experiments::main_effects(t, "val_loss", "model.nope"), std::invalid_argument);
}

TEST(FactorEffects, OneRunPerCellHasNoIntervalAndSaysSo) {
    test_support::TempDir dir(test_support::per_test_name("tupe_factors"));
    fill_store(dir.file("db.sqlite"), 1, dir.path().string());
    auto store = ResultStore::open_for_reading(dir.file("db.sqlite"));
    const auto t = experiments::load_factor_table(store, "fact");
    const auto e = experiments::main_effects(t, "val_loss");
    EXPECT_EQ(e.df, 0);
    EXPECT_TRUE(std::isnan(e.effects[0].levels[0].lo));
    EXPECT_FALSE(e.effects[0].contrast.valid);
    EXPECT_NEAR(e.effects[0].contrast.estimate, (5.3 + 5.45 - 5.0 - 5.1) / 2, 1e-12);
    ASSERT_EQ(e.notes.size(), 1u);
    EXPECT_TRUE(has(e.notes[0], "one run per cell"));
}

TEST(FactorEffects, RendersTheSameNumbersAsTableJsonAndCsv) {
    test_support::TempDir dir(test_support::per_test_name("tupe_factors"));
    fill_store(dir.file("db.sqlite"), 2, dir.path().string());
    auto store = ResultStore::open_for_reading(dir.file("db.sqlite"));
    const auto t = experiments::load_factor_table(store, "fact");
    const auto e = experiments::main_effects(t, "val_loss");
    const std::string table = experiments::render_factor_effects(t, e, "table");
    EXPECT_TRUE(has(table, "8 runs in 4 cells")) << table;
    EXPECT_TRUE(has(table, "true - false: +0.1250 [")) << table;
    EXPECT_TRUE(has(table, "model.untie_cls changes with model.attention_scale_factor")) << table;
    const auto j = nlohmann::json::parse(experiments::render_factor_effects(t, e, "json"));
    EXPECT_EQ(j["df"], 4);
    EXPECT_NEAR(j["effects"][1]["contrast"]["estimate"].get<double>(), 0.125, 1e-12);
    const std::string csv = experiments::render_factor_effects(t, e, "csv");
    EXPECT_EQ(csv.substr(0, csv.find('\n')),
              "factor,within_factor,within_level,level,mean,lo,hi,p,runs,cells");
    EXPECT_TRUE(has(csv, "model.untie_cls,,,true - false,0.12")) << csv;
    EXPECT_THROW(experiments::render_factor_effects(t, e, "xml"), std::invalid_argument);
}

}  // namespace
