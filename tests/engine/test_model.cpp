// Model family tests: every variant's attention logits against the formula of
// TUPE_NOTES.md evaluated independently from the module's own weights, T5 buckets, the [CLS]
// reset, the once-per-forward positional term, padding, a double-precision gradient check.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "engine/bert.h"
#include "engine/position.h"
#include "support/test_support.h"
#include "support/torch_support.h"

using namespace engine;

namespace {

// Hidden 16, 2 heads, 24 positions, no dropout.
ModelConfig tiny(const std::string& preset, int64_t vocab = 40) {
    return test_support::tiny16_config(preset, vocab, 24, /*dropout=*/false);
}

// Re-draw every parameter with a large spread so positional terms are far from zero and a
// wrong index or scale shows up clearly.
void randomize(torch::nn::Module& m, uint64_t seed) {
    test_support::randomize_parameters(m, seed, 0.5, /*unit_layer_norm_gains=*/false);
}

torch::Tensor ids_for(int64_t T, int64_t vocab) {
    torch::manual_seed(7);
    auto ids = torch::randint(5, vocab, {1, T}, torch::kLong);
    ids[0][0] = 2;  // [CLS]
    return ids;
}

torch::Tensor param(torch::nn::Module& m, const std::string& name) {
    auto p = m.named_parameters().find(name);
    EXPECT_NE(p, nullptr) << name;
    return p ? *p : torch::Tensor();
}

torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                         double eps) {
    auto mean = x.mean(-1, true);
    auto var = (x - mean).pow(2).mean(-1, true);
    return (x - mean) / torch::sqrt(var + eps) * w + b;
}

// Input of layer 0 as the variants define it (eval mode: no dropout).
torch::Tensor embed(BertModel& bert, const torch::Tensor& ids, bool add_positions) {
    auto& m = *bert;
    const int64_t T = ids.size(1);
    auto x = param(m, "embeddings.word_embeddings.weight").index_select(0, ids[0]);
    if (add_positions) x = x + param(m, "embeddings.position_embeddings.weight").slice(0, 0, T);
    x = x + param(m, "embeddings.token_type_embeddings.weight")[0];
    return layer_norm(x, param(m, "embeddings.LayerNorm.weight"),
                      param(m, "embeddings.LayerNorm.bias"), m.config().layer_norm_eps);
}

// (T, C) x head h -> (T, d) slice of a linear map y = x W^T + b.
torch::Tensor head_proj(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                        int64_t h, int64_t d) {
    auto y = torch::matmul(x, w.t()) + b;
    return y.slice(1, h * d, (h + 1) * d);
}

// The word term of layer L for head h: (x W^Q)(x W^K)^T / sqrt(d * factor).
torch::Tensor word_term(BertModel& bert, const torch::Tensor& x, int64_t layer, int64_t h) {
    auto& m = *bert;
    const auto& c = m.config();
    const std::string p = "encoder.layer." + std::to_string(layer) + ".attention.self.";
    auto q =
        head_proj(x, param(m, p + "query.weight"), param(m, p + "query.bias"), h, c.head_dim());
    auto k = head_proj(x, param(m, p + "key.weight"), param(m, p + "key.bias"), h, c.head_dim());
    return torch::matmul(q, k.t()) / std::sqrt(double(c.head_dim()) * c.attention_scale_factor);
}

// TUPE's A = (p'U^Q)(p'U^K)^T / sqrt(2d) over rows 0..T for head h, from the weights alone.
torch::Tensor tupe_a(BertModel& bert, int64_t T, int64_t h, const std::string& group = "0") {
    auto& m = *bert;
    const auto& c = m.config();
    auto p = param(m, "position_bias.pos.weight").slice(0, 0, T + 1);
    auto pn = layer_norm(p, param(m, "position_bias.pos_ln.weight"),
                         param(m, "position_bias.pos_ln.bias"), c.layer_norm_eps);
    const std::string pre = "position_bias.projections." + group + ".";
    auto q = head_proj(pn, param(m, pre + "pos_q_linear.weight"),
                       param(m, pre + "pos_q_linear.bias"), h, c.head_dim());
    auto k = head_proj(pn, param(m, pre + "pos_k_linear.weight"),
                       param(m, pre + "pos_k_linear.bias"), h, c.head_dim());
    return torch::matmul(q, k.t()) / std::sqrt(2.0 * c.head_dim());
}

// The full TUPE positional bias [i][j] for head h, written element by element, with token t at
// position offset + t (table row offset + t + 1); the reset's theta1 and theta2 are rows 0 and
// 1 whatever the offset (Ke et al. 2021, Eq. 9).
torch::Tensor tupe_bias_by_hand(BertModel& bert, int64_t T, int64_t h, bool reset, bool rel,
                                int64_t offset = 0) {
    const auto& c = bert->config();
    auto a = tupe_a(bert, T + offset, h);
    auto table =
        rel ? param(*bert, "position_bias.relative_attention_bias.weight") : torch::Tensor();
    auto out = torch::zeros({T, T});
    for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
            double v = a[offset + i + 1][offset + j + 1].item<double>();
            int64_t bucket = t5_relative_bucket(j - i, c.rel_pos_bins, c.max_rel_pos);
            if (reset && j == 0) v = a[1][1].item<double>(), bucket = c.rel_pos_bins;
            if (reset && i == 0) v = a[0][0].item<double>(), bucket = c.rel_pos_bins / 2;
            if (rel) v += table[bucket][h].item<double>();
            out[i][j] = v;
        }
    return out;
}

EncoderOutput run(BertModel& bert, const torch::Tensor& ids) {
    torch::NoGradGuard g;
    bert->eval();
    return bert->forward(ids, {}, torch::zeros_like(ids), true);
}

}  // namespace

TEST(T5Buckets, RangesMatchTheReference) {
    struct Range {
        int64_t lo, hi, bucket;
    };
    const Range ranges[] = {{0, 7, -1},   {8, 11, 8},   {12, 15, 9},  {16, 22, 10}, {23, 31, 11},
                            {32, 45, 12}, {46, 63, 13}, {64, 90, 14}, {91, 400, 15}};
    for (const auto& r : ranges)
        for (int64_t n = r.lo; n <= r.hi; ++n) {
            const int64_t expect = r.bucket < 0 ? n : r.bucket;
            // Key at or left of the query: rel = j - i = -n.
            EXPECT_EQ(t5_relative_bucket(-n, 32, 128), expect) << "n=" << n;
            // Key to the right: +16.
            if (n > 0) EXPECT_EQ(t5_relative_bucket(n, 32, 128), expect + 16) << "n=" << n;
        }
}

TEST(T5Buckets, ClsBucketsInRowAndColumnZero) {
    auto b = relative_bucket_matrix(10, 32, 128, true);
    EXPECT_EQ(b[0][0].item<int64_t>(), 16);
    for (int64_t k = 1; k < 10; ++k) {
        EXPECT_EQ(b[0][k].item<int64_t>(), 16);  // [CLS] -> others
        EXPECT_EQ(b[k][0].item<int64_t>(), 32);  // others -> [CLS], the extra bucket
    }
    EXPECT_EQ(b[3][5].item<int64_t>(), t5_relative_bucket(2, 32, 128));
    auto plain = relative_bucket_matrix(10, 32, 128, false);
    EXPECT_EQ(plain[4][0].item<int64_t>(), 4);
    EXPECT_EQ(plain[0][0].item<int64_t>(), 0);
}

TEST(UntiedPositionBias, TupeALogitsEqualTheFormula) {
    BertModel bert(tiny("tupe-a"));
    randomize(*bert, 1);
    const int64_t T = 9;
    auto ids = ids_for(T, 40);
    auto out = run(bert, ids);
    auto x = embed(bert, ids, /*add_positions=*/false);
    torch::NoGradGuard g;
    for (int64_t h = 0; h < 2; ++h) {
        auto expect = word_term(bert, x, 0, h) + tupe_bias_by_hand(bert, T, h, true, false);
        EXPECT_TRUE(torch::allclose(out.attention_logits[0][0][h], expect, 1e-4, 1e-4))
            << "head " << h;
    }
}

TEST(UntiedPositionBias, TupeRLogitsEqualTheFormula) {
    BertModel bert(tiny("tupe-r"));
    randomize(*bert, 2);
    const int64_t T = 12;
    auto ids = ids_for(T, 40);
    auto out = run(bert, ids);
    auto x = embed(bert, ids, false);
    torch::NoGradGuard g;
    for (int64_t h = 0; h < 2; ++h) {
        auto expect = word_term(bert, x, 0, h) + tupe_bias_by_hand(bert, T, h, true, true);
        EXPECT_TRUE(torch::allclose(out.attention_logits[0][0][h], expect, 1e-4, 1e-4))
            << "head " << h;
    }
}

TEST(UntiedPositionBias, ClsRowUsesTheta1AndColumnTheta2) {
    BertModel bert(tiny("tupe-a"));
    randomize(*bert, 3);
    const int64_t T = 7;
    torch::NoGradGuard g;
    auto terms = bert->position->forward(T);
    ASSERT_EQ(terms.layers.size(), 1u);
    auto a = tupe_a(bert, T, 0);  // (T+1, T+1) of head 0, by hand
    auto a1 = tupe_a(bert, T, 1);
    for (int64_t h = 0; h < 2; ++h) {
        auto& ah = h == 0 ? a : a1;
        const float theta1 = ah[0][0].item<float>(), theta2 = ah[1][1].item<float>();
        for (int64_t j = 0; j < T; ++j)
            EXPECT_NEAR(terms.layers[0].bias[h][0][j].item<float>(), theta1, 1e-5);
        for (int64_t i = 1; i < T; ++i)
            EXPECT_NEAR(terms.layers[0].bias[h][i][0].item<float>(), theta2, 1e-5);
        EXPECT_NEAR(terms.layers[0].bias[h][3][5].item<float>(), ah[4][6].item<float>(), 1e-5);
    }
}

// theta1 and theta2 are learned values free of position (Ke et al. 2021, Eq. 9 and App. B):
// shifting the positions (model.position_offset, a shifted window, randomized positions) moves
// every other entry of the untied term but never [CLS]'s row and column.
TEST(UntiedPositionBias, ClsResetDoesNotMoveWithThePositions) {
    for (const std::string preset : {"tupe-a", "tupe-r"}) {
        BertModel bert(tiny(preset));
        randomize(*bert, 5);
        const int64_t T = 6;
        torch::NoGradGuard g;
        bert->eval();
        auto at_zero = bert->position->forward(T).layers[0].bias;  // (H, T, T)
        for (const int64_t offset : {1, 7}) {
            bert->position->set_position_offset(offset);
            auto shifted = bert->position->forward(T).layers[0].bias;
            EXPECT_TRUE(torch::equal(shifted.select(1, 0), at_zero.select(1, 0)))
                << preset << " offset " << offset << ": [CLS] row moved";
            EXPECT_TRUE(torch::equal(shifted.select(2, 0), at_zero.select(2, 0)))
                << preset << " offset " << offset << ": [CLS] column moved";
            for (int64_t h = 0; h < 2; ++h)
                EXPECT_TRUE(torch::allclose(
                    shifted[h], tupe_bias_by_hand(bert, T, h, true, preset == "tupe-r", offset),
                    1e-5, 1e-5))
                    << preset << " offset " << offset << " head " << h;
        }
        bert->position->set_position_offset(0);
        // Randomized positions in training: any sorted draw, the same [CLS] row and column.
        for (int64_t draw = 0; draw < 3; ++draw) {
            auto p = std::get<0>(torch::randperm(20, torch::kLong).slice(0, 0, T).sort());
            auto bias = bert->position->forward(p).layers[0].bias;
            EXPECT_TRUE(torch::equal(bias.select(1, 0), at_zero.select(1, 0))) << preset;
            EXPECT_TRUE(torch::equal(bias.select(2, 0), at_zero.select(2, 0))) << preset;
        }
    }
}

// A model trained at model.position_offset reads the same formula at its own positions.
TEST(UntiedPositionBias, PositionOffsetLogitsEqualTheFormula) {
    auto config = tiny("tupe-a");
    config.position_offset = 7;
    BertModel bert(config);
    randomize(*bert, 6);
    const int64_t T = 8;
    auto ids = ids_for(T, 40);
    auto out = run(bert, ids);
    auto x = embed(bert, ids, false);
    torch::NoGradGuard g;
    for (int64_t h = 0; h < 2; ++h) {
        auto expect = word_term(bert, x, 0, h) + tupe_bias_by_hand(bert, T, h, true, false, 7);
        EXPECT_TRUE(torch::allclose(out.attention_logits[0][0][h], expect, 1e-4, 1e-4))
            << "head " << h;
    }
}

TEST(UntiedPositionBias, TieClsKeepsOrdinaryPositionRows) {
    BertModel bert(tiny("tupe-a-tie-cls"));
    randomize(*bert, 4);
    const int64_t T = 6;
    torch::NoGradGuard g;
    auto bias = bert->position->forward(T).layers[0].bias;
    for (int64_t h = 0; h < 2; ++h)
        EXPECT_TRUE(
            torch::allclose(bias[h], tupe_bias_by_hand(bert, T, h, false, false), 1e-5, 1e-5));
}

TEST(UntiedPositionBias, ComputedOncePerForwardAndSharedByLayers) {
    BertModel bert(tiny("tupe-r"));
    randomize(*bert, 5);
    const int64_t T = 8;
    auto ids = ids_for(T, 40);
    const int64_t before = bert->position->forward_count();
    auto out = run(bert, ids);
    EXPECT_EQ(bert->position->forward_count() - before, 1);
    // Layer 1's logits minus its own word term equal layer 0's positional bias.
    torch::NoGradGuard g;
    auto x0 = embed(bert, ids, false).unsqueeze(0);
    auto x1 = bert->encoder->layer[0]->as<BertLayerImpl>()->forward(
        x0, {}, bert->position->forward(T).layers[0]);
    for (int64_t h = 0; h < 2; ++h) {
        auto pos1 = out.attention_logits[1][0][h] - word_term(bert, x1[0], 1, h);
        auto pos0 = out.attention_logits[0][0][h] - word_term(bert, x0[0], 0, h);
        EXPECT_TRUE(torch::allclose(pos1, pos0, 1e-4, 1e-4)) << "head " << h;
    }
}

TEST(UntiedPositionBias, PerLayerTermsDifferBetweenLayers) {
    auto c = tiny("tupe-a");
    c.shared_pos_term = false;
    BertModel bert(c);
    randomize(*bert, 6);
    torch::NoGradGuard g;
    auto terms = bert->position->forward(5);
    ASSERT_EQ(terms.layers.size(), 2u);
    EXPECT_FALSE(torch::allclose(terms.layers[0].bias, terms.layers[1].bias));
    EXPECT_NE(bert->named_parameters().find("position_bias.projections.1.pos_q_linear.weight"),
              nullptr);
}

TEST(BertModel, BertALogitsEqualTheFormula) {
    BertModel bert(tiny("bert-a"));
    randomize(*bert, 7);
    EXPECT_TRUE(!bert->position->has_parameters());
    const int64_t T = 10;
    auto ids = ids_for(T, 40);
    auto out = run(bert, ids);
    auto x = embed(bert, ids, /*add_positions=*/true);
    torch::NoGradGuard g;
    for (int64_t h = 0; h < 2; ++h)
        EXPECT_TRUE(
            torch::allclose(out.attention_logits[0][0][h], word_term(bert, x, 0, h), 1e-4, 1e-4));
}

TEST(BertModel, BertRAddsPlainT5Bias) {
    BertModel bert(tiny("bert-r"));
    randomize(*bert, 8);
    const int64_t T = 10;
    auto ids = ids_for(T, 40);
    auto out = run(bert, ids);
    auto x = embed(bert, ids, true);
    torch::NoGradGuard g;
    auto table = param(*bert, "position_bias.relative_attention_bias.weight");
    for (int64_t h = 0; h < 2; ++h) {
        auto expect = word_term(bert, x, 0, h);
        for (int64_t i = 0; i < T; ++i)
            for (int64_t j = 0; j < T; ++j)
                expect[i][j] += table[t5_relative_bucket(j - i, 32, 128)][h];
        EXPECT_TRUE(torch::allclose(out.attention_logits[0][0][h], expect, 1e-4, 1e-4));
    }
}

TEST(BertModel, BertAdLogitsAreTheFourTerms) {
    BertModel bert(tiny("bert-ad"));
    randomize(*bert, 9);
    const int64_t T = 8;
    auto ids = ids_for(T, 40);
    auto out = run(bert, ids);
    torch::NoGradGuard g;
    auto& m = *bert;
    const int64_t d = m.config().head_dim();
    auto x = embed(bert, ids, false);
    auto p = layer_norm(param(m, "position_bias.pos.weight").slice(0, 0, T),
                        param(m, "position_bias.pos_ln.weight"),
                        param(m, "position_bias.pos_ln.bias"), m.config().layer_norm_eps);
    const std::string s = "encoder.layer.0.attention.self.", u = "position_bias.projections.0.";
    for (int64_t h = 0; h < 2; ++h) {
        auto xq = head_proj(x, param(m, s + "query.weight"), param(m, s + "query.bias"), h, d);
        auto xk = head_proj(x, param(m, s + "key.weight"), param(m, s + "key.bias"), h, d);
        auto pq = head_proj(p, param(m, u + "pos_q_linear.weight"),
                            param(m, u + "pos_q_linear.bias"), h, d);
        auto pk = head_proj(p, param(m, u + "pos_k_linear.weight"),
                            param(m, u + "pos_k_linear.bias"), h, d);
        auto expect =
            (xq.matmul(xk.t()) + xq.matmul(pk.t()) + pq.matmul(xk.t()) + pq.matmul(pk.t())) /
            std::sqrt(4.0 * d);
        EXPECT_TRUE(torch::allclose(out.attention_logits[0][0][h], expect, 1e-4, 1e-4));
    }
}

TEST(BertModel, BertAUntieClsResetsRowAndColumn) {
    auto c = tiny("bert-a");
    c.untie_cls = true;
    BertModel bert(c);
    randomize(*bert, 10);
    torch::NoGradGuard g;
    auto bias = bert->position->forward(5).layers.at(0).bias;
    auto theta = *bert->position->named_parameters().find("cls_theta");
    for (int64_t h = 0; h < 2; ++h) {
        EXPECT_FLOAT_EQ(bias[h][0][3].item<float>(), theta[0][h].item<float>());
        EXPECT_FLOAT_EQ(bias[h][0][0].item<float>(), theta[0][h].item<float>());
        EXPECT_FLOAT_EQ(bias[h][4][0].item<float>(), theta[1][h].item<float>());
        EXPECT_FLOAT_EQ(bias[h][2][3].item<float>(), 0.0f);
    }
}

TEST(BertModel, PaddingDoesNotChangeRealTokens) {
    for (const auto& preset : model_presets()) {
        BertModel bert(tiny(preset));
        randomize(*bert, 11);
        bert->eval();
        torch::NoGradGuard g;
        auto ids = ids_for(6, 40);
        auto padded = torch::cat({ids, torch::zeros({1, 3}, torch::kLong)}, 1);
        auto mask =
            torch::cat({torch::ones({1, 6}, torch::kLong), torch::zeros({1, 3}, torch::kLong)}, 1);
        auto a = bert->forward(ids, torch::ones({1, 6}, torch::kLong), {}, true);
        auto b = bert->forward(padded, mask, {}, true);
        EXPECT_TRUE(
            torch::allclose(a.last_hidden_state, b.last_hidden_state.slice(1, 0, 6), 1e-4, 1e-4))
            << preset;
        EXPECT_LT(b.attention_probs[0].slice(3, 6).abs().max().item<float>(), 1e-6) << preset;
    }
}

TEST(BertModel, TooLongSequenceFailsClearly) {
    BertModel bert(tiny("tupe-a"));
    auto ids = torch::full({1, 25}, 5, torch::kLong);
    try {
        bert->forward(ids);
        FAIL() << "expected an error";
    } catch (const c10::Error& e) {
        EXPECT_NE(std::string(e.what()).find("max_position_embeddings"), std::string::npos);
    }
}

TEST(BertModel, ParameterNamesFollowHfAndTheReference) {
    BertForMaskedLM mlm(tiny("tupe-r"));
    auto names = mlm->named_parameters();
    for (const char* n :
         {"bert.embeddings.word_embeddings.weight",
          "bert.encoder.layer.1.attention.self.query.weight",
          "bert.encoder.layer.0.attention.output.LayerNorm.bias",
          "bert.encoder.layer.0.intermediate.dense.weight", "bert.position_bias.pos.weight",
          "bert.position_bias.pos_ln.weight", "bert.position_bias.projections.0.pos_q_linear.bias",
          "bert.position_bias.relative_attention_bias.weight",
          "cls.predictions.transform.dense.weight", "cls.predictions.bias"})
        EXPECT_NE(names.find(n), nullptr) << n;
    // The TUPE table has max_len + 1 rows; the relative table rel_pos_bins + 1.
    EXPECT_EQ(names["bert.position_bias.pos.weight"].size(0), 25);
    EXPECT_EQ(names["bert.position_bias.relative_attention_bias.weight"].size(0), 33);
    EXPECT_EQ(names.find("bert.embeddings.position_embeddings.weight"), nullptr);
}

TEST(BertModel, TupeOverheadAtBaseSizeMatchesThePaper) {
    auto bert_a = make_model_config("bert-a", "base"), tupe_a = make_model_config("tupe-a", "base");
    BertModel a(bert_a), t(tupe_a);
    const int64_t extra = parameter_groups(*t)["total"] - parameter_groups(*a)["total"];
    // The paper: about 1.18M extra parameters on BERT-Base (U^Q, U^K with biases, pos_ln, one row).
    EXPECT_EQ(extra, 2 * (768 * 768 + 768) + 2 * 768 + 768);
    EXPECT_NEAR(static_cast<double>(extra), 1.18e6, 0.01e6);
}

TEST(BertModel, InitFollowsTheReference) {
    auto c = make_model_config("tupe-r", "small");
    c.vocab_size = 1000;
    BertForMaskedLM m(c);
    auto p = m->named_parameters();
    const double std_q = p["bert.encoder.layer.0.attention.self.query.weight"].std().item<double>();
    EXPECT_NEAR(std_q, 0.02, 0.002);
    EXPECT_NEAR(p["bert.position_bias.pos.weight"].std().item<double>(), 0.02, 0.002);
    EXPECT_EQ(p["bert.position_bias.projections.0.pos_k_linear.bias"].abs().sum().item<double>(),
              0.0);
    EXPECT_EQ(p["bert.embeddings.word_embeddings.weight"][0].abs().sum().item<double>(), 0.0);
}

TEST(BertForMaskedLM, LossOnlyAtMaskedPositions) {
    BertForMaskedLM m(tiny("tupe-a"));
    m->eval();
    torch::NoGradGuard g;
    auto ids = ids_for(8, 40);
    auto labels = torch::full({1, 8}, -100, torch::kLong);
    labels[0][3] = 9;
    labels[0][5] = 11;
    auto out = m->forward(ids, torch::ones({1, 8}, torch::kLong), labels, true);
    EXPECT_EQ(out.num_masked, 2);
    EXPECT_EQ(out.logits.size(0), 2);
    EXPECT_EQ(out.logits.size(1), 40);
    // Loss equals the mean cross-entropy of the two rows, the decoder tied to the embeddings.
    auto h = m->bert->forward(ids, torch::ones({1, 8}, torch::kLong)).last_hidden_state[0];
    auto t = m->cls->predictions->transform(h.index_select(0, torch::tensor({3, 5})));
    auto logits =
        t.matmul(m->bert->embeddings->word_embeddings->weight.t()) + m->cls->predictions->bias;
    auto expect = torch::nn::functional::cross_entropy(logits, torch::tensor({9, 11}));
    EXPECT_NEAR(out.loss.item<double>(), expect.item<double>(), 1e-5);
}

TEST(BertForMaskedLM, GradientsMatchFiniteDifferencesInDouble) {
    for (const std::string preset : {"tupe-r", "bert-ad"}) {
        auto c = tiny(preset, 20);
        c.hidden_size = 8;
        c.intermediate_size = 16;
        c.max_position_embeddings = 8;
        BertForMaskedLM m(c);
        randomize(*m, 12);
        m->to(torch::kDouble);
        m->eval();
        auto ids = torch::tensor({{2, 7, 9, 11, 5, 3}}, torch::kLong);
        auto labels = torch::tensor({{-100, 8, -100, 12, -100, -100}}, torch::kLong);
        auto mask = torch::ones({1, 6}, torch::kLong);
        auto loss = m->forward(ids, mask, labels).loss;
        m->zero_grad();
        loss.backward();
        for (const char* name :
             {"bert.position_bias.pos.weight", "bert.encoder.layer.1.attention.self.key.weight",
              "bert.embeddings.word_embeddings.weight"}) {
            auto p = m->named_parameters()[name];
            auto grad = p.grad().clone();
            torch::NoGradGuard g;
            for (int64_t k : {1, 5, 17}) {
                auto flat = p.view({-1});
                const double old = flat[k].item<double>(), eps = 1e-6;
                flat[k] = old + eps;
                const double up = m->forward(ids, mask, labels).loss.item<double>();
                flat[k] = old - eps;
                const double down = m->forward(ids, mask, labels).loss.item<double>();
                flat[k] = old;
                EXPECT_NEAR(grad.view({-1})[k].item<double>(), (up - down) / (2 * eps), 1e-6)
                    << preset << " " << name << "[" << k << "]";
            }
        }
    }
}

TEST(Dropout, KeepsOneMinusPScaledAndIsSeededAndThreadIndependent) {
    const auto x = torch::ones({300, 1000});
    torch::manual_seed(42);
    const auto a = engine::dropout(x, 0.1, true);
    const double kept = a.ne(0).to(torch::kDouble).mean().item<double>();
    EXPECT_NEAR(kept, 0.9, 0.003);  // 300k draws: 5 standard deviations
    const auto values = std::get<0>(at::_unique(a.flatten()));
    ASSERT_EQ(values.numel(), 2);
    EXPECT_FLOAT_EQ(values[1].item<float>(), static_cast<float>(1.0 / 0.9));
    EXPECT_NEAR(a.mean().item<double>(), 1.0, 0.01);  // inverted dropout keeps the mean
    // The same seed gives the same mask whatever the thread count; the next call another.
    const int threads = at::get_num_threads();
    at::set_num_threads(threads == 1 ? 2 : 1);
    torch::manual_seed(42);
    const auto b = engine::dropout(x, 0.1, true);
    const auto c = engine::dropout(x, 0.1, true);
    at::set_num_threads(threads);
    EXPECT_TRUE(torch::equal(a, b));
    EXPECT_FALSE(torch::equal(b, c));
    // Identity in eval mode and for p = 0; the gradient is the mask.
    EXPECT_TRUE(torch::equal(engine::dropout(x, 0.1, false), x));
    EXPECT_TRUE(torch::equal(engine::dropout(x, 0.0, true), x));
    auto leaf = torch::randn({64, 64}).requires_grad_(true);
    auto y = engine::dropout(leaf, 0.3, true);
    y.sum().backward();
    EXPECT_TRUE(torch::allclose(leaf.grad() * leaf.detach(), y.detach(), 1e-6, 1e-6));
    EXPECT_NEAR(leaf.grad().ne(0).to(torch::kDouble).mean().item<double>(), 0.7, 0.03);
}
