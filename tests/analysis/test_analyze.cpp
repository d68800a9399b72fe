// Tests of analysis/analyze.h on tiny models and a hand-made vocabulary: batch-averaged terms,
// pooled uniformity and [CLS] maps equal the microscope run once on the whole padded batch and do
// not depend on batching; each variant gets only its maps (the rest skipped with a reason); long
// sentences are truncated with a note or refused; write_analysis leaves exactly the files
// index.json lists, with the shapes it states, readable with read_npy; every scheme's named
// layer-0 terms add up to the model's own layer-0 logits.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "analysis/analyze.h"
#include "analysis/attention_analysis.h"
#include "analysis/npy.h"
#include "engine/bert.h"
#include "engine/config.h"
#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using namespace analysis;

namespace {

constexpr int64_t kAnalyzeMaxPositions = 12;

engine::WordPieceTokenizer tokenizer() {
    return engine::WordPieceTokenizer(
        engine::Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat",
                                    "sat", "on", "mat", ".", "dog", "ran", "a", "##s"}));
}

engine::BertForMaskedLM tiny_model(const std::string& preset, uint64_t seed = 3) {
    const engine::ModelConfig c = test_support::tiny16_config(preset, 15, kAnalyzeMaxPositions);
    torch::manual_seed(seed);
    engine::BertForMaskedLM model(c);
    // Larger weights than the N(0, 0.02) init, so every map is far from zero and uniform.
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.normal_(0.0, 0.4);
    return model;
}

/// Three sentences of different lengths (8, 4 and 9 tokens with [CLS]/[SEP]).
const std::vector<std::string> kSentences = {"the cat sat on a mat", "a dog",
                                             "the dogs ran on a mat"};

void expect_close(const torch::Tensor& a, const torch::Tensor& b, double tol = 1e-5) {
    ASSERT_EQ(a.sizes(), b.sizes());
    EXPECT_LT((a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>(), tol);
}

bool skipped(const AnalysisOutput& out, const std::string& what_prefix, const std::string& reason) {
    for (const auto& s : out.skipped)
        if (s.what.rfind(what_prefix, 0) == 0 && s.reason.find(reason) != std::string::npos)
            return true;
    return false;
}

// dir_ is not created: write_analysis must create its folder and the parents.
class AnalyzeTest : public test_support::TempDirTest {
  protected:
    AnalyzeTest() : TempDirTest(test_support::per_test_name("tupe_analyze"), /*create=*/false) {}
};

}  // namespace

TEST(Analyze, PadsSentencesAndKeepsTheirTokens) {
    auto model = tiny_model("bert-a");
    const AnalysisOutput out = analyze_model(model, tokenizer(), kSentences);
    ASSERT_EQ(out.input_ids.sizes(), (std::vector<int64_t>{3, 9}));
    const torch::Tensor lengths = out.attention_mask.sum(1);
    EXPECT_EQ(lengths[0].item<int64_t>(), 8);
    EXPECT_EQ(lengths[1].item<int64_t>(), 4);
    EXPECT_EQ(lengths[2].item<int64_t>(), 9);
    EXPECT_EQ(out.input_ids[1][4].item<int64_t>(), 0);  // [PAD] after "[CLS] a dog [SEP]"
    EXPECT_EQ(out.tokens[1], (std::vector<std::string>{"[CLS]", "a", "dog", "[SEP]"}));
    EXPECT_TRUE(out.axis_labels.empty());  // several sentences: positions, not tokens
    EXPECT_EQ(out.forward_passes, 1);      // one batch: one pass feeds the terms and [CLS]
    EXPECT_FALSE(out.notes.empty());       // padding is explained
}

TEST(Analyze, TermMapsAreTheMaskedBatchMeanOfTheMicroscope) {
    auto model = tiny_model("bert-a");
    const AnalysisOutput out = analyze_model(model, tokenizer(), kSentences);
    ASSERT_TRUE(out.terms.has_value());
    const FourTerms terms = decompose_first_layer(model->bert, out.input_ids, out.attention_mask);
    // By hand: the mean over the sentences that have both a query i and a key j.
    auto m = out.attention_mask.to(torch::kDouble);
    auto pair = (m.unsqueeze(2) * m.unsqueeze(1)).unsqueeze(1);  // (B, 1, T, T)
    auto mean = [&](const torch::Tensor& t) {
        return (t.to(torch::kDouble) * pair).sum(0) / pair.sum(0).clamp_min(1.0);
    };
    expect_close(out.terms->word_word, mean(terms.word_word));
    expect_close(out.terms->word_pos, mean(terms.word_pos));
    expect_close(out.terms->pos_word, mean(terms.pos_word));
    expect_close(out.terms->pos_pos, mean(terms.pos_pos));
    expect_close(out.terms->rest, mean(terms.rest));
    EXPECT_FALSE(out.terms->bias.defined());  // bert-a has no logit bias
    EXPECT_TRUE(skipped(out, "terms/bias", "no logit bias"));
    // Position (8, 8) exists only in the third sentence: the mean is that sentence's value.
    EXPECT_NEAR(out.terms->word_word[0][8][8].item<double>(),
                terms.word_word[2][0][8][8].item<double>(), 1e-5);
    const TermStats stats = term_statistics(terms);
    for (size_t h = 0; h < stats.spread.size(); ++h) {
        EXPECT_NEAR(out.terms->stats.spread[h].word_pos, stats.spread[h].word_pos, 1e-9);
        EXPECT_NEAR(out.terms->stats.relative[h].pos_word, stats.relative[h].pos_word, 1e-9);
    }
}

TEST(Analyze, BatchingDoesNotChangeAnyMap) {
    auto model = tiny_model("bert-r");
    AnalyzeOptions one_batch, small_batches;
    small_batches.batch_size = 2;
    const AnalysisOutput a = analyze_model(model, tokenizer(), kSentences, one_batch);
    const AnalysisOutput b = analyze_model(model, tokenizer(), kSentences, small_batches);
    EXPECT_EQ(b.forward_passes, 2);  // two batches, one pass each
    ASSERT_TRUE(a.terms && b.terms);
    ASSERT_TRUE(b.terms->bias.defined());  // bert-r: the relative bias is a term of its own
    expect_close(a.terms->word_word, b.terms->word_word);
    expect_close(a.terms->pos_pos, b.terms->pos_pos);
    expect_close(a.terms->bias, b.terms->bias);
    for (size_t h = 0; h < a.terms->stats.spread.size(); ++h) {
        // The uniformity pools exactly across batches (u^2 weighted by rows).
        EXPECT_NEAR(a.terms->stats.spread[h].word_word, b.terms->stats.spread[h].word_word, 1e-6);
        EXPECT_NEAR(a.terms->stats.spread[h].bias, b.terms->stats.spread[h].bias, 1e-6);
    }
    expect_close(a.cls.from_cls, b.cls.from_cls);
    expect_close(a.cls.to_cls, b.cls.to_cls);
    expect_close(a.cls.entropy, b.cls.entropy);
    expect_close(a.cls.first_k_mass, b.cls.first_k_mass);
    expect_close(a.cls.token_count, b.cls.token_count);
}

TEST(Analyze, ClsMapsEqualClsAttentionOfOneForwardPass) {
    auto model = tiny_model("bert-ad");
    const AnalysisOutput out = analyze_model(model, tokenizer(), kSentences);
    ASSERT_TRUE(out.terms.has_value());  // decoupled positions have the four terms too
    torch::NoGradGuard no_grad;
    model->eval();
    auto enc = model->bert->forward(out.input_ids, out.attention_mask, {}, true);
    const ClsAttention direct = cls_attention(enc.attention_probs, out.attention_mask);
    ASSERT_EQ(out.cls.from_cls.sizes(), (std::vector<int64_t>{2, 2, 9}));  // (L, H, T)
    expect_close(out.cls.from_cls, direct.from_cls);
    expect_close(out.cls.to_cls, direct.to_cls);
    expect_close(out.cls.mean_distance, direct.mean_distance);
}

TEST(Analyze, TupeGetsItsCorrelationAndTaxonomyButNoCrossTerms) {
    auto model = tiny_model("tupe-r");
    const AnalysisOutput out = analyze_model(model, tokenizer(), kSentences);
    EXPECT_FALSE(out.terms.has_value());
    EXPECT_TRUE(skipped(out, "terms", "unties positions"));
    ASSERT_TRUE(out.tupe.has_value());
    const PositionalCorrelation direct = tupe_positional_correlation(model->bert, 9);
    ASSERT_EQ(out.tupe->correlation.groups.size(), 1u);
    expect_close(out.tupe->correlation.groups[0].total, direct.groups[0].total);
    EXPECT_TRUE(out.tupe->correlation.relative.defined());
    ASSERT_EQ(out.tupe->patterns.size(), 1u);
    EXPECT_EQ(out.tupe->patterns[0].size(), 2u);
    EXPECT_EQ(out.forward_passes, 1);  // no terms: the [CLS] pass only

    auto bert = tiny_model("bert-a");
    const AnalysisOutput no_tupe = analyze_model(bert, tokenizer(), kSentences);
    EXPECT_FALSE(no_tupe.tupe.has_value());
    EXPECT_TRUE(skipped(no_tupe, "tupe", "learned absolute positions at the input"));
}

TEST(Analyze, LongSentencesAreTruncatedWithANoteOrRefused) {
    auto model = tiny_model("tupe-a");
    const std::string long_text = "the cat sat on the mat . the dog ran on a mat .";  // 15 tokens
    AnalyzeOptions options;
    options.source = "corpus.txt";
    const AnalysisOutput out = analyze_model(model, tokenizer(), {long_text, "a cat"}, options);
    EXPECT_EQ(out.input_ids.size(1), kAnalyzeMaxPositions);
    EXPECT_EQ(out.tokens[0].back(), "[SEP]");
    ASSERT_FALSE(out.notes.empty());
    EXPECT_NE(out.notes[0].find("truncated to 12"), std::string::npos) << out.notes[0];
    EXPECT_NE(out.notes[0].find("corpus.txt"), std::string::npos);

    options.max_tokens = 6;  // a limit of one's own, below the position table
    const AnalysisOutput cut = analyze_model(model, tokenizer(), {long_text, "a cat"}, options);
    EXPECT_EQ(cut.input_ids.size(1), 6);
    ASSERT_FALSE(cut.notes.empty());
    EXPECT_NE(cut.notes[0].find("--max-tokens"), std::string::npos) << cut.notes[0];
    options.max_tokens = kAnalyzeMaxPositions + 1;
    EXPECT_THROW(analyze_model(model, tokenizer(), {"a cat"}, options), std::invalid_argument);
    options.max_tokens = 0;

    options.truncate = false;
    options.source = "--text";
    try {
        analyze_model(model, tokenizer(), {long_text}, options);
        FAIL() << "expected InputError";
    } catch (const engine::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--text"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("12"), std::string::npos) << e.what();
    }
    EXPECT_THROW(analyze_model(model, tokenizer(), {}), std::invalid_argument);
}

TEST(Analyze, OneSentenceLabelsTheAxesWithItsTokens) {
    auto model = tiny_model("tupe-a");
    const AnalysisOutput out = analyze_model(model, tokenizer(), {"the cats"});
    EXPECT_EQ(out.axis_labels, (std::vector<std::string>{"[CLS]", "the", "cat", "##s", "[SEP]"}));
}

TEST_F(AnalyzeTest, ReadSentencesTakesTheFirstNonEmptyLines) {
    fs::create_directories(dir_);
    std::ofstream(dir_ / "c.txt") << "\n  first line \n\n\nsecond\nthird\n";
    EXPECT_EQ(read_sentences((dir_ / "c.txt").string(), 2),
              (std::vector<std::string>{"first line", "second"}));
    EXPECT_EQ(read_sentences((dir_ / "c.txt").string(), 0).size(), 3u);
    std::ofstream(dir_ / "empty.txt") << "\n \n";
    EXPECT_THROW(read_sentences((dir_ / "empty.txt").string(), 5), engine::InputError);
    try {
        read_sentences((dir_ / "missing.txt").string(), 5);
        FAIL();
    } catch (const engine::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("missing.txt"), std::string::npos);
    }
}

TEST_F(AnalyzeTest, IndexListsEveryFileWithItsShape) {
    for (const std::string preset : {"bert-r", "tupe-r"}) {
        SCOPED_TRACE(preset);
        auto model = tiny_model(preset);
        AnalysisOutput out = analyze_model(model, tokenizer(), kSentences);
        out.model_name = "tiny " + preset;
        const fs::path dir = dir_ / preset;
        const std::vector<IndexEntry> entries = write_analysis(out, dir.string());

        std::ifstream in(dir / "index.json");
        ASSERT_TRUE(in.good());
        const nlohmann::json index = nlohmann::json::parse(in);
        EXPECT_EQ(index["variant"], preset);
        EXPECT_EQ(index["model"], "tiny " + preset);
        EXPECT_EQ(index["sentences"], 3);
        EXPECT_EQ(index["tokens"], 9);
        ASSERT_EQ(index["files"].size(), entries.size());

        std::set<std::string> listed;
        for (const auto& f : index["files"]) {
            const std::string file = f["file"];
            listed.insert(file);
            ASSERT_TRUE(fs::exists(dir / file)) << file;
            if (file.size() > 4 && file.substr(file.size() - 4) == ".npy") {
                const torch::Tensor t = read_npy((dir / file).string());
                EXPECT_EQ(t.sizes().vec(), f["shape"].get<std::vector<int64_t>>()) << file;
            }
        }
        // Nothing on disk that the index does not describe.
        for (const auto& p : fs::recursive_directory_iterator(dir))
            if (p.is_regular_file() && p.path().filename() != "index.json")
                EXPECT_TRUE(listed.count(fs::relative(p.path(), dir).string()))
                    << p.path().string();

        EXPECT_FALSE(index["skipped"].empty());
        for (const auto& s : index["skipped"]) EXPECT_FALSE(s["reason"].get<std::string>().empty());
        if (preset == "bert-r") {
            EXPECT_TRUE(listed.count("terms/word_pos_h1.csv"));
            EXPECT_TRUE(listed.count("terms/bias_h0.npy"));
            EXPECT_FALSE(listed.count("tupe/total_h0.npy"));
            const torch::Tensor wp = read_npy((dir / "terms/word_pos_h1.npy").string());
            expect_close(wp, out.terms->word_pos[1]);
            for (const auto& f : index["files"])
                if (f["file"] == "terms/word_pos_h1.npy") {
                    EXPECT_EQ(f["layer"], 0);
                    EXPECT_EQ(f["head"], 1);
                    EXPECT_NEAR(f["statistics"]["uniformity"].get<double>(),
                                out.terms->stats.spread[1].word_pos, 1e-9);
                }
        } else {
            EXPECT_FALSE(listed.count("terms/word_word_h0.npy"));
            EXPECT_TRUE(listed.count("tupe/total_h1.csv"));
            EXPECT_TRUE(listed.count("tupe/relative.npy"));
            for (const auto& f : index["files"])
                if (f["file"] == "tupe/total_h1.npy") {
                    EXPECT_TRUE(f["head"] == 1);
                    EXPECT_TRUE(f["layer"].is_null());  // shared by all layers
                    EXPECT_FALSE(f["label"].get<std::string>().empty());
                    EXPECT_TRUE(f["statistics"].contains("theta1"));
                    EXPECT_TRUE(f["statistics"].contains("theta2"));
                }
        }
        EXPECT_TRUE(listed.count("cls/from_cls_h1.csv"));
        EXPECT_TRUE(listed.count("scheme_terms/content_h1.csv"));  // every scheme
        EXPECT_TRUE(listed.count("scheme_terms/bias.npy"));        // both have a static bias
        EXPECT_TRUE(listed.count("input/tokens.txt"));
        const torch::Tensor from = read_npy((dir / "cls/from_cls.npy").string());
        expect_close(from, out.cls.from_cls);
    }
}

// Every scheme's own layer-0 terms (engine::LayerPosition::terms) reach scheme_terms/ under
// their names, and they are the model's logits taken apart: for one unpadded sentence the
// written terms of each head add up to the logits of the model's own forward pass, and over a
// padded batch in two batches to the logits' mean over the sentences with both tokens.
TEST_F(AnalyzeTest, SchemeTermsAddUpToTheFirstLayerLogitsOfEveryScheme) {
    // "tupe-a pre-ln": layer 0 attends over LN(x), which the recomputed q and k must follow.
    for (const std::string preset :
         {"rope", "deberta", "tupe-a", "alibi", "t5", "bert-ad", "tupe-a pre-ln"}) {
        SCOPED_TRACE(preset);
        const bool pre_ln = preset == "tupe-a pre-ln";
        engine::BertForMaskedLM model{nullptr};
        if (pre_ln) {
            engine::ModelConfig c = test_support::tiny16_config("tupe-a", 15, kAnalyzeMaxPositions);
            c.pre_layernorm = true;
            torch::manual_seed(3);
            model = engine::BertForMaskedLM(c);
            torch::NoGradGuard no_grad;
            for (auto& p : model->parameters()) p.normal_(0.0, 0.4);  // as tiny_model
        } else {
            model = tiny_model(preset);
        }
        const engine::PositionDescription& scheme = model->bert->position->description();
        const AnalysisOutput one = analyze_model(model, tokenizer(), {"the cat sat on a mat"});
        const int64_t H = one.config.num_attention_heads, T = one.input_ids.size(1);
        ASSERT_EQ(T, 8);
        ASSERT_EQ(one.scheme_terms.terms.size(), scheme.logit_terms.size());
        EXPECT_EQ(one.scheme_terms.summary, scheme.summary);

        const fs::path dir = dir_ / (pre_ln ? std::string("tupe-a-pre-ln") : preset);
        const std::vector<IndexEntry> entries = write_analysis(one, dir.string());
        torch::NoGradGuard no_grad;
        model->eval();
        const torch::Tensor logits =  // (H, T, T) of the only sentence
            model->bert->forward(one.input_ids, one.attention_mask, {}, true)
                .attention_logits[0][0]
                .to(torch::kDouble);
        auto sum = torch::zeros({H, T, T}, torch::kDouble);
        for (size_t k = 0; k < scheme.logit_terms.size(); ++k) {
            const std::string& name = scheme.logit_terms[k];
            SCOPED_TRACE(name);
            EXPECT_EQ(one.scheme_terms.terms[k].first, name);
            const torch::Tensor all = read_npy((dir / ("scheme_terms/" + name + ".npy")).string());
            ASSERT_EQ(all.sizes(), (std::vector<int64_t>{H, T, T}));
            expect_close(all, one.scheme_terms.terms[k].second, 1e-7);
            for (int64_t h = 0; h < H; ++h) {
                const std::string rel = "scheme_terms/" + name + "_h" + std::to_string(h);
                expect_close(read_npy((dir / (rel + ".npy")).string()), all[h], 1e-7);
                int listed = 0;
                for (const IndexEntry& e : entries)
                    if (e.file == rel + ".npy" || e.file == rel + ".csv") {
                        ++listed;
                        EXPECT_EQ(e.what, "scheme_" + name);
                        EXPECT_EQ(e.layer, 0);
                        EXPECT_EQ(e.head, h);
                        EXPECT_NE(e.description.find(scheme.summary), std::string::npos)
                            << e.description;
                    }
                EXPECT_EQ(listed, 2);  // .npy and .csv
            }
            sum += all.to(torch::kDouble);
        }
        // Not a tautology: the terms come from layer 0's q and k recomputed in analyze_model,
        // the logits from the model's fused attention.
        EXPECT_GT(logits.abs().max().item<double>(), 1.0);
        for (int64_t h = 0; h < H; ++h) expect_close(sum[h], logits[h], 1e-4);

        AnalyzeOptions batches;
        batches.batch_size = 2;
        const AnalysisOutput padded = analyze_model(model, tokenizer(), kSentences, batches);
        auto m = padded.attention_mask.to(torch::kDouble);
        auto pair = (m.unsqueeze(2) * m.unsqueeze(1)).unsqueeze(1);  // (N, 1, T, T)
        model->eval();
        auto all_logits = model->bert->forward(padded.input_ids, padded.attention_mask, {}, true)
                              .attention_logits[0]
                              .to(torch::kDouble);
        auto want = (all_logits * pair).sum(0) / pair.sum(0).clamp_min(1.0);  // (H, T, T)
        auto got = torch::zeros_like(want);
        for (const auto& [name, map] : padded.scheme_terms.terms) got += map.to(torch::kDouble);
        expect_close(got, want, 1e-4);
    }
}

// `tupe export` then `tupe analyze` of the HF folder gives the same bytes as analysing the
// model itself, for every preset of the zoo: the export carries every positional parameter
// under a name the importer maps back, and the config block every scheme field.
TEST_F(AnalyzeTest, ExportedModelsAnalyseByteIdenticallyForEveryPreset) {
    fs::create_directories(dir_);
    const fs::path vocab = dir_ / "vocab.txt";
    tokenizer().vocab().save(vocab.string());
    auto bytes = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    for (const auto& preset : engine::model_presets()) {
        SCOPED_TRACE(preset);
        auto model = tiny_model(preset);
        model->eval();
        AnalysisOutput direct = analyze_model(model, tokenizer(), kSentences);
        write_analysis(direct, (dir_ / preset / "direct").string());
        export_hf_bert(model, vocab.string(), true, (dir_ / preset / "hf").string());
        auto imported = import_hf_bert((dir_ / preset / "hf").string());
        EXPECT_EQ(imported->config().preset, preset);
        AnalysisOutput again = analyze_model(imported, tokenizer(), kSentences);
        write_analysis(again, (dir_ / preset / "again").string());
        int compared = 0;
        for (const auto& f : fs::recursive_directory_iterator(dir_ / preset / "direct")) {
            if (f.path().extension() != ".npy") continue;
            const auto rel = fs::relative(f.path(), dir_ / preset / "direct");
            ASSERT_TRUE(fs::exists(dir_ / preset / "again" / rel)) << rel;
            EXPECT_EQ(bytes(f.path()), bytes(dir_ / preset / "again" / rel)) << rel;
            ++compared;
        }
        EXPECT_GT(compared, 4);
    }
}
