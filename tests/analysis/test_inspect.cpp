// Tests of attention inspection (analysis/inspect.h) on a tiny TUPE-R model with a hand-made
// vocabulary: token framing, shapes per layer, softmax consistency, agreement with a direct
// encoder forward, the position-table limit, and the files write_inspection leaves behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/inspect.h"
#include "analysis/npy.h"
#include "engine/bert.h"
#include "engine/config.h"
#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "engine/trainer.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using analysis::inspect_text;
using analysis::Inspection;

namespace {

constexpr int64_t kInspectMaxPositions = 24;

engine::Vocab test_vocab() {
    return engine::Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat",
                                       "sat", "on", "mat", ".", "dog", "ran", "a", "##s"});
}

engine::ModelConfig tiny_config(const std::string& preset, int64_t vocab_size) {
    engine::ModelConfig config = test_support::tiny_config(preset, vocab_size);
    config.max_position_embeddings = kInspectMaxPositions;
    return config;
}

/// "the cat the cat ..." with n words (each one token).
std::string words(int n) {
    std::string text;
    for (int i = 0; i < n; ++i) text += (i % 2 == 0) ? "the " : "cat ";
    return text;
}

class InspectTest : public ::testing::Test {
  protected:
    InspectTest() : tokenizer_(test_vocab()) {
        torch::manual_seed(0);
        model_ = engine::BertForMaskedLM(tiny_config("tupe-r", tokenizer_.vocab().size()));
    }

    engine::WordPieceTokenizer tokenizer_;
    engine::BertForMaskedLM model_{nullptr};
};

}  // namespace

TEST_F(InspectTest, TokensAreFramedByClsAndSep) {
    const Inspection single = inspect_text(model_, tokenizer_, "The cats sat on the mat.");
    const std::vector<std::string> expected = {"[CLS]", "the", "cat", "##s", "sat",
                                               "on",    "the", "mat", ".",   "[SEP]"};
    EXPECT_EQ(single.tokens, expected);
    EXPECT_EQ(single.input_ids.scalar_type(), torch::kLong);
    EXPECT_EQ(single.input_ids.dim(), 1);
    EXPECT_EQ(single.input_ids[0].item<int64_t>(), tokenizer_.vocab().cls_id());
    EXPECT_EQ(single.token_type_ids.sum().item<int64_t>(), 0);

    const Inspection pair = inspect_text(model_, tokenizer_, "the cat sat", "a dog ran");
    ASSERT_EQ(pair.tokens.size(), 9u);
    EXPECT_EQ(pair.tokens.front(), "[CLS]");
    EXPECT_EQ(pair.tokens[4], "[SEP]");
    EXPECT_EQ(pair.tokens.back(), "[SEP]");
    const torch::Tensor types = torch::tensor({0, 0, 0, 0, 0, 1, 1, 1, 1}, torch::kLong);
    EXPECT_TRUE(torch::equal(pair.token_type_ids, types));
}

TEST_F(InspectTest, OneMapPerLayerWithHeadsByTokensByTokens) {
    const Inspection ins = inspect_text(model_, tokenizer_, "the dog sat on a mat");
    const auto& config = model_->config();
    const int64_t T = static_cast<int64_t>(ins.tokens.size());
    EXPECT_EQ(ins.input_ids.size(0), T);
    ASSERT_EQ(static_cast<int64_t>(ins.logits.size()), config.num_hidden_layers);
    ASSERT_EQ(static_cast<int64_t>(ins.probs.size()), config.num_hidden_layers);
    const std::vector<int64_t> shape = {config.num_attention_heads, T, T};
    for (size_t l = 0; l < ins.logits.size(); ++l) {
        EXPECT_EQ(ins.logits[l].sizes(), shape);
        EXPECT_EQ(ins.probs[l].sizes(), shape);
        EXPECT_EQ(ins.logits[l].scalar_type(), torch::kFloat);
        EXPECT_EQ(ins.probs[l].scalar_type(), torch::kFloat);
        EXPECT_TRUE(ins.logits[l].device().is_cpu());
    }
}

TEST_F(InspectTest, ProbabilityRowsSumToOneAndEqualSoftmaxOfLogits) {
    // Every variant: the logits must carry all positional terms the probabilities saw.
    for (const std::string& preset : engine::model_presets()) {
        torch::manual_seed(1);
        engine::BertForMaskedLM model(tiny_config(preset, tokenizer_.vocab().size()));
        const Inspection ins = inspect_text(model, tokenizer_, "the cat sat", "the dog ran .");
        for (size_t l = 0; l < ins.probs.size(); ++l) {
            const torch::Tensor sums = ins.probs[l].sum(-1);
            EXPECT_TRUE(torch::allclose(sums, torch::ones_like(sums), 1e-5, 1e-6))
                << preset << " layer " << l;
            EXPECT_TRUE(
                torch::allclose(torch::softmax(ins.logits[l], -1), ins.probs[l], 1e-5, 1e-6))
                << preset << " layer " << l;
        }
    }
}

TEST_F(InspectTest, LogitsEqualThoseOfADirectForward) {
    const Inspection ins = inspect_text(model_, tokenizer_, "the cat sat on the mat", "a dog ran");
    torch::NoGradGuard no_grad;
    model_->eval();
    const engine::EncoderOutput direct = model_->bert->forward(
        ins.input_ids.unsqueeze(0), {}, ins.token_type_ids.unsqueeze(0), true);
    ASSERT_EQ(direct.attention_logits.size(), ins.logits.size());
    for (size_t l = 0; l < ins.logits.size(); ++l) {
        EXPECT_TRUE(torch::equal(direct.attention_logits[l].squeeze(0), ins.logits[l])) << l;
        EXPECT_TRUE(torch::equal(direct.attention_probs[l].squeeze(0), ins.probs[l])) << l;
    }
}

TEST_F(InspectTest, RunsWithoutDropoutAndRestoresTrainingMode) {
    model_->train();
    const Inspection a = inspect_text(model_, tokenizer_, "the cat sat on the mat");
    const Inspection b = inspect_text(model_, tokenizer_, "the cat sat on the mat");
    EXPECT_TRUE(model_->is_training());
    for (size_t l = 0; l < a.probs.size(); ++l) EXPECT_TRUE(torch::equal(a.probs[l], b.probs[l]));
    EXPECT_FALSE(a.logits[0].requires_grad());
}

TEST_F(InspectTest, TextLongerThanThePositionTableThrows) {
    // kInspectMaxPositions - 2 words plus [CLS] and [SEP] fill the table exactly.
    const Inspection fits = inspect_text(model_, tokenizer_, words(kInspectMaxPositions - 2));
    EXPECT_EQ(static_cast<int64_t>(fits.tokens.size()), kInspectMaxPositions);

    try {
        inspect_text(model_, tokenizer_, words(kInspectMaxPositions - 1));
        FAIL() << "expected engine::InputError";
    } catch (const engine::InputError& e) {
        EXPECT_EQ(e.path(), "--text");
        const std::string what = e.what();
        EXPECT_NE(what.find(std::to_string(kInspectMaxPositions + 1) + " tokens"),
                  std::string::npos)
            << what;
        EXPECT_NE(what.find("position table"), std::string::npos) << what;
        EXPECT_NE(what.find("max " + std::to_string(kInspectMaxPositions)), std::string::npos)
            << what;
    }
    // A pair counts its second [SEP] and segment too.
    EXPECT_THROW(inspect_text(model_, tokenizer_, words(10), words(kInspectMaxPositions - 12)),
                 engine::InputError);
}

TEST_F(InspectTest, WritesTokensIdsAndOneFilePerLayerAndKind) {
    const Inspection ins = inspect_text(model_, tokenizer_, "the cats ran", "the dog sat");
    const test_support::TempDir temp("tupe_inspect_" + test_support::random_tag(),
                                     /*create=*/false);
    const fs::path dir = temp.path() / "nested";
    analysis::write_inspection(ins, dir.string());

    std::ifstream tokens_file(dir / "tokens.txt");
    std::vector<std::string> tokens;
    for (std::string line; std::getline(tokens_file, line);) tokens.push_back(line);
    EXPECT_EQ(tokens, ins.tokens);

    const torch::Tensor ids = analysis::read_npy((dir / "input_ids.npy").string());
    EXPECT_EQ(ids.scalar_type(), torch::kLong);
    EXPECT_TRUE(torch::equal(ids, ins.input_ids));
    const torch::Tensor types = analysis::read_npy((dir / "token_type_ids.npy").string());
    EXPECT_EQ(types.scalar_type(), torch::kLong);
    EXPECT_TRUE(torch::equal(types, ins.token_type_ids));
    for (size_t l = 0; l < ins.logits.size(); ++l) {
        const std::string stem = (dir / ("layer" + std::to_string(l))).string();
        const torch::Tensor logits = analysis::read_npy(stem + "_logits.npy");
        const torch::Tensor probs = analysis::read_npy(stem + "_probs.npy");
        EXPECT_EQ(logits.scalar_type(), torch::kFloat);
        EXPECT_TRUE(torch::equal(logits, ins.logits[l])) << l;
        EXPECT_TRUE(torch::equal(probs, ins.probs[l])) << l;
    }
    const std::string past = "layer" + std::to_string(ins.logits.size()) + "_logits.npy";
    EXPECT_FALSE(fs::exists(dir / past));
}

// bertviz_json: the probabilities of every layer and head in bertviz's layout, read back with
// nlohmann as L x H x T x T lists equal to the tensors (float32 round trip), rows summing to 1.
TEST_F(InspectTest, BertvizJsonHoldsEveryLayerAndHeadAsProbabilities) {
    const Inspection ins = inspect_text(model_, tokenizer_, "the cat sat", "a dog ran");
    const auto doc = nlohmann::json::parse(analysis::bertviz_json(ins, "ckpt.pt", "tupe-r"));
    const auto& config = model_->config();
    const auto t = ins.tokens.size();
    EXPECT_EQ(doc["tokens"].get<std::vector<std::string>>(), ins.tokens);
    EXPECT_EQ(doc["token_type_ids"].get<std::vector<int64_t>>(),
              std::vector<int64_t>({0, 0, 0, 0, 0, 1, 1, 1, 1}));
    EXPECT_EQ(doc["layers"].get<int64_t>(), config.num_hidden_layers);
    EXPECT_EQ(doc["heads"].get<int64_t>(), config.num_attention_heads);
    EXPECT_EQ(doc["model"], "ckpt.pt");
    EXPECT_EQ(doc["variant"], "tupe-r");
    const auto& attention = doc["attention"];
    ASSERT_EQ(attention.size(), static_cast<size_t>(config.num_hidden_layers));
    for (size_t l = 0; l < attention.size(); ++l) {
        ASSERT_EQ(attention[l].size(), static_cast<size_t>(config.num_attention_heads));
        for (size_t h = 0; h < attention[l].size(); ++h) {
            ASSERT_EQ(attention[l][h].size(), t);
            for (size_t i = 0; i < t; ++i) {
                const auto row = attention[l][h][i].get<std::vector<double>>();
                ASSERT_EQ(row.size(), t);
                double sum = 0;
                for (size_t j = 0; j < t; ++j) {
                    sum += row[j];
                    const auto li = static_cast<int64_t>(l), hi = static_cast<int64_t>(h);
                    EXPECT_EQ(static_cast<float>(row[j]),
                              ins.probs[l][hi][static_cast<int64_t>(i)][static_cast<int64_t>(j)]
                                  .item<float>())
                        << li << " " << hi << " " << i << " " << j;
                }
                EXPECT_NEAR(sum, 1.0, 1e-5) << "layer " << l << " head " << h << " row " << i;
            }
        }
    }
}

// The HTML page embeds the same JSON in <script type="application/json" id="attention">, with
// '<' escaped so a token such as "</script>" cannot end the element; write_bertviz picks the
// form by extension.
TEST_F(InspectTest, BertvizHtmlEmbedsTheJsonAndWriteBertvizPicksByExtension) {
    Inspection ins = inspect_text(model_, tokenizer_, "the cat sat");
    ins.tokens[1] = "</script><b>&";
    const std::string json = analysis::bertviz_json(ins, "m", "tupe-r");
    const std::string html = analysis::bertviz_html(ins, "m", "tupe-r");
    const std::string open = "<script type=\"application/json\" id=\"attention\">";
    const auto begin = html.find(open);
    ASSERT_NE(begin, std::string::npos);
    const auto end = html.find("</script>", begin + open.size());
    ASSERT_NE(end, std::string::npos);
    const std::string embedded = html.substr(begin + open.size(), end - begin - open.size());
    EXPECT_EQ(nlohmann::json::parse(embedded), nlohmann::json::parse(json));
    EXPECT_EQ(nlohmann::json::parse(embedded)["tokens"][1], "</script><b>&");
    EXPECT_NE(html.find("from bertviz import head_view"), std::string::npos);
    EXPECT_EQ(html.find("<b>"), std::string::npos);  // the token is escaped in the page text too

    const test_support::TempDir temp("tupe_bertviz_" + test_support::random_tag(),
                                     /*create=*/false);
    const fs::path dir = temp.path() / "nested";
    analysis::write_bertviz(ins, "m", "tupe-r", (dir / "a.json").string());
    analysis::write_bertviz(ins, "m", "tupe-r", (dir / "a.html").string());
    auto slurp = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    EXPECT_EQ(slurp(dir / "a.json"), json);
    EXPECT_EQ(slurp(dir / "a.html"), html);
    EXPECT_FALSE(fs::exists(dir / "a.json.tmp"));
}

// Checkpoints written before the positional zoo (tests/analysis/data/legacy/README.md) load
// into the PositionEncoding module and give the logits that version computed.
TEST(LegacyCheckpoints, LoadWithTheSameLogits) {
    const fs::path dir = fs::path(TUPE_SOURCE_DIR) / "tests" / "analysis" / "data" / "legacy";
    const engine::WordPieceTokenizer tokenizer(engine::Vocab::load((dir / "vocab.txt").string()));
    for (const std::string preset : {"bert-a", "bert-r", "tupe-r", "bert-ad"}) {
        SCOPED_TRACE(preset);
        auto loaded = engine::load_checkpoint((dir / preset / "checkpoint.pt").string());
        EXPECT_EQ(loaded.config.model.preset, preset);
        const Inspection now = inspect_text(loaded.model, tokenizer, "the cat sat", "a dog ran");
        auto ids = analysis::read_npy((dir / preset / "input_ids.npy").string());
        ASSERT_TRUE(torch::equal(now.input_ids, ids.to(torch::kLong)));
        ASSERT_EQ(now.logits.size(), 2u);
        for (size_t layer = 0; layer < 2; ++layer) {
            auto before = analysis::read_npy(
                (dir / preset / ("layer" + std::to_string(layer) + "_logits.npy")).string());
            EXPECT_TRUE(torch::allclose(now.logits[layer], before, 1e-5, 1e-6))
                << "layer " << layer << ": max |diff| "
                << (now.logits[layer] - before).abs().max().item<double>();
        }
    }
}
