// End-to-end tests of the `tupe` executable: each bad input a user could give ends in one line
// on stderr naming the file, key or line, and a non-zero status; the good paths write what
// they promise (a checkpoint, tokens, .npy files, a torch.load-able export).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/config.h"
#include "support/test_support.h"

namespace fs = std::filesystem;

namespace {

using Result = test_support::CliResult;
using test_support::quote;
using test_support::read_file;

class CliTest : public test_support::TempDirTest {
  protected:
    CliTest() : TempDirTest(test_support::per_test_name("tupe_cli")) {}
    void SetUp() override { test_support::write_tiny_pretraining(dir_); }

    Result tupe(const std::string& args) const {
        return test_support::run_tupe(args, dir_ / "stderr.txt");
    }

    // Non-zero status and exactly one error line, naming `needle` (progress lines printed
    // before the failure may precede it).
    void expect_one_line_error(const Result& r, const std::string& needle) const {
        EXPECT_NE(r.status, 0);
        std::istringstream lines(r.err);
        std::string line, error_line;
        int errors = 0;
        while (std::getline(lines, line))
            if (line.rfind("tupe ", 0) == 0 && line.find(": ") != std::string::npos &&
                line.find("pretrain ") != 0) {
                ++errors;
                error_line = line;
            }
        EXPECT_EQ(errors, 1) << "stderr: " << r.err;
        EXPECT_NE(error_line.find(needle), std::string::npos) << "stderr: " << r.err;
    }

    std::string pretrained() const {
        auto r = tupe("pretrain --config " + quote((dir_ / "tiny.yaml").string()) + " --out " +
                      quote((dir_ / "run").string()));
        EXPECT_EQ(r.status, 0) << r.err;
        return (dir_ / "run" / "checkpoint.pt").string();
    }
};

}  // namespace

TEST_F(CliTest, TokenizePrintsWordpiecesPerLine) {
    auto r = tupe("tokenize --vocab " + quote((dir_ / "vocab.txt").string()) +
                  " --text 'The cats sat, unable.'");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "the cat ##s sat [UNK] un ##able .\n");
    auto ids = tupe("tokenize --ids --vocab " + quote((dir_ / "vocab.txt").string()) +
                    " --text 'the cat'");
    EXPECT_EQ(ids.out, "5 6\n");
}

TEST_F(CliTest, MissingOrMalformedVocabIsOneLine) {
    expect_one_line_error(tupe("tokenize --vocab /nonexistent/vocab.txt --text hi"),
                          "/nonexistent/vocab.txt");
    std::ofstream(dir_ / "bad.txt") << "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n";
    expect_one_line_error(
        tupe("tokenize --vocab " + quote((dir_ / "bad.txt").string()) + " --text hi"), "[MASK]");
}

TEST_F(CliTest, UnknownCommandAndOptionAreUsageErrors) {
    EXPECT_EQ(tupe("frobnicate").status, 2);
    auto r = tupe("tokenize --vocab x --txet hi");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("--txet"), std::string::npos);
}

TEST_F(CliTest, ConfigErrorsNameKeyAndLine) {
    std::ofstream(dir_ / "bad.yaml") << "model:\n  preset: tupe-z\n";
    expect_one_line_error(tupe("pretrain --config " + quote((dir_ / "bad.yaml").string())),
                          "bad.yaml:2");
    std::ofstream(dir_ / "typo.yaml") << "train:\n  stpes: 3\n";
    auto r = tupe("pretrain --config " + quote((dir_ / "typo.yaml").string()));
    expect_one_line_error(r, "train.steps");
    expect_one_line_error(tupe("pretrain --config /nonexistent.yaml"), "/nonexistent.yaml");
}

// `tupe info --format json` walks the config table: every model.* field at its value, and the
// fields the scheme's rows read (tupe-r: T5's and the shared term's).
TEST_F(CliTest, InfoJsonHoldsEveryModelFieldAndTheSchemesFields) {
    const std::string ckpt = pretrained();
    auto info = tupe("info " + quote(ckpt) + " --format json");
    ASSERT_EQ(info.status, 0) << info.err;
    const auto j = nlohmann::json::parse(info.out);
    engine::PretrainConfig config;
    config.model = engine::make_model_config("tupe-r", "tiny");
    for (const auto& key : engine::config_keys()) {
        if (key.rfind("model.", 0) != 0) continue;
        EXPECT_TRUE(j.contains(key.substr(6))) << key;
    }
    EXPECT_EQ(j["preset"], "tupe-r");
    EXPECT_EQ(j["rel_pos_bins"], config.model.rel_pos_bins);
    EXPECT_EQ(j["scheme_fields"],
              (std::vector<std::string>{"shared_pos_term", "rel_pos_bins", "max_rel_pos"}));
}

TEST_F(CliTest, EmptyCorpusNamesTheFile) {
    std::ofstream(dir_ / "empty.txt") << "\n\n";
    auto r = tupe("pretrain --config " + quote((dir_ / "tiny.yaml").string()) +
                  " --set data.corpus=" + quote((dir_ / "empty.txt").string()) + " --out " +
                  quote((dir_ / "r").string()));
    expect_one_line_error(r, "empty.txt");
}

TEST_F(CliTest, PretrainInfoInspectExport) {
    const std::string ckpt = pretrained();
    auto info = tupe("info " + quote(ckpt));
    EXPECT_EQ(info.status, 0) << info.err;
    EXPECT_NE(info.out.find("tupe-r"), std::string::npos);
    EXPECT_NE(info.out.find("step 3 of 3"), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("positional"), std::string::npos);

    auto inspect = tupe("inspect " + quote(ckpt) + " --text 'the cat sat' --out " +
                        quote((dir_ / "insp").string()));
    EXPECT_EQ(inspect.status, 0) << inspect.err;
    EXPECT_EQ(read_file(dir_ / "insp" / "tokens.txt"), "[CLS]\nthe\ncat\nsat\n[SEP]\n");
    for (const char* f : {"input_ids.npy", "layer0_logits.npy", "layer1_probs.npy"})
        EXPECT_TRUE(fs::exists(dir_ / "insp" / f)) << f;

    auto exp = tupe("export " + quote(ckpt) + " --out " + quote((dir_ / "w.pt").string()));
    EXPECT_EQ(exp.status, 0) << exp.err;
    ASSERT_TRUE(fs::exists(dir_ / "w.pt"));
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "python3-torch not installed: torch.load of the export not checked";
    const std::string py = "/usr/bin/python3 -c \"import torch; d = torch.load('" +
                           (dir_ / "w.pt").string() +
                           "'); print(len(d), tuple(d['bert.position_bias.pos.weight'].shape), "
                           "tuple(d['bert.position_bias.relative_attention_bias.weight'].shape))\"";
    FILE* pipe = popen(py.c_str(), "r");
    std::array<char, 256> buf{};
    std::string out;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
    EXPECT_EQ(pclose(pipe), 0);
    EXPECT_NE(out.find("(33, 32)"), std::string::npos) << out;
    EXPECT_NE(out.find("(33, 2)"), std::string::npos) << out;
}

TEST_F(CliTest, BadCheckpointsAndTextAreOneLine) {
    const std::string ckpt = pretrained();
    expect_one_line_error(tupe("info /nonexistent/ckpt.pt"), "/nonexistent/ckpt.pt");
    fs::copy_file(ckpt, dir_ / "cut.pt");
    fs::resize_file(dir_ / "cut.pt", fs::file_size(ckpt) / 3);
    expect_one_line_error(tupe("info " + quote((dir_ / "cut.pt").string())), "cut.pt");
    std::string long_text;
    for (int i = 0; i < 40; ++i) long_text += "the cat ";
    expect_one_line_error(tupe("inspect " + quote(ckpt) + " --text " + quote(long_text) +
                               " --out " + quote((dir_ / "x").string())),
                          "32");
    // A run directory holding another variant refuses to resume into it.
    auto r = tupe("pretrain --config " + quote((dir_ / "tiny.yaml").string()) +
                  " --set model.preset=bert-a --out " + quote((dir_ / "run").string()));
    expect_one_line_error(r, "model.preset");
}

TEST_F(CliTest, AnalyzeWritesMapsFiguresAndIndex) {
    const std::string ckpt = pretrained();  // tupe-r, tiny, 32 positions
    const fs::path out = dir_ / "analysis";
    // The trained TUPE-R against a freshly initialised BERT-A (the same vocabulary).
    auto r = tupe("analyze " + quote(ckpt) + " --corpus " + quote((dir_ / "corpus.txt").string()) +
                  " --sentences 6 --out " + quote(out.string()) + " --compare init:bert-a:tiny" +
                  " --vocab " + quote((dir_ / "vocab.txt").string()));
    ASSERT_EQ(r.status, 0) << r.err;
#if !TUPE_WITH_QT
    // The headless build writes every data file and says, once, why there are no figures.
    EXPECT_NE(r.err.find("figures need the Qt build"), std::string::npos) << r.err;
    for (const char* f : {"tupe/total_h0.npy", "cls/from_cls_h0.csv", "index.json",
                          "compare/terms/word_pos_h0.npy"})
        EXPECT_TRUE(fs::exists(out / f)) << f;
    EXPECT_FALSE(fs::exists(out / "figures"));
    return;
#endif
    EXPECT_EQ(r.err, "");  // no Qt chatter on stderr
    EXPECT_NE(r.out.find("tupe-r, 6 sentence(s)"), std::string::npos) << r.out;
    const std::string index = read_file(out / "index.json");
    for (const char* f : {"tupe/total_h0.npy", "tupe/total_h1.csv", "cls/from_cls_h0.csv",
                          "figures/fig6_tupe_correlation.png", "figures/cls_heatmaps.png",
                          "figures/cls_from_lines.png", "figures/compare_cls.png"}) {
        EXPECT_TRUE(fs::exists(out / f)) << f;
        EXPECT_NE(index.find(std::string("\"") + f + "\""), std::string::npos) << f;
    }
    EXPECT_NE(index.find("unties positions"), std::string::npos);  // why there are no terms
    EXPECT_FALSE(fs::exists(out / "terms"));
    const std::string compare = read_file(out / "compare" / "index.json");
    EXPECT_NE(compare.find("\"variant\": \"bert-a\""), std::string::npos) << compare.substr(0, 300);
    for (const char* f : {"terms/word_pos_h0.npy", "terms/pos_word_h1.csv",
                          "figures/fig2_terms_head0.png", "figures/fig2_terms_all_heads.png"})
        EXPECT_TRUE(fs::exists(out / "compare" / f)) << f;
    EXPECT_FALSE(fs::exists(out / "compare" / "tupe"));

    std::string long_text;
    for (int i = 0; i < 40; ++i) long_text += "the cat ";
    expect_one_line_error(tupe("analyze " + quote(ckpt) + " --text " + quote(long_text) +
                               " --out " + quote((dir_ / "x").string())),
                          "32");
    EXPECT_EQ(tupe("analyze " + quote(ckpt) + " --text a --corpus b --out x").status, 2);
}

TEST_F(CliTest, DoctorNamesTheBlasAndBenchRefusesAnUnknownDtype) {
    const Result doctor = tupe("doctor --no-matmul");
    EXPECT_EQ(doctor.status, 0) << doctor.err;
    EXPECT_NE(doctor.out.find("libtorch"), std::string::npos) << doctor.out;
    EXPECT_NE(doctor.out.find("blas library"), std::string::npos) << doctor.out;
    expect_one_line_error(tupe("bench --dtype fp64"), "expected fp32, bf16 or auto, got 'fp64'");

    // An environment that pins OpenBLAS to its AVX2 kernels on an AVX-512 CPU is named, and
    // only there (the flags as /proc/cpuinfo lists them; OpenBLAS as the loaded BLAS).
    const auto pinned = test_support::run_cli("env OPENBLAS_CORETYPE=Haswell " + quote(TUPE_CLI),
                                              "doctor --no-matmul", dir_ / "stderr.txt");
    ASSERT_EQ(pinned.status, 0) << read_file(dir_ / "stderr.txt");
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, flags;
    while (std::getline(cpuinfo, line))
        if (line.rfind("flags", 0) == 0) {
            flags = line + " ";
            break;
        }
    bool avx512 = true;
    for (const char* f : {" avx512f ", " avx512bw ", " avx512vl ", " avx512dq "})
        avx512 = avx512 && flags.find(f) != std::string::npos;
    const bool openblas_haswell = pinned.out.find("blas core         Haswell") != std::string::npos;
    EXPECT_EQ(pinned.out.find("keeps OpenBLAS on its AVX2 kernels") != std::string::npos,
              avx512 && openblas_haswell)
        << pinned.out;
}

TEST_F(CliTest, GlueStatsFailsWhenASplitFileIsMalformed) {
    fs::create_directories(dir_ / "glue" / "RTE");
    const std::string header = "index\tsentence1\tsentence2\tlabel\n";
    std::ofstream(dir_ / "glue" / "RTE" / "train.tsv") << header << "0\ta\tb\tentailment\n";
    std::ofstream(dir_ / "glue" / "RTE" / "dev.tsv") << header << "0\ta\tb\tentailment\n";
    const Result good = tupe("glue stats --dir " + quote((dir_ / "glue").string()));
    EXPECT_EQ(good.status, 0) << good.err;
    std::ofstream(dir_ / "glue" / "RTE" / "dev.tsv", std::ios::app) << "1\tonly two\n";
    const Result bad = tupe("glue stats --dir " + quote((dir_ / "glue").string()));
    expect_one_line_error(bad, "1 split file(s) could not be read");
    EXPECT_NE(bad.out.find("dev.tsv:3: expected 4 tab-separated fields, got 2"), std::string::npos)
        << bad.out;
}

// `tupe extrapolate` on a learned table (tupe-r, 32 positions, trained at L = 32) and on ALiBi:
// n/a rows where the table ends, finite losses beyond L where the scheme extrapolates, the
// floor, the files under --out, and one-line usage errors.
TEST_F(CliTest, ExtrapolateReportsLengthsShiftsAndTheFloor) {
    const std::string ckpt = pretrained();
    auto alibi = tupe("pretrain --config " + quote((dir_ / "tiny.yaml").string()) +
                      " --set model.preset=alibi --out " + quote((dir_ / "alibi").string()));
    ASSERT_EQ(alibi.status, 0) << alibi.err;
    const std::string alibi_ckpt = (dir_ / "alibi" / "checkpoint.pt").string();
    const std::string corpus = " --corpus " + quote((dir_ / "corpus.txt").string());
    const std::string both = "extrapolate " + quote(ckpt) + " " + quote(alibi_ckpt) + corpus;

    auto r = tupe(both + " --lengths 1,2 --out " + quote((dir_ / "ex").string()));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("tupe-r  " + ckpt), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("alibi  " + alibi_ckpt), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("n/a: table of 32 positions"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("shift +16"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("floor: unigram"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("extrapolate [2/2] alibi"), std::string::npos) << r.err;
    EXPECT_NE(read_file(dir_ / "ex" / "extrapolation.json").find("\"unigram_floor\""),
              std::string::npos);
    // One header and, per checkpoint, two length rows and three shift rows.
    std::istringstream csv(read_file(dir_ / "ex" / "extrapolation.csv"));
    std::string line;
    int rows = 0;
    bool alibi_beyond = false;
    while (std::getline(csv, line)) {
        ++rows;
        // alibi at f = 2: 64 tokens from offset 0, available, with a loss.
        if (line.rfind("alibi,", 0) == 0 && line.find(",length,2,64,0,true,") != std::string::npos)
            alibi_beyond = line.find(",true,,") == std::string::npos;
    }
    EXPECT_EQ(rows, 11);
    EXPECT_TRUE(alibi_beyond) << read_file(dir_ / "ex" / "extrapolation.csv");

    auto json = tupe("extrapolate " + quote(alibi_ckpt) + corpus + " --lengths 1 --format json");
    ASSERT_EQ(json.status, 0) << json.err;
    EXPECT_EQ(json.out.rfind("{", 0), 0u) << json.out;

    auto usage = tupe("extrapolate" + corpus);
    EXPECT_EQ(usage.status, 2);
    expect_one_line_error(usage, "CHECKPOINT");
    for (const char* bad : {"0", "x", "1,,2"}) {
        auto b = tupe("extrapolate " + quote(ckpt) + corpus + " --lengths " + quote(bad));
        EXPECT_EQ(b.status, 2) << bad;
        expect_one_line_error(b, "--lengths");
    }
    expect_one_line_error(tupe("extrapolate " + quote(ckpt) + " --corpus /nonexistent/corpus.txt"),
                          "/nonexistent/corpus.txt");
}

// `tupe ablate` on the tiny tupe-r: one row per layer and head plus the whole model, on the
// run's own held-out documents by default, the files under --out, and one-line errors.
TEST_F(CliTest, AblateReportsEveryHeadAndTheWholeModel) {
    const std::string ckpt = pretrained();
    auto r = tupe("ablate " + quote(ckpt) + " --windows 4 --out " + quote((dir_ / "ab").string()));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("per head: static bias"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(held-out documents)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("    all   all"), std::string::npos) << r.out;
    // One header and, for tiny (2 layers x 2 heads), 4 head rows and the whole-model row.
    std::istringstream csv(read_file(dir_ / "ab" / "ablation.csv"));
    int rows = 0;
    for (std::string line; std::getline(csv, line);) ++rows;
    EXPECT_EQ(rows, 6) << read_file(dir_ / "ab" / "ablation.csv");
    EXPECT_NE(read_file(dir_ / "ab" / "ablation.json").find("\"delta_loss\""), std::string::npos);

    const std::string corpus = " --corpus " + quote((dir_ / "corpus.txt").string());
    auto shuffled = tupe("ablate " + quote(ckpt) + corpus + " --windows 4 --mode shuffle");
    ASSERT_EQ(shuffled.status, 0) << shuffled.err;
    EXPECT_NE(shuffled.out.find("mode shuffle"), std::string::npos) << shuffled.out;
    auto bad = tupe("ablate " + quote(ckpt) + " --mode random");
    EXPECT_EQ(bad.status, 2);
    expect_one_line_error(bad, "--mode");
    expect_one_line_error(tupe("ablate " + quote(ckpt) + " --corpus /nonexistent/corpus.txt"),
                          "/nonexistent/corpus.txt");
}

// `tupe pretrain --keep-every 1` keeps a snapshot per step; `tupe heads RUN_DIR` reads them in
// step order (a row per step, layer and head), writes its files under --out; `tupe ablate
// --patch-from` the run's own checkpoint changes nothing and does not mix with --mode.
TEST_F(CliTest, HeadsReadEverySnapshotAndPatchingFromItselfChangesNothing) {
    auto r = tupe("pretrain --config " + quote((dir_ / "tiny.yaml").string()) + " --out " +
                  quote((dir_ / "run").string()) + " --keep-every 1");
    ASSERT_EQ(r.status, 0) << r.err;
    for (const char* f :
         {"checkpoint-0.pt", "checkpoint-1.pt", "checkpoint-2.pt", "checkpoint-3.pt"})
        EXPECT_TRUE(fs::exists(dir_ / "run" / f)) << f;
    const std::string run = quote((dir_ / "run").string());
    auto heads = tupe("heads " + run + " --windows 2 --out " + quote((dir_ / "heads").string()));
    ASSERT_EQ(heads.status, 0) << heads.err;
    EXPECT_NE(heads.out.find("heads per type:"), std::string::npos) << heads.out;
    std::istringstream lines(read_file(dir_ / "heads" / "heads.csv"));
    std::vector<std::string> rows;
    for (std::string line; std::getline(lines, line);) rows.push_back(line);
    // A header, then steps 0..3 (checkpoint.pt is step 3 again: read once) x 2 layers x 2 heads.
    ASSERT_EQ(rows.size(), 1u + 4 * 4) << read_file(dir_ / "heads" / "heads.csv");
    EXPECT_EQ(rows[0].rfind("run,checkpoint,step,layer,head,type,", 0), 0u) << rows[0];
    EXPECT_NE(rows[1].find(",0,0,0,"), std::string::npos) << rows[1];    // step 0 first
    EXPECT_NE(rows[16].find(",3,1,1,"), std::string::npos) << rows[16];  // step 3 last
    EXPECT_NE(read_file(dir_ / "heads" / "heads.json").find("\"rule\""), std::string::npos);
#if TUPE_WITH_QT
    EXPECT_TRUE(fs::exists(dir_ / "heads" / "figures" / "head_types.png"));
#endif
    expect_one_line_error(tupe("heads " + quote((dir_ / "nothing").string())),
                          (dir_ / "nothing").string());

    const std::string ckpt = quote((dir_ / "run" / "checkpoint.pt").string());
    auto patched = tupe("ablate " + ckpt + " --windows 4 --no-share --format csv --patch-from " +
                        quote((dir_ / "run" / "checkpoint-3.pt").string()));
    ASSERT_EQ(patched.status, 0) << patched.err;
    std::istringstream prows(patched.out);
    std::string line;
    std::getline(prows, line);  // header
    int n = 0;
    for (; std::getline(prows, line); ++n) {
        // variant,checkpoint,mode,layer,head,loss,delta_loss,...
        std::vector<std::string> f;
        std::istringstream cells(line);
        for (std::string c; std::getline(cells, c, ',');) f.push_back(c);
        ASSERT_GT(f.size(), 6u) << line;
        EXPECT_EQ(f[2], "patch") << line;
        EXPECT_EQ(std::stod(f[6]), 0.0) << line;
    }
    EXPECT_EQ(n, 5);  // 4 heads and the whole model
    auto both = tupe("ablate " + ckpt + " --mode zero --patch-from " + ckpt);
    EXPECT_EQ(both.status, 2);
    expect_one_line_error(both, "--patch-from");
}

// `tupe curves --format csv|json` prints every row of metrics.tsv as written; `tupe inspect
// --bertviz` writes bertviz's layout beside the .npy files and refuses other extensions.
TEST_F(CliTest, CurvesPrintRawPointsAndInspectWritesBertviz) {
    const std::string ckpt = pretrained();
    const std::string run = (dir_ / "run").string();
    std::istringstream tsv(read_file(dir_ / "run" / "metrics.tsv"));
    size_t rows = 0;
    for (std::string line; std::getline(tsv, line);) rows += !line.empty();
    ASSERT_GT(rows, 1u);
    --rows;  // the header

    auto csv = tupe("curves " + quote(run) + " --format csv");
    EXPECT_EQ(csv.status, 0) << csv.err;
    std::istringstream csv_lines(csv.out);
    std::string line;
    std::getline(csv_lines, line);
    EXPECT_EQ(line, "run,split,metric,step,value,time");
    size_t csv_rows = 0;
    while (std::getline(csv_lines, line)) {
        ++csv_rows;
        EXPECT_EQ(line.rfind(run + ",", 0), 0u) << line;
    }
    EXPECT_EQ(csv_rows, rows);

    auto json = tupe("curves " + quote(run) + " --format json");
    EXPECT_EQ(json.status, 0) << json.err;
    EXPECT_NE(json.out.find("\"runs\""), std::string::npos) << json.out;
    EXPECT_NE(json.out.find("\"run\": \"" + run + "\""), std::string::npos) << json.out;
    size_t points = 0;
    for (auto at = json.out.find("\"split\""); at != std::string::npos;
         at = json.out.find("\"split\"", at + 1))
        ++points;
    EXPECT_EQ(points, rows);
    expect_one_line_error(tupe("curves " + quote(run) + " --format xml"), "--format");

    auto inspect = tupe("inspect " + quote(ckpt) + " --text 'the cat sat' --out " +
                        quote((dir_ / "insp").string()) + " --bertviz " +
                        quote((dir_ / "insp" / "attention.html").string()));
    EXPECT_EQ(inspect.status, 0) << inspect.err;
    EXPECT_TRUE(fs::exists(dir_ / "insp" / "token_type_ids.npy"));
    const std::string html = read_file(dir_ / "insp" / "attention.html");
    EXPECT_NE(html.find("<script type=\"application/json\" id=\"attention\">"), std::string::npos);
    EXPECT_NE(html.find("\"tokens\":[\"[CLS]\",\"the\",\"cat\",\"sat\",\"[SEP]\"]"),
              std::string::npos);
    expect_one_line_error(tupe("inspect " + quote(ckpt) + " --text 'the cat' --out " +
                               quote((dir_ / "insp").string()) + " --bertviz a.txt"),
                          "--bertviz");
}
