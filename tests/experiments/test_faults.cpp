// Faults a run must survive, with real processes: a disk that fills up while a checkpoint is
// written (a file-size limit, `ulimit -f`, with SIGXFSZ ignored so that writes fail with EFBIG as
// on a full disk). The run must end with one line naming the file, not an abort, and the
// previous checkpoint must still load and resume.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/test_support.h"

namespace fs = std::filesystem;

namespace {

using test_support::quote;

class FaultTest : public test_support::TempDirTest {
  protected:
    FaultTest() : TempDirTest(test_support::per_test_name("tupe_faults")) {}
    void SetUp() override { test_support::write_tiny_pretraining(dir_); }
    test_support::CliResult tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }
    // `tupe ARGS` under a file-size limit of `kib` KiB, SIGXFSZ ignored (a full disk).
    test_support::CliResult tupe_limited(const std::string& args, int kib) const {
        return test_support::run_cli(
            "/bin/sh",
            "-c " + quote("ulimit -f " + std::to_string(kib * 2) + "; trap '' XFSZ; exec " +
                          quote(TUPE_CLI) + " " + args),
            dir_ / "stderr.txt");
    }
};

}  // namespace

TEST_F(FaultTest, FullDiskDuringACheckpointIsOneLineAndKeepsThePreviousOne) {
    const std::string cfg = quote((dir_ / "tiny.yaml").string());
    const std::string run = quote((dir_ / "run").string());
    auto first = tupe("pretrain --config " + cfg + " --out " + run);
    ASSERT_EQ(first.status, 0) << first.err;
    const fs::path ckpt = dir_ / "run" / "checkpoint.pt";
    ASSERT_GT(fs::file_size(ckpt), 200u * 1024);  // the limit below is smaller
    const auto before = test_support::read_file(ckpt);

    // ulimit -f counts 512-byte blocks in dash and 1024-byte blocks in bash: 2 x kib blocks is
    // at most 2 x 100 KiB either way, below the checkpoint's size, above every other file's.
    auto full =
        tupe_limited("pretrain --config " + cfg + " --out " + run + " --set train.steps=6", 100);
    EXPECT_NE(full.status, 0) << full.err;
    EXPECT_NE(full.status, -1) << "killed by a signal instead of an error: " << full.err;
    EXPECT_EQ(full.err.find("terminate called"), std::string::npos) << full.err;
    std::istringstream lines(full.err);
    std::string line, error;
    while (std::getline(lines, line))
        if (line.rfind("tupe pretrain: error", 0) == 0 || line.rfind("tupe pretrain:", 0) == 0)
            error = line;
    EXPECT_NE(error.find("checkpoint.pt"), std::string::npos) << full.err;
    EXPECT_NE(error.find("previous checkpoint is kept"), std::string::npos) << full.err;
    EXPECT_FALSE(fs::exists(dir_ / "run" / "checkpoint.pt.tmp"));
    EXPECT_EQ(test_support::read_file(ckpt), before);  // untouched

    // With room again, the same command resumes from step 3 and finishes.
    auto again = tupe("pretrain --config " + cfg + " --out " + run + " --set train.steps=6");
    EXPECT_EQ(again.status, 0) << again.err;
    const std::string said = again.out + again.err;
    EXPECT_NE(said.find("resumed from"), std::string::npos) << said;
    EXPECT_NE(said.find("at step 3"), std::string::npos) << said;
}
