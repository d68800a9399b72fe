// The run folder's resolved config (out_dir/config.yaml, engine::config_to_yaml) as a config
// `tupe pretrain --config` accepts back: a tiny CPU run A, then a run B from A's config.yaml,
// must resolve to the same config and log the same losses at every step.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "engine/config.h"
#include "experiments/config_loader.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;
using test_support::quote;
using test_support::read_file;

class ResolvedConfigTest : public test_support::TempDirTest {
  protected:
    ResolvedConfigTest() : TempDirTest(test_support::per_test_name("tupe_resolved")) {}
    void SetUp() override { test_support::write_tiny_pretraining(dir_); }

    test_support::CliResult tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }
};

/// metrics.tsv without its wall-clock column: "step split metric value" per row.
std::vector<std::string> metrics_without_time(const fs::path& run) {
    std::istringstream in(read_file(run / "metrics.tsv"));
    std::vector<std::string> rows;
    std::string line;
    while (std::getline(in, line)) rows.push_back(line.substr(0, line.rfind('\t')));
    return rows;
}

TEST_F(ResolvedConfigTest, PretrainingFromARunsConfigYamlTrainsTheSameRun) {
    const fs::path a = dir_ / "A", b = dir_ / "B";
    // Non-default values on top of tiny.yaml (tupe-r, one thread, dropout on): each must
    // survive the round trip for the losses to agree.
    const std::string sets =
        " --set train.steps=6 --set train.log_interval=1 --set train.eval_interval=2"
        " --set train.seed=7 --set train.lr=1e-3 --set train.warmup_steps=2"
        " --set train.device=cpu --set train.tensorboard=false --set data.mask_prob=0.25"
        " --set model.rel_pos_bins=16";
    auto ra = tupe("pretrain --config " + quote((dir_ / "tiny.yaml").string()) + " --out " +
                   quote(a.string()) + sets);
    ASSERT_EQ(ra.status, 0) << read_file(dir_ / "stderr.txt");
    ASSERT_TRUE(fs::is_regular_file(a / "config.yaml"));
    EXPECT_TRUE(fs::is_regular_file(a / "config.txt"));  // still written (the flat form)

    auto rb = tupe("pretrain --config " + quote((a / "config.yaml").string()) + " --out " +
                   quote(b.string()));
    ASSERT_EQ(rb.status, 0) << read_file(dir_ / "stderr.txt");

    // The same resolved config, but for out_dir.
    engine::PretrainConfig ca = experiments::load_pretrain_config((a / "config.yaml").string());
    engine::PretrainConfig cb = experiments::load_pretrain_config((b / "config.yaml").string());
    EXPECT_EQ(ca.out_dir, a.string());
    EXPECT_EQ(cb.out_dir, b.string());
    EXPECT_EQ(ca.train.steps, 6);
    EXPECT_EQ(ca.train.seed, 7u);
    EXPECT_EQ(ca.model.rel_pos_bins, 16);
    EXPECT_EQ(ca.model.preset, "tupe-r");
    cb.out_dir = ca.out_dir;
    EXPECT_EQ(engine::config_to_text(cb), engine::config_to_text(ca));
    // config.yaml and config.txt say the same.
    EXPECT_EQ(engine::config_to_text(ca), read_file(a / "config.txt"));

    // The same losses, learning rates and validation numbers at every step, to the digit.
    const auto ma = metrics_without_time(a), mb = metrics_without_time(b);
    ASSERT_GE(ma.size(), 1u + 6 * 2 + 3 * 2);  // header, train loss+lr x 6, validation x 3
    EXPECT_EQ(ma, mb);
}

}  // namespace
