// Reading `tupe analyze` output without torch: .npy files written byte by byte here (as numpy
// writes them) and an index.json in the layout analysis::write_analysis_index produces.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "app_test_util.h"
#include "core/analysis_data.h"

using namespace app;

namespace {

/// A version-1.0 .npy with the header padded to a multiple of 64 bytes, as numpy does.
template <typename T>
void writeNpy(const std::string& path, const std::string& descr, const std::string& shape,
              const std::vector<T>& values) {
    std::string header =
        "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    const size_t total = 10 + header.size() + 1;
    header += std::string((64 - total % 64) % 64, ' ') + "\n";
    std::ofstream f(path, std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    const uint16_t len = static_cast<uint16_t>(header.size());
    f.put(char(len & 0xff));
    f.put(char(len >> 8));
    f << header;
    f.write(reinterpret_cast<const char*>(values.data()),
            std::streamsize(values.size() * sizeof(T)));
}

}  // namespace

TEST(ReadNpy, Float32MatrixAndInt64Vector) {
    app_test::TempDir dir;
    writeNpy<float>(dir.file("m.npy"), "<f4", "(2, 3)", {1, 2, 3, 4, 5, -6.5f});
    const NpyArray m = readNpy(QString::fromStdString(dir.file("m.npy")));
    EXPECT_EQ(m.shape, (std::vector<long long>{2, 3}));
    EXPECT_EQ(m.values, (std::vector<double>{1, 2, 3, 4, 5, -6.5}));
    writeNpy<int64_t>(dir.file("v.npy"), "<i8", "(4,)", {7, 8, 9, -1});
    const NpyArray v = readNpy(QString::fromStdString(dir.file("v.npy")));
    EXPECT_EQ(v.shape, (std::vector<long long>{4}));
    EXPECT_EQ(v.values, (std::vector<double>{7, 8, 9, -1}));
}

TEST(ReadNpy, RefusesTruncatedAndForeignFiles) {
    app_test::TempDir dir;
    writeNpy<double>(dir.file("short.npy"), "<f8", "(10,)", {1.0, 2.0});
    EXPECT_THROW(readNpy(QString::fromStdString(dir.file("short.npy"))), std::runtime_error);
    std::ofstream(dir.file("text.npy")) << "hello";
    try {
        readNpy(QString::fromStdString(dir.file("text.npy")));
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("text.npy"), std::string::npos);
    }
    writeNpy<double>(dir.file("c.npy"), "<c16", "(1,)", {1.0, 0.0});
    EXPECT_THROW(readNpy(QString::fromStdString(dir.file("c.npy"))), std::runtime_error);
}

TEST(LoadAnalysis, IndexEntriesTokensAndMatrices) {
    app_test::TempDir dir;
    std::filesystem::create_directories(dir.path() / "tupe");
    std::filesystem::create_directories(dir.path() / "input");
    std::ofstream(dir.file("input/tokens.txt")) << "[CLS] the cat [SEP]\n";
    writeNpy<float>(dir.file("tupe/total_h1.npy"), "<f4", "(2, 2)", {0.5f, -1, 2, 0});
    std::ofstream(dir.file("index.json")) << R"({
 "model": "runs/x/checkpoint.pt", "variant": "tupe-a",
 "config": {"num_hidden_layers": 2, "num_attention_heads": 4},
 "notes": [], "skipped": [{"what": "terms", "reason": "untied positions"}],
 "files": [
  {"file": "tupe/total_h1.csv", "what": "tupe_total", "description": "d", "layer": null,
   "head": 1, "shape": [2, 2], "label": "local", "statistics": {"theta1": 0.25, "entropy": null}},
  {"file": "cls/from_cls.npy", "what": "from_cls", "description": "d", "layer": null, "head": null,
   "shape": [2, 4, 4]}
 ]})";
    const AnalysisData d = loadAnalysis(QString::fromStdString(dir.path().string()));
    EXPECT_EQ(d.variant, "tupe-a");
    EXPECT_EQ(d.layers, 2);
    EXPECT_EQ(d.heads, 4);
    EXPECT_EQ(d.tokens, (QStringList{"[CLS]", "the", "cat", "[SEP]"}));
    ASSERT_EQ(d.skipped.size(), 1);
    EXPECT_EQ(d.perHeadKinds(), QStringList{"tupe_total"});
    EXPECT_EQ(d.layersOf("tupe_total"), std::vector<int>{-1});
    const AnalysisEntry* e = d.find("tupe_total", -1, 1);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->label, "local");
    EXPECT_DOUBLE_EQ(e->statistics.at("theta1"), 0.25);
    EXPECT_TRUE(std::isnan(e->statistics.at("entropy")));
    EXPECT_EQ(d.find("tupe_total", -1, 0), nullptr);
    const NpyArray m = d.matrix(*e);  // the .npy beside the listed .csv
    EXPECT_EQ(m.values, (std::vector<double>{0.5, -1, 2, 0}));
}

TEST(LoadAnalysis, MissingOrBrokenIndexNamesTheFile) {
    app_test::TempDir dir;
    EXPECT_THROW(loadAnalysis(QString::fromStdString(dir.path().string())), std::runtime_error);
    std::ofstream(dir.file("index.json")) << "{ not json";
    try {
        loadAnalysis(QString::fromStdString(dir.path().string()));
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("index.json"), std::string::npos);
    }
}
