// The study builder's design (experiments/study_design.h): the file it writes is the study
// `tupe run` reads (variants named by their levels), it reads its own files back unchanged and
// says what it cannot edit; the field tables it is built from (engine/config_fields.h,
// experiments/study_fields.h) document every key and check a value as the loader does; and the
// plan's counts and cost (experiments/plan_cost.h).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/config_fields.h"
#include "engine/cost_model.h"
#include "engine/position_scheme.h"
#include "experiments/config_loader.h"
#include "experiments/experiment.h"
#include "experiments/plan_cost.h"
#include "experiments/study_design.h"
#include "experiments/study_fields.h"
#include "support/test_support.h"

namespace {

using experiments::StudyDesign;
using test_support::has;

// The issue's ablation: untie [CLS], shared term, relative bias, 2 seeds.
StudyDesign tupe_ablation() {
    StudyDesign d;
    d.comment = "A factorial TUPE ablation.\nSecond line.";
    d.name = "tupe_factorial";
    d.preset = "tupe-a";
    d.size = "tiny";
    d.base = {{"model.hidden_size", "64"}, {"train.steps", "20"}, {"train.lr", "2.0e-3"}};
    d.factors = {{"model.untie_cls", {"true", "false"}},
                 {"model.shared_pos_term", {"true", "false"}},
                 {"model.relative_position", {"none", "t5"}}};
    d.seeds = {1, 2};
    d.settings = {{"glue.tasks", "[syn-bshift, syn-move]"}, {"finetune.lrs", "[1.0e-3]"}};
    d.analysis = true;
    d.set_setting("analysis.ablation", "zero");
    d.set_setting("database", "results/factorial.sqlite");
    return d;
}

experiments::ExperimentSpec load_text(const test_support::TempDir& dir, const std::string& text) {
    return experiments::load_experiment(dir.write("study.yaml", text).string());
}

TEST(StudyDesign, FullProductIsAGridWhoseVariantsAreNamedByTheirLevels) {
    test_support::TempDir dir(test_support::per_test_name("tupe_design"));
    const StudyDesign d = tupe_ablation();
    const std::string text = experiments::write_study_design(d);
    EXPECT_TRUE(has(text, "grid:\n  model.untie_cls: [true, false]\n")) << text;
    EXPECT_TRUE(has(text, "# A factorial TUPE ablation.\n# Second line.\n")) << text;
    const auto spec = load_text(dir, text);
    const auto cells = experiments::design_cells(d);
    ASSERT_EQ(cells.size(), 8u);
    ASSERT_EQ(spec.variants.size(), 16u);
    // The loader's names are the builder's: cell by cell, then @seedN.
    for (size_t i = 0; i < cells.size(); ++i)
        for (size_t s = 0; s < 2; ++s)
            EXPECT_EQ(spec.variants[2 * i + s].name,
                      experiments::cell_variant_name(d.factors, cells[i]) + "@seed" +
                          std::to_string(s + 1));
    EXPECT_EQ(spec.variants[0].name,
              "untie_cls=true,shared_pos_term=true,relative_position=none@seed1");
    const auto& last = spec.variants.back().config;
    EXPECT_FALSE(last.model.untie_cls);
    EXPECT_FALSE(last.model.shared_pos_term);
    EXPECT_EQ(last.model.relative_position, "t5");
    EXPECT_EQ(last.model.hidden_size, 64);
    EXPECT_EQ(last.train.seed, 2u);
    EXPECT_EQ(spec.glue.tasks, (std::vector<std::string>{"syn-bshift", "syn-move"}));
    EXPECT_EQ(spec.analysis.ablation, "zero");
    EXPECT_EQ(spec.database, "results/factorial.sqlite");
}

TEST(StudyDesign, ReadsItsOwnFileBackUnchanged) {
    const StudyDesign d = tupe_ablation();
    const std::string text = experiments::write_study_design(d);
    const StudyDesign back = experiments::read_study_design(text, "study.yaml");
    EXPECT_TRUE(back.notes.empty()) << back.notes.front();
    EXPECT_EQ(back.name, d.name);
    EXPECT_EQ(back.comment, d.comment + "\n");
    EXPECT_EQ(back.preset, "tupe-a");
    EXPECT_EQ(back.base, d.base);
    ASSERT_EQ(back.factors.size(), 3u);
    EXPECT_EQ(back.factors[2].levels, (std::vector<std::string>{"none", "t5"}));
    EXPECT_TRUE(back.full_factorial);
    EXPECT_EQ(back.seeds, d.seeds);
    EXPECT_EQ(back.setting("analysis.ablation"), "zero");
    EXPECT_EQ(experiments::write_study_design(back), text);
}

TEST(StudyDesign, ChosenCellsAreVariantsTheFormReadsBackAsCells) {
    test_support::TempDir dir(test_support::per_test_name("tupe_design"));
    StudyDesign d = tupe_ablation();
    d.factors = {{"model.preset", {"tupe-a", "tupe-r"}}, {"model.untie_cls", {"true", "false"}}};
    d.full_factorial = false;
    d.cells = {{"tupe-a", "true"}, {"tupe-r", "false"}};
    d.seeds.clear();
    const std::string text = experiments::write_study_design(d);
    const auto spec = load_text(dir, text);
    ASSERT_EQ(spec.variants.size(), 2u);
    EXPECT_EQ(spec.variants[0].name, "tupe-a,untie_cls=true");
    EXPECT_EQ(spec.variants[1].config.model.relative_position, "t5");  // tupe-r's
    EXPECT_FALSE(spec.variants[1].config.model.untie_cls);
    const StudyDesign back = experiments::read_study_design(text, "study.yaml");
    EXPECT_TRUE(back.notes.empty());
    EXPECT_FALSE(back.full_factorial);
    EXPECT_EQ(back.cells, d.cells);
    EXPECT_EQ(experiments::write_study_design(back), text);
}

TEST(StudyDesign, KeepsAndNamesWhatTheFormCannotEdit) {
    test_support::TempDir dir(test_support::per_test_name("tupe_design"));
    const std::string text =
        "# study\n"
        "name: hand\n"
        "variants:\n"
        "  - bert-a\n"
        "  - {name: mine, preset: tupe-a, seeds: [1, 2, 3]}   # its own seeds\n"
        "model: {size: tiny, hidden_size: 64}\n"
        "finetune: {lrs: [1.0e-3], seeds: [1], epochs: 2}\n"
        "extrapolation: {lengths: \"1,2\"}\n";
    const StudyDesign d = experiments::read_study_design(text, "hand.yaml");
    ASSERT_EQ(d.notes.size(), 2u);
    EXPECT_TRUE(has(d.notes[0], "comment")) << d.notes[0];
    EXPECT_TRUE(has(d.notes[1], "variants: entries the factors cannot express")) << d.notes[1];
    EXPECT_TRUE(d.factors.empty());
    EXPECT_EQ(d.setting("finetune.epochs"), "2");
    EXPECT_TRUE(d.extrapolation);
    // What it kept runs as written: the same variants, the same settings.
    const auto before = load_text(dir, text);
    const auto after = load_text(dir, experiments::write_study_design(d));
    ASSERT_EQ(after.variants.size(), before.variants.size());
    for (size_t i = 0; i < before.variants.size(); ++i)
        EXPECT_EQ(after.variants[i].name, before.variants[i].name);
    EXPECT_EQ(after.finetune.epochs, 2);
    EXPECT_EQ(after.extrapolation.lengths, "1,2");
    EXPECT_EQ(after.variants[1].config.model.hidden_size, 64);
}

TEST(StudyDesign, HandEditedSettingsSurviveReopening) {
    const std::string text = experiments::write_study_design(tupe_ablation()) +
                             "jobs: 2\n";  // typed into the editor by hand
    StudyDesign d = experiments::read_study_design(text, "study.yaml");
    EXPECT_TRUE(d.notes.empty());
    EXPECT_EQ(d.setting("jobs"), "2");
    d.set_setting("finetune.epochs", "3");
    const std::string again = experiments::write_study_design(d);
    EXPECT_TRUE(has(again, "jobs: 2\n")) << again;
    EXPECT_TRUE(has(again, "finetune:\n  lrs: [1.0e-3]\n  epochs: 3\n")) << again;
}

TEST(StudyFields, EveryKeyIsDocumentedAndCheckedAsTheLoaderChecksIt) {
    test_support::TempDir dir(test_support::per_test_name("tupe_design"));
    for (const auto& f : experiments::study_field_infos()) EXPECT_FALSE(f.doc.empty()) << f.key;
    EXPECT_EQ(experiments::check_study_value("jobs", "2"), "");
    EXPECT_EQ(experiments::check_study_value("finetune.lrs", "[1e-3, 2e-3]"), "");
    EXPECT_EQ(experiments::check_study_value("nope", "1"), "unknown key");
    // The same message as the loader's, without its location.
    for (const auto& [key, value, yaml] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {"jobs", "0", "jobs: 0\n"},
             {"analysis.ablation", "half", "analysis: {ablation: half}\n"},
             {"finetune.warmup_ratio", "2", "finetune: {warmup_ratio: 2}\n"}}) {
        const std::string form = experiments::check_study_value(key, value);
        ASSERT_FALSE(form.empty()) << key;
        try {
            load_text(dir, yaml);
            ADD_FAILURE() << "the loader took " << yaml;
        } catch (const experiments::ConfigError& e) {
            EXPECT_EQ(e.message(), form) << key;
        }
    }
}

TEST(ConfigFields, EveryConfigKeyHasItsDocumentationKindAndChoices) {
    const auto& infos = engine::config_field_infos();
    std::vector<std::string> keys;
    for (const auto& f : infos) {
        keys.push_back(f.key);
        EXPECT_FALSE(f.doc.empty()) << f.key;
    }
    EXPECT_EQ(keys, engine::config_keys());
    EXPECT_EQ(engine::find_config_field("model.absolute_position")->choices,
              engine::absolute_position_schemes());
    EXPECT_EQ(engine::find_config_field("model.relative_position")->choices,
              engine::relative_position_schemes());
    EXPECT_EQ(engine::find_config_field("model.preset")->choices, engine::model_presets());
    EXPECT_EQ(engine::find_config_field("model.untie_cls")->kind,
              engine::ConfigFieldInfo::Kind::kBool);
    EXPECT_EQ(engine::find_config_field("train.lr")->kind, engine::ConfigFieldInfo::Kind::kNumber);
    EXPECT_EQ(engine::find_config_field("train.lr")->default_text, "0.0005");
    EXPECT_EQ(engine::find_config_field("nope"), nullptr);
}

TEST(ConfigFields, AValueIsCheckedAsTheLoaderChecksIt) {
    const engine::PretrainConfig base;
    EXPECT_EQ(engine::check_config_value(base, "model.hidden_size", "64"), "");
    EXPECT_EQ(engine::check_config_value(base, "model.preset", "tupe-r"), "");
    for (const auto& [key, value] :
         std::vector<std::pair<std::string, std::string>>{{"model.num_attention_heads", "3"},
                                                          {"model.untie_cls", "maybe"},
                                                          {"train.warmup_steps", "-1"},
                                                          {"model.preset", "tupe-z"}}) {
        const std::string form = engine::check_config_value(base, key, value);
        ASSERT_FALSE(form.empty()) << key;
        try {
            experiments::load_pretrain_config_from_string(key.substr(0, key.find('.')) + ":\n  " +
                                                              key.substr(key.find('.') + 1) + ": " +
                                                              value + "\n",
                                                          "c.yaml");
            ADD_FAILURE() << "the loader took " << key << "=" << value;
        } catch (const experiments::ConfigError& e) {
            // The loader's message names the same rule (it may add its file and line).
            EXPECT_TRUE(has(std::string(e.what()), form.substr(form.find(':') + 1)) ||
                        has(std::string(e.what()), form))
                << e.what() << " vs " << form;
        }
    }
}

TEST(PlanCost, CountsJobsAsTheRunnerPlansThemAndPricesThemAtTheBenchRate) {
    test_support::TempDir dir(test_support::per_test_name("tupe_design"));
    const auto spec = load_text(
        dir,
        "name: p\nvariants: [bert-a, tupe-a]\ncheckpoints: [0.5, 1.0]\n"
        "model: {size: tiny}\ntrain: {steps: 100, batch_size: 8}\ndata: {max_seq_len: 32}\n"
        "glue: {data: builtin, tasks: [syn-bshift, syn-mrpc], synthetic_train: 50,"
        " synthetic_dev: 20}\n"
        "finetune: {lrs: [1.0e-3, 2.0e-3], seeds: [1, 2], epochs: 1}\n"
        "analysis: {ablation: zero}\n");
    const auto c = experiments::count_plan(spec);
    EXPECT_EQ(c.pretrain, 2);
    EXPECT_EQ(c.zero_shot, 2 * 2);         // variants x snapshots
    EXPECT_EQ(c.finetune, 2 * 2 * 2 * 2);  // variants x snapshots x lrs x seeds
    EXPECT_EQ(c.analyses, 2 * 2);          // the final snapshot and the ablation, per variant
    EXPECT_FALSE(c.every_task);
    // Pretraining work by hand: steps x batch x seq tokens at 3 x forward FLOPs per token.
    const auto& tupe = spec.variants[1];
    const auto f = engine::count_step_flops(tupe.config.model, 1, 32, 4);  // 15% of 32 -> 4
    const double work = 100.0 * 8 * 32 * 3 * f.forward() / 32;
    EXPECT_NEAR(experiments::job_work(spec, tupe, true, ""), work, work * 1e-12);
    const auto rate = experiments::parse_bench_json(
        R"({"size": "tiny", "seq": 32, "batch": 8, "threads": 2,
            "variants": [{"variant": "tupe-a", "achieved_flops": 2e9},
                         {"variant": "bert-a", "achieved_flops": 4e9}]})");
    EXPECT_EQ(rate.description, "tupe bench --size tiny --seq 32 --batch 8, 2 threads");
    EXPECT_EQ(rate.rate_for("tupe-r"), 3e9);  // unmeasured: the median
    const auto e = experiments::estimate_plan(spec, rate);
    EXPECT_NEAR(e.pretrain_seconds,
                experiments::job_work(spec, spec.variants[0], true, "") / 4e9 + work / 2e9, 1e-9);
    EXPECT_GT(e.finetune_seconds, 0);
    EXPECT_THROW(experiments::parse_bench_json("{}"), std::invalid_argument);
    EXPECT_THROW(experiments::parse_bench_json("not json"), std::invalid_argument);
}

}  // namespace
