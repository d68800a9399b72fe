// Tests of the GLUE readers on small fixtures written here, one per task layout (headers,
// CoLA without one, quotes inside fields, QQP short rows, CRLF, UTF-8, MNLI's two dev splits),
// their error messages, the JSON-lines reader, glue_stats, and the synthetic word-order tasks.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "experiments/glue_data.h"
#include "experiments/synthetic_tasks.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;
using experiments::find_task;
using experiments::read_glue_jsonl;
using experiments::read_glue_tsv;
using experiments::Split;

using test_support::read_file;
using test_support::write_file;

// A fresh empty directory under the test temp dir.
fs::path glue_dir(const std::string& name) {
    return test_support::fresh_dir(fs::path(testing::TempDir()) / ("tupe_glue_data_" + name));
}

// Reads a TSV fixture and returns the InputError's message; fails when nothing is thrown.
std::string tsv_error(const std::string& task, const fs::path& path) {
    try {
        read_glue_tsv(find_task(task), path.string());
    } catch (const engine::InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no InputError for " << path;
    return "";
}

std::string jsonl_error(const std::string& task, const fs::path& path) {
    try {
        read_glue_jsonl(find_task(task), path.string());
    } catch (const engine::InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no InputError for " << path;
    return "";
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// Fixture files in the GLUE layouts (two examples per split), keyed by task folder/file.
const std::map<std::string, std::string> kFixtures = {
    {"CoLA/train.tsv",
     "gj04\t1\t\tOur friends won't buy this analysis.\n"
     "gj04\t0\t*\tThey drank the pub.\n"},
    {"CoLA/dev.tsv", "gj04\t1\t\tThe sailors rode the breeze.\n"},
    {"SST-2/train.tsv",
     "sentence\tlabel\nhide new secretions \t0\nthe greatest \"musicians\" \t1\n"},
    {"SST-2/dev.tsv", "sentence\tlabel\nit 's a charming journey . \t1\n"},
    {"MRPC/train.tsv",
     "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
     "1\t702876\t702977\tAmrozi accused his brother , whom he called \"the "
     "witness\" , of distorting\tReferring to him as only \"the witness\" , "
     "Amrozi accused\n"
     "0\t2108705\t2108831\tYucaipa owned Dominick 's\tYucaipa bought it\n"},
    {"MRPC/dev.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA a\tB b\n"},
    {"STS-B/train.tsv",
     "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
     "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\tAn air "
     "plane is taking off.\t5.000\n"
     "1\tmain-captions\tMSRvid\t2012test\t0004\tnone\tnone\tA man is playing a flute.\tA man "
     "is playing a bamboo flute.\t3.800\n"},
    {"STS-B/dev.tsv",
     "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
     "0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man with a hard hat is "
     "dancing.\tA man wearing a hard hat is dancing.\t0\n"},
    {"QQP/train.tsv",
     "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
     "133273\t213221\t213222\tHow is the life of a math student?\tWhich "
     "level of prepration is enough?\t0\n"
     "201841\t303345\t303346\tHow do I\n"
     "402555\t536040\t536041\tWhy is \"X\" so?\tWhy X?\t1\n"},
    {"QQP/dev.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t2\t3\ta\tb\t1\n"},
    {"MNLI/train.tsv",
     "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
     "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
     "0\t31193\t31193n\tgovernment\t( ( C\t( P\t(ROOT\t(ROOT\tConceptually cream skimming "
     "has two basic dimensions.\tProduct and geography are what make cream skimming "
     "work.\tneutral\tneutral\n"},
    {"MNLI/dev_matched.tsv",
     "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
     "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\t"
     "label5\tgold_label\n"
     "0\t63735\t63735n\tslate\tb1\tb2\tp1\tp2\tThe new rights are nice enough\tEveryone "
     "really likes the newest benefits\tneutral\tentailment\tneutral\tneutral\tneutral\t"
     "neutral\n"
     "1\t91383\t91383c\tgovernment\tb1\tb2\tp1\tp2\tThis site includes a list\tThe Government "
     "Executive articles\tcontradiction\tcontradiction\tcontradiction\tcontradiction\t"
     "contradiction\tcontradiction\n"},
    {"MNLI/dev_mismatched.tsv",
     "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
     "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\t"
     "label5\tgold_label\n"
     "0\t75290\t75290c\tletters\tb1\tb2\tp1\tp2\tYour contribution helped\tYour contribution "
     "did not help\tcontradiction\tcontradiction\tcontradiction\tcontradiction\t"
     "contradiction\tcontradiction\n"},
    {"QNLI/train.tsv",
     "index\tquestion\tsentence\tlabel\n"
     "0\tWhen did the third Digimon series begin?\tUnlike the two seasons "
     "before it\tnot_entailment\n"},
    {"QNLI/dev.tsv", "index\tquestion\tsentence\tlabel\n0\tq\ts\tentailment\n"},
    // CRLF line endings and UTF-8 text.
    {"RTE/train.tsv",
     "index\tsentence1\tsentence2\tlabel\r\n"
     "0\tNo Weapons of Mass Destruction Found in Iraq \"Yet\".\tWeapons of "
     "Mass Destruction Found in Iraq.\tnot_entailment\r\n"
     "1\tJos\xC3\xA9 Mar\xC3\xAD"
     "a Aznar visited \xE5\x8C\x97\xE4\xBA\xAC.\t"
     "Aznar visited Beijing.\tentailment\r\n"},
    {"RTE/dev.tsv", "index\tsentence1\tsentence2\tlabel\r\n0\ta\tb\tentailment\r\n"},
    {"WNLI/train.tsv",
     "index\tsentence1\tsentence2\tlabel\n"
     "0\tI stuck a pin through a carrot.\tThe carrot had a hole.\t1\n"},
    {"WNLI/dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\t0\n"},
};

// Writes every fixture under a fresh glue_data folder.
fs::path write_glue_dir(const std::string& name) {
    const fs::path dir = glue_dir(name);
    for (const auto& [file, text] : kFixtures) write_file(dir / file, text);
    return dir;
}

TEST(GlueRegistry, FindsByNameOrKeyIgnoringCase) {
    EXPECT_EQ(find_task("STS-B").key, "stsb");
    EXPECT_EQ(find_task("stsb").name, "STS-B");
    EXPECT_EQ(find_task("sts-b").name, "STS-B");
    EXPECT_EQ(find_task("Mnli").dev_splits,
              (std::vector<std::string>{"dev_matched", "dev_mismatched"}));
    EXPECT_EQ(find_task("SYN-sts-b").key, "syn-stsb");
    EXPECT_TRUE(find_task("syn-rte").synthetic);
    EXPECT_FALSE(find_task("rte").synthetic);
    try {
        find_task("glue");
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_TRUE(contains(e.what(), "\"glue\"")) << e.what();
        EXPECT_TRUE(contains(e.what(), "CoLA (cola)")) << e.what();
        EXPECT_TRUE(contains(e.what(), "WNLI")) << e.what();
    }
}

TEST(GlueRegistry, MatchesTheFormatDocument) {
    EXPECT_EQ(experiments::glue_tasks().size(), 17u);
    const auto& cola = find_task("cola");
    EXPECT_FALSE(cola.header);
    EXPECT_EQ(cola.text_a, 3);
    EXPECT_EQ(cola.text_b, -1);
    EXPECT_EQ(cola.label, 1);
    EXPECT_STREQ(analysis::metric_kind_name(cola.metric), "mcc");
    EXPECT_EQ(find_task("mnli").label, -1);
    EXPECT_EQ(find_task("mnli").default_epochs, 5);
    EXPECT_EQ(find_task("qqp").default_epochs, 5);
    EXPECT_EQ(find_task("qnli").default_epochs, 5);
    EXPECT_EQ(find_task("rte").default_epochs, 10);
    EXPECT_TRUE(find_task("stsb").regression);
    EXPECT_TRUE(find_task("stsb").labels.empty());
    EXPECT_STREQ(analysis::metric_kind_name(find_task("stsb").metric), "pearson_spearman");
    EXPECT_STREQ(analysis::metric_kind_name(find_task("mrpc").metric), "f1_accuracy");
    EXPECT_EQ(experiments::expected_split_size(find_task("mnli"), "dev_mismatched"), 9832);
    EXPECT_EQ(experiments::expected_split_size(find_task("syn-cola"), "train"), -1);
}

TEST(GlueTsv, ReadsEveryTaskLayout) {
    const fs::path dir = write_glue_dir("layouts");
    const auto load = [&](const std::string& task, const std::string& file) {
        return read_glue_tsv(find_task(task), (dir / task / file).string());
    };

    const Split cola = load("CoLA", "train.tsv");  // no header: the first row is data
    ASSERT_EQ(cola.examples.size(), 2u);
    EXPECT_EQ(cola.examples[0].text_a, "Our friends won't buy this analysis.");
    EXPECT_EQ(cola.examples[0].label, "1");
    EXPECT_EQ(cola.examples[0].line, 1);
    EXPECT_EQ(cola.examples[1].label, "0");
    EXPECT_TRUE(cola.examples[1].text_b.empty());

    const Split sst = load("SST-2", "train.tsv");
    ASSERT_EQ(sst.examples.size(), 2u);
    EXPECT_EQ(sst.examples[1].text_a, "the greatest \"musicians\" ");  // quotes kept as they are
    EXPECT_EQ(sst.examples[1].line, 3);

    const Split mrpc = load("MRPC", "train.tsv");
    ASSERT_EQ(mrpc.examples.size(), 2u);
    EXPECT_EQ(mrpc.examples[0].text_a,
              "Amrozi accused his brother , whom he called \"the witness\" , of distorting");
    EXPECT_EQ(mrpc.examples[0].text_b, "Referring to him as only \"the witness\" , Amrozi accused");
    EXPECT_EQ(mrpc.examples[0].label, "1");
    EXPECT_EQ(mrpc.examples[1].label, "0");

    const Split stsb = load("STS-B", "train.tsv");
    ASSERT_EQ(stsb.examples.size(), 2u);
    EXPECT_EQ(stsb.examples[1].text_a, "A man is playing a flute.");
    EXPECT_EQ(stsb.examples[1].text_b, "A man is playing a bamboo flute.");
    EXPECT_EQ(stsb.examples[1].label, "3.800");
    EXPECT_EQ(stsb.examples[1].id, "1");

    const Split mnli = load("MNLI", "train.tsv");
    ASSERT_EQ(mnli.examples.size(), 1u);
    EXPECT_EQ(mnli.examples[0].text_a, "Conceptually cream skimming has two basic dimensions.");
    EXPECT_EQ(mnli.examples[0].label, "neutral");

    const Split qnli = load("QNLI", "train.tsv");
    ASSERT_EQ(qnli.examples.size(), 1u);
    EXPECT_EQ(qnli.examples[0].text_b, "Unlike the two seasons before it");
    EXPECT_EQ(qnli.examples[0].label, "not_entailment");

    const Split wnli = load("WNLI", "train.tsv");
    ASSERT_EQ(wnli.examples.size(), 1u);
    EXPECT_EQ(wnli.examples[0].label, "1");
}

TEST(GlueTsv, MnliDevSplitsUseTheLastOfSixteenColumns) {
    const fs::path dir = write_glue_dir("mnli_dev");
    const auto& mnli = find_task("mnli");
    const Split m = read_glue_tsv(mnli, (dir / "MNLI/dev_matched.tsv").string());
    ASSERT_EQ(m.examples.size(), 2u);
    EXPECT_EQ(m.examples[0].label, "neutral");  // gold_label, not label1 (also neutral)
    EXPECT_EQ(m.examples[0].text_b, "Everyone really likes the newest benefits");
    EXPECT_EQ(m.examples[1].label, "contradiction");
    const Split mm = read_glue_tsv(mnli, (dir / "MNLI/dev_mismatched.tsv").string());
    ASSERT_EQ(mm.examples.size(), 1u);
    EXPECT_EQ(mm.examples[0].text_a, "Your contribution helped");
}

TEST(GlueTsv, QqpShortRowsAreSkippedAndCounted) {
    const fs::path dir = write_glue_dir("qqp");
    const Split qqp = read_glue_tsv(find_task("qqp"), (dir / "QQP/train.tsv").string());
    ASSERT_EQ(qqp.examples.size(), 2u);
    EXPECT_EQ(qqp.skipped, 1);
    EXPECT_EQ(qqp.examples[0].id, "133273");
    EXPECT_EQ(qqp.examples[1].text_a, "Why is \"X\" so?");
    EXPECT_EQ(qqp.examples[1].label, "1");
    EXPECT_EQ(qqp.examples[1].line, 4);
}

TEST(GlueTsv, ToleratesCrlfAndKeepsUtf8Bytes) {
    const fs::path dir = write_glue_dir("crlf");
    const Split rte = read_glue_tsv(find_task("rte"), (dir / "RTE/train.tsv").string());
    ASSERT_EQ(rte.examples.size(), 2u);
    EXPECT_EQ(rte.examples[0].label, "not_entailment");  // no '\r' left on the label
    EXPECT_EQ(rte.examples[0].text_a, "No Weapons of Mass Destruction Found in Iraq \"Yet\".");
    EXPECT_EQ(rte.examples[1].text_a,
              "Jos\xC3\xA9 Mar\xC3\xAD"
              "a Aznar visited \xE5\x8C\x97\xE4\xBA\xAC.");
    EXPECT_EQ(rte.examples[1].label, "entailment");
}

TEST(GlueTsv, MalformedRowNamesPathAndLine) {
    const fs::path dir = glue_dir("malformed");
    const fs::path file = dir / "train.tsv";
    write_file(file, "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tentailment\n");
    const std::string msg = tsv_error("rte", file);
    EXPECT_TRUE(contains(msg, file.string() + ":3: ")) << msg;
    EXPECT_TRUE(contains(msg, "expected 4 tab-separated fields, got 3")) << msg;

    // CoLA without a header: four fields from the first line on.
    write_file(file, "gj04\t1\t\tFine.\ngj04\t1\tToo many\tfields\there\n");
    const std::string cola = tsv_error("cola", file);
    EXPECT_TRUE(contains(cola, ":2: expected 4 tab-separated fields, got 5")) << cola;

    try {
        read_glue_tsv(find_task("rte"), (dir / "absent.tsv").string());
        FAIL() << "no exception";
    } catch (const engine::InputError& e) {
        EXPECT_EQ(e.path(), (dir / "absent.tsv").string());
    }
}

TEST(GlueTsv, UnknownLabelNamesLineAndLabel) {
    const fs::path dir = glue_dir("labels");
    const fs::path file = dir / "dev.tsv";
    write_file(file, "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\tneutral\n");
    const std::string msg = tsv_error("rte", file);
    EXPECT_TRUE(contains(msg, ":3: label \"neutral\"")) << msg;
    EXPECT_TRUE(contains(msg, "entailment, not_entailment")) << msg;

    write_file(file, "sentence\tlabel\ngood\t2\n");
    EXPECT_TRUE(contains(tsv_error("sst2", file), ":2: label \"2\"")) << tsv_error("sst2", file);

    const std::string header =
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\t"
        "score\n";
    write_file(file, header + "0\tg\tf\ty\to\ts\ts\ta\tb\t5.2\n");
    EXPECT_TRUE(contains(tsv_error("stsb", file), ":2: label \"5.2\" is not a score in [0, 5]"));
    write_file(file, header + "0\tg\tf\ty\to\ts\ts\ta\tb\tfive\n");
    EXPECT_TRUE(contains(tsv_error("stsb", file), ":2: label \"five\""));
    write_file(file, header + "0\tg\tf\ty\to\ts\ts\ta\tb\t0.0\n1\tg\tf\ty\to\ts\ts\ta\tb\t5\n");
    EXPECT_EQ(read_glue_tsv(find_task("stsb"), file.string()).examples.size(), 2u);
}

TEST(GlueJsonl, MapsFieldsAndHfLabelOrder) {
    const fs::path dir = glue_dir("jsonl");
    const fs::path mnli = dir / "mnli.jsonl";
    write_file(mnli,
               "{\"premise\": \"P0\", \"hypothesis\": \"H0\", \"label\": 0, \"idx\": 0}\n"
               "{\"premise\": \"P1 \\\"q\\\"\", \"hypothesis\": \"H1\", \"label\": 1, \"idx\": 1}\n"
               "\n"
               "{\"premise\": \"P2\", \"hypothesis\": \"H2\", \"label\": 2, \"idx\": 2}\n"
               "{\"premise\": \"P3\", \"hypothesis\": \"H3\", \"label\": -1, \"idx\": 3}\n");
    const Split m = read_glue_jsonl(find_task("mnli"), mnli.string());
    ASSERT_EQ(m.examples.size(), 3u);
    EXPECT_EQ(m.skipped, 1);
    EXPECT_EQ(m.examples[0].label, "entailment");
    EXPECT_EQ(m.examples[1].label, "neutral");
    EXPECT_EQ(m.examples[2].label, "contradiction");
    EXPECT_EQ(m.examples[1].text_a, "P1 \"q\"");
    EXPECT_EQ(m.examples[2].text_b, "H2");
    EXPECT_EQ(m.examples[2].id, "2");
    EXPECT_EQ(m.examples[2].line, 4);

    const fs::path qnli = dir / "qnli.jsonl";
    write_file(qnli, "{\"question\": \"Q\", \"sentence\": \"S\", \"label\": 1, \"idx\": 7}\r\n");
    const Split q = read_glue_jsonl(find_task("qnli"), qnli.string());
    ASSERT_EQ(q.examples.size(), 1u);
    EXPECT_EQ(q.examples[0].text_a, "Q");
    EXPECT_EQ(q.examples[0].text_b, "S");
    EXPECT_EQ(q.examples[0].label, "not_entailment");

    const fs::path cola = dir / "cola.jsonl";
    write_file(cola, "{\"sentence\": \"Bill left.\", \"label\": 1, \"idx\": 0}\n");
    EXPECT_EQ(read_glue_jsonl(find_task("cola"), cola.string()).examples[0].label, "1");

    const fs::path qqp = dir / "qqp.jsonl";
    write_file(qqp, "{\"question1\": \"a?\", \"question2\": \"b?\", \"label\": 0, \"idx\": 0}\n");
    EXPECT_EQ(read_glue_jsonl(find_task("qqp"), qqp.string()).examples[0].text_b, "b?");

    const fs::path stsb = dir / "stsb.jsonl";
    write_file(stsb,
               "{\"sentence1\": \"A\", \"sentence2\": \"B\", \"label\": 3.8, \"idx\": 0}\n"
               "{\"sentence1\": \"C\", \"sentence2\": \"D\", \"label\": 5, \"idx\": 1}\n"
               "{\"sentence1\": \"E\", \"sentence2\": \"F\", \"label\": -1.0, \"idx\": 2}\n");
    const Split s = read_glue_jsonl(find_task("stsb"), stsb.string());
    ASSERT_EQ(s.examples.size(), 2u);
    EXPECT_EQ(s.examples[0].label, "3.8");
    EXPECT_EQ(s.examples[1].label, "5");
    EXPECT_EQ(s.skipped, 1);
}

TEST(GlueJsonl, BadLinesNameTheLine) {
    const fs::path dir = glue_dir("jsonl_errors");
    const fs::path file = dir / "rte.jsonl";
    const std::string good = "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"label\": 0}\n";
    write_file(file, good + "{\"sentence1\": \"a\", \"sentence2\": \n");
    EXPECT_TRUE(contains(jsonl_error("rte", file), ":2: invalid JSON")) << jsonl_error("rte", file);
    write_file(file, good + good + "{\"sentence1\": \"a\", \"label\": 0}\n");
    EXPECT_TRUE(contains(jsonl_error("rte", file), ":3: missing field \"sentence2\""));
    write_file(file, "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"label\": 2}\n");
    EXPECT_TRUE(contains(jsonl_error("rte", file), ":1: label 2 is outside 0..1"));
    write_file(file, "{\"sentence1\": \"a\", \"sentence2\": 3, \"label\": 0}\n");
    EXPECT_TRUE(contains(jsonl_error("rte", file), ":1: field \"sentence2\" is not a string"));
    write_file(file, "[1, 2]\n");
    EXPECT_TRUE(contains(jsonl_error("rte", file), ":1: expected a JSON object"));
}

TEST(GlueLoad, LoadsTrainAndDevSplitsWithJsonlFallback) {
    const fs::path dir = write_glue_dir("load");
    const auto mnli = experiments::load_task(find_task("mnli"), dir.string());
    ASSERT_EQ(mnli.size(), 3u);
    EXPECT_EQ(mnli.at("train").examples.size(), 1u);
    EXPECT_EQ(mnli.at("dev_matched").examples.size(), 2u);
    EXPECT_EQ(mnli.at("dev_mismatched").examples.size(), 1u);

    // No WNLI dev.tsv but a dev.jsonl: that one is read.
    fs::remove(dir / "WNLI/dev.tsv");
    write_file(dir / "WNLI/dev.jsonl",
               "{\"sentence1\": \"x\", \"sentence2\": \"y\", \"label\": 1, \"idx\": 0}\n");
    const auto wnli = experiments::load_task(find_task("wnli"), dir.string());
    EXPECT_EQ(wnli.at("dev").examples.at(0).label, "1");
    EXPECT_EQ(wnli.at("dev").path, (dir / "WNLI/dev.jsonl").string());

    fs::remove(dir / "RTE/dev.tsv");
    try {
        experiments::load_task(find_task("rte"), dir.string());
        FAIL() << "no exception";
    } catch (const engine::InputError& e) {
        EXPECT_EQ(e.path(), (dir / "RTE" / "dev.tsv").string());
    }
}

TEST(GlueStats, TextTableAndJson) {
    const fs::path dir = write_glue_dir("stats");
    fs::remove_all(dir / "WNLI");
    write_file(dir / "SST-2/dev.tsv", "sentence\tlabel\nok\t1\nbad\t7\n");  // an error row

    const std::string text = experiments::glue_stats(dir.string(), false);
    EXPECT_TRUE(contains(text, "WNLI")) << text;
    EXPECT_TRUE(contains(text, "missing")) << text;
    EXPECT_TRUE(contains(text, "MISMATCH")) << text;  // fixtures are far smaller than GLUE
    EXPECT_TRUE(contains(text, "ERROR")) << text;
    EXPECT_TRUE(contains(text, "0:1 1:1")) << text;  // CoLA train label distribution
    EXPECT_TRUE(contains(text, "entailment:0 neutral:1 contradiction:0")) << text;
    EXPECT_TRUE(contains(text, "8551")) << text;
    EXPECT_FALSE(contains(text, "SYN-")) << text;  // synthetic tasks only when present
    // Aligned: the header and every row put the split column at the same offset.
    std::istringstream lines(text);
    std::string line;
    std::getline(lines, line);  // title
    std::getline(lines, line);
    const size_t split_col = line.find("split");
    std::getline(lines, line);
    EXPECT_EQ(line.find("train"), split_col) << text;

    const auto report = nlohmann::json::parse(experiments::glue_stats(dir.string(), true));
    ASSERT_EQ(report["tasks"].size(), 9u);
    const auto& cola = report["tasks"][0];
    EXPECT_EQ(cola["name"], "CoLA");
    EXPECT_EQ(cola["present"], true);
    EXPECT_EQ(cola["splits"][0]["split"], "train");
    EXPECT_EQ(cola["splits"][0]["examples"], 2);
    EXPECT_EQ(cola["splits"][0]["expected"], 8551);
    EXPECT_EQ(cola["splits"][0]["matches_expected"], false);
    EXPECT_EQ(cola["splits"][0]["labels"]["1"], 1);
    const auto& qqp = report["tasks"][4];
    EXPECT_EQ(qqp["splits"][0]["skipped"], 1);
    const auto& stsb = report["tasks"][3];
    EXPECT_EQ(stsb["splits"][0]["labels"]["[4,5]"], 1);
    EXPECT_EQ(stsb["splits"][0]["labels"]["[3,4)"], 1);
    EXPECT_TRUE(report["tasks"][1]["splits"][1].contains("error"));
    EXPECT_EQ(report["tasks"][8]["name"], "WNLI");
    EXPECT_EQ(report["tasks"][8]["present"], false);

    EXPECT_THROW(experiments::glue_stats((dir / "nowhere").string(), false), engine::InputError);
}

// ---- synthetic tasks -----------------------------------------------------------------------

// Deterministic made-up sentences of 6..20 distinct-ish words.
std::vector<std::string> toy_sentences(int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
        std::string s;
        const int len = 6 + i % 15;
        for (int w = 0; w < len; ++w) s += (w ? " w" : "w") + std::to_string((i * 7 + w * 13) % 97);
        out.push_back(s + " s" + std::to_string(i));
    }
    return out;
}

experiments::SyntheticOptions small_options() {
    experiments::SyntheticOptions options;
    options.train_size = 200;
    options.dev_size = 50;
    options.seed = 7;
    return options;
}

TEST(SyntheticTasks, FilesLoadWithBalancedLabels) {
    const fs::path dir = glue_dir("synthetic");
    const auto summary = experiments::write_synthetic_tasks_from_sentences(
        toy_sentences(120), dir.string(), small_options());
    EXPECT_EQ(summary.sentences, 120);
    EXPECT_EQ(summary.train_sentences + summary.dev_sentences, 120);
    // Train (200) counted as no larger than dev (50): dev gets 50 / 100 of them.
    EXPECT_EQ(summary.dev_sentences, 60);

    for (const std::string task : {"SYN-CoLA", "SYN-MRPC", "SYN-STS-B", "SYN-RTE"}) {
        const auto splits = experiments::load_task(find_task(task), dir.string());
        ASSERT_EQ(splits.at("train").examples.size(), 200u) << task;
        ASSERT_EQ(splits.at("dev").examples.size(), 50u) << task;
        if (task == "SYN-STS-B") continue;
        std::map<std::string, int> counts;
        for (const auto& ex : splits.at("train").examples) ++counts[ex.label];
        ASSERT_EQ(counts.size(), 2u) << task;
        for (const auto& [label, n] : counts) EXPECT_EQ(n, 100) << task << " " << label;
    }
    // Train and dev are built from disjoint sentences.
    const auto cola = experiments::load_task(find_task("syn-cola"), dir.string());
    std::set<std::string> train;
    for (const auto& ex : cola.at("train").examples)
        if (ex.label == "1") train.insert(ex.text_a);
    for (const auto& ex : cola.at("dev").examples)
        if (ex.label == "1") {
            EXPECT_EQ(train.count(ex.text_a), 0u) << ex.text_a;
        }
}

// Sorted words of a sentence, to compare bags of words.
std::vector<std::string> bag(const std::string& s) {
    std::vector<std::string> words;
    std::istringstream in(s);
    for (std::string w; in >> w;) words.push_back(w);
    std::sort(words.begin(), words.end());
    return words;
}

TEST(SyntheticTasks, ExamplesKeepTheWordsAndChangeOnlyTheOrder) {
    const fs::path dir = glue_dir("synthetic_words");
    experiments::write_synthetic_tasks_from_sentences(toy_sentences(60), dir.string(),
                                                      small_options());
    const auto train = [&](const std::string& task) {
        return experiments::load_task(find_task(task), dir.string()).at("train").examples;
    };
    for (const auto& ex : train("syn-mrpc")) {
        // Both classes: the second text is the first minus one word.
        auto a = bag(ex.text_a);
        const auto b = bag(ex.text_b);
        ASSERT_EQ(a.size(), b.size() + 1);
        EXPECT_TRUE(std::includes(a.begin(), a.end(), b.begin(), b.end()));
    }
    for (const auto& ex : train("syn-rte")) {
        const bool contiguous =
            (" " + ex.text_a + " ").find(" " + ex.text_b + " ") != std::string::npos;
        EXPECT_EQ(contiguous, ex.label == "entailment") << ex.text_a << " | " << ex.text_b;
        const auto n = bag(ex.text_b).size();
        EXPECT_GE(n, 3u);
        EXPECT_LE(n, 8u);
    }
    bool some_low = false;
    for (const auto& ex : train("syn-stsb")) {
        EXPECT_EQ(bag(ex.text_a), bag(ex.text_b));
        // Identity scores 5; rounding to 0.2 may also give 5 to one swap in a long sentence.
        if (ex.text_a == ex.text_b) {
            EXPECT_EQ(ex.label, "5.0");
        } else if (ex.label != "5.0") {
            EXPECT_NE(ex.text_a, ex.text_b);
        }
        some_low |= std::stod(ex.label) < 1.0;
    }
    EXPECT_TRUE(some_low);  // scores spread down towards 0
}

TEST(SyntheticTasks, PairTasksHoldTheSentenceAndOneReorderingOfItsPlainWords) {
    const fs::path dir = glue_dir("synthetic_pairs");
    auto sentences = toy_sentences(100);
    for (auto& s : sentences) s = "\"" + s + ", and x1 y2 z3 more words here.";  // punctuation
    experiments::write_synthetic_tasks_from_sentences(sentences, dir.string(), small_options());
    std::set<std::string> originals(sentences.begin(), sentences.end());
    std::set<std::string> train_originals;
    for (const std::string task : {"syn-bshift", "syn-move", "syn-span", "syn-rev"}) {
        const auto& info = find_task(task);
        EXPECT_TRUE(info.zero_shot && info.synthetic) << task;
        const auto splits = experiments::load_task(info, dir.string());
        for (const std::string split : {"train", "dev"}) {
            const auto& examples = splits.at(split).examples;
            ASSERT_EQ(examples.size(), split == "train" ? 200u : 50u) << task;
            int ones = 0;
            for (const auto& ex : examples) {
                ones += ex.label == "1";
                const std::string& attested = ex.label == "1" ? ex.text_b : ex.text_a;
                const std::string& edited = ex.label == "1" ? ex.text_a : ex.text_b;
                EXPECT_EQ(originals.count(attested), 1u) << task << ": " << attested;
                EXPECT_EQ(originals.count(edited), 0u) << task << ": " << edited;
                EXPECT_EQ(bag(attested), bag(edited)) << task;  // a bag of words cannot tell
                // Punctuation-bearing words stay where they were.
                std::istringstream ia(attested), ie(edited);
                std::vector<std::string> wa, we;
                for (std::string w; ia >> w;) wa.push_back(w);
                for (std::string w; ie >> w;) we.push_back(w);
                size_t moved = 0, first = wa.size(), last = 0;
                for (size_t i = 0; i < wa.size(); ++i) {
                    if (wa[i] == we[i]) continue;
                    ++moved;
                    first = std::min(first, i);
                    last = i;
                    EXPECT_EQ(wa[i].find_first_of("\".,"), std::string::npos) << wa[i];
                }
                ASSERT_GE(moved, 2u) << task;
                const size_t span = last - first + 1;
                if (task == "syn-bshift") EXPECT_EQ(span, 2u) << attested << " | " << edited;
                if (task == "syn-move") EXPECT_TRUE(span >= 4 && span <= 7) << span;
                if (task == "syn-span") EXPECT_TRUE(span >= 3 && span <= 6) << span;
                if (task == "syn-rev") EXPECT_TRUE(span >= 2 && span <= 5) << span;
                if (split == "train")
                    train_originals.insert(attested);
                else
                    EXPECT_EQ(train_originals.count(attested), 0u) << "dev leaks " << attested;
            }
            EXPECT_EQ(ones, static_cast<int>(examples.size() / 2)) << task << " " << split;
        }
    }
}

TEST(SyntheticTasks, DeterministicUnderTheSeed) {
    const auto sentences = toy_sentences(80);
    const fs::path a = glue_dir("synthetic_a");
    const fs::path b = glue_dir("synthetic_b");
    const fs::path c = glue_dir("synthetic_c");
    auto options = small_options();
    experiments::write_synthetic_tasks_from_sentences(sentences, a.string(), options);
    experiments::write_synthetic_tasks_from_sentences(sentences, b.string(), options);
    options.seed = 8;
    experiments::write_synthetic_tasks_from_sentences(sentences, c.string(), options);
    for (const std::string file :
         {"SYN-CoLA/train.tsv", "SYN-MRPC/dev.tsv", "SYN-STS-B/train.tsv", "SYN-RTE/dev.tsv",
          "SYN-BSHIFT/dev.tsv", "SYN-MOVE/train.tsv", "SYN-SPAN/dev.tsv", "SYN-REV/train.tsv"}) {
        EXPECT_EQ(read_file(a / file), read_file(b / file)) << file;
        EXPECT_NE(read_file(a / file), read_file(c / file)) << file;
    }
}

TEST(SyntheticTasks, MoreTrainExamplesReuseTrainSentencesAndLeaveDevAsItWas) {
    const auto sentences = toy_sentences(120);
    auto options = small_options();  // 200 train, 50 dev
    const fs::path equal = glue_dir("synthetic_equal");
    const fs::path more = glue_dir("synthetic_more");
    options.train_size = options.dev_size;
    const auto a =
        experiments::write_synthetic_tasks_from_sentences(sentences, equal.string(), options);
    options.train_size = 40 * options.dev_size;
    const auto b =
        experiments::write_synthetic_tasks_from_sentences(sentences, more.string(), options);
    EXPECT_EQ(a.dev_sentences, 60);
    EXPECT_EQ(b.dev_sentences, 60);  // not 120 / 41 = 3
    for (const std::string task : {"SYN-CoLA", "SYN-RTE", "SYN-BSHIFT", "SYN-REV"})
        EXPECT_EQ(read_file(equal / task / "dev.tsv"), read_file(more / task / "dev.tsv")) << task;
    // 2,000 train examples from the other 60 sentences, none of them a dev sentence.
    const auto cola = experiments::load_task(find_task("syn-cola"), more.string());
    ASSERT_EQ(cola.at("train").examples.size(), 2000u);
    std::set<std::string> dev, train;
    for (const auto& ex : cola.at("dev").examples)
        if (ex.label == "1") dev.insert(ex.text_a);
    for (const auto& ex : cola.at("train").examples)
        if (ex.label == "1") train.insert(ex.text_a);
    EXPECT_GT(train.size(), 50u);
    EXPECT_LE(train.size(), 60u);
    for (const auto& s : train) EXPECT_EQ(dev.count(s), 0u) << s;
}

TEST(SyntheticTasks, StsScoreIsFiveForIdentityAndLowerForReversal) {
    using experiments::sts_order_score;
    const std::vector<std::string> s = {"the", "cat", "sat", "on", "a", "mat"};
    EXPECT_EQ(sts_order_score(s, s), 5.0);
    EXPECT_EQ(sts_order_score(s, {s.rbegin(), s.rend()}), 0.0);
    // One adjacent swap of six words: 1 of 15 inversions -> 5 * 14/15 = 4.67 -> 4.6.
    EXPECT_NEAR(sts_order_score(s, {"cat", "the", "sat", "on", "a", "mat"}), 4.6, 1e-12);
    // Repeated words match in order, so swapping the two "the" costs nothing.
    const std::vector<std::string> r = {"the", "dog", "saw", "the", "cat", "run"};
    EXPECT_EQ(sts_order_score(r, r), 5.0);
    EXPECT_LT(sts_order_score(r, {r.rbegin(), r.rend()}), 5.0);
    EXPECT_THROW(sts_order_score(s, {"the", "cat"}), std::invalid_argument);
    EXPECT_THROW(sts_order_score(s, {"the", "cat", "sat", "on", "a", "dog"}),
                 std::invalid_argument);
}

TEST(SyntheticTasks, CorpusUsesTheHeldOutDocuments) {
    const fs::path dir = glue_dir("synthetic_corpus");
    // Ten documents of two lines each; fraction 0.25 -> k = 4: documents 3 and 7.
    std::string corpus;
    for (int d = 0; d < 10; ++d)
        corpus += "doc" + std::to_string(d) + " line a\r\ndoc" + std::to_string(d) + " line b\n\n";
    write_file(dir / "corpus.txt", corpus);
    experiments::SyntheticOptions options;
    options.validation_fraction = 0.25;
    experiments::SyntheticSummary summary;
    const auto held =
        experiments::corpus_sentences((dir / "corpus.txt").string(), options, &summary);
    EXPECT_EQ(held, (std::vector<std::string>{"doc3 line a", "doc3 line b", "doc7 line a",
                                              "doc7 line b"}));
    EXPECT_EQ(summary.documents, 10);
    EXPECT_EQ(summary.used_documents, 2);
    options.all_documents = true;
    EXPECT_EQ(experiments::corpus_sentences((dir / "corpus.txt").string(), options).size(), 20u);
    EXPECT_THROW(experiments::corpus_sentences((dir / "none.txt").string(), options),
                 engine::InputError);
}

TEST(SyntheticTasks, RejectsTooFewSentences) {
    const fs::path dir = glue_dir("synthetic_few");
    EXPECT_THROW(experiments::write_synthetic_tasks_from_sentences(
                     {"too short", "one two three four five six"}, dir.string(), small_options()),
                 std::invalid_argument);
}

}  // namespace

// Test splits in GLUE_FORMAT.md's layouts: an index column first, no labels; each task's
// texts from its own columns, the index kept as the file gives it (not the row number).
TEST(GlueTestSplits, ReadsEveryTestLayoutWithItsIndex) {
    const fs::path dir = glue_dir("test_splits");
    write_file(dir / "CoLA/test.tsv", "index\tsentence\n7\tBill whistled.\n8\tThe cat ran.\n");
    write_file(dir / "SST-2/test.tsv", "index\tsentence\n0\tuneasy mishmash \n");
    write_file(dir / "MRPC/test.tsv",
               "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
               "0\t1089874\t1089925\tPCCW 's chief \"operating\" officer\tCurrent Chief\n");
    write_file(dir / "STS-B/test.tsv",
               "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\n"
               "0\tmain-captions\tMSRvid\t2012test\t0024\tnone\tnone\tA girl is styling her "
               "hair.\tA girl is brushing her hair.\n");
    write_file(dir / "QQP/test.tsv", "id\tquestion1\tquestion2\n0\tHow does it?\tWhy?\r\n");
    const std::string mnli_header =
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
        "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\n";
    write_file(dir / "MNLI/test_matched.tsv",
               mnli_header + "0\t31493\t31493\ttravel\tb1\tb2\tp1\tp2\tHot kid\tHot kids\n");
    write_file(dir / "MNLI/test_mismatched.tsv",
               mnli_header + "0\t1\t1\tfiction\tb1\tb2\tp1\tp2\tShe said\tShe did\n" +
                   "1\t2\t2\tfiction\tb1\tb2\tp1\tp2\tHe said\tHe did\n");
    write_file(dir / "diagnostic/diagnostic.tsv",
               "index\tsentence1\tsentence2\n0\tThe cat sat.\tThe cat did not sit.\n");
    write_file(dir / "RTE/test.tsv",
               "index\tsentence1\tsentence2\n100\tMaude died.\tMaude is dead.\n");
    // WNLI has no test.tsv here: it is simply not listed.

    auto texts = [&](const std::string& task) {
        std::vector<std::string> out;
        for (const auto& [layout, split] :
             experiments::load_test_splits(find_task(task), dir.string()))
            for (const auto& e : split.examples)
                out.push_back(layout.name + "|" + layout.column + "|" + e.id + "|" + e.text_a +
                              "|" + e.text_b + "|" + e.label);
        return out;
    };
    using V = std::vector<std::string>;
    EXPECT_EQ(texts("CoLA"), (V{"test|cola|7|Bill whistled.||", "test|cola|8|The cat ran.||"}));
    EXPECT_EQ(texts("SST-2"), (V{"test|sst2|0|uneasy mishmash ||"}));
    EXPECT_EQ(texts("MRPC"), (V{"test|mrpc|0|PCCW 's chief \"operating\" officer|Current Chief|"}));
    EXPECT_EQ(texts("STS-B"),
              (V{"test|stsb|0|A girl is styling her hair.|A girl is brushing her hair.|"}));
    EXPECT_EQ(texts("QQP"), (V{"test|qqp|0|How does it?|Why?|"}));
    EXPECT_EQ(texts("MNLI"), (V{"test_matched|mnli_m|0|Hot kid|Hot kids|",
                                "test_mismatched|mnli_mm|0|She said|She did|",
                                "test_mismatched|mnli_mm|1|He said|He did|",
                                "ax|ax|0|The cat sat.|The cat did not sit.|"}));
    EXPECT_EQ(texts("RTE"), (V{"test|rte|100|Maude died.|Maude is dead.|"}));
    EXPECT_TRUE(texts("WNLI").empty());
    EXPECT_TRUE(texts("QNLI").empty());
}

TEST(GlueTestSplits, BadRowsNameTheFileAndLine) {
    const fs::path dir = glue_dir("test_split_errors");
    const auto rte = experiments::test_splits(find_task("RTE")).at(0);
    auto error = [&](const std::string& name, const std::string& text) {
        const fs::path path = write_file(dir / name, text);
        try {
            experiments::read_glue_test_tsv(rte, path.string());
        } catch (const engine::InputError& e) {
            return std::string(e.what());
        }
        ADD_FAILURE() << "no InputError for " << name;
        return std::string();
    };
    const std::string fields = error("fields.tsv", "index\ta\tb\n0\tx\ty\n1\tx\n");
    EXPECT_TRUE(contains(fields, "fields.tsv:3")) << fields;
    EXPECT_TRUE(contains(fields, "expected 3 tab-separated fields, got 2")) << fields;
    const std::string twice = error("twice.tsv", "index\ta\tb\n5\tx\ty\n5\tz\tw\n");
    EXPECT_TRUE(contains(twice, "twice.tsv:3")) << twice;
    EXPECT_TRUE(contains(twice, "index '5' given twice (first on line 2)")) << twice;
    const std::string narrow = error("narrow.tsv", "index\ta\n0\tx\n");
    EXPECT_TRUE(contains(narrow, "header has 2 fields")) << narrow;
    EXPECT_TRUE(contains(error("empty.tsv", ""), "expected a header row"));
    EXPECT_TRUE(contains(error("noindex.tsv", "index\ta\tb\n\tx\ty\n"), "empty index"));
}
