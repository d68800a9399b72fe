// Tests of analysis/attention_flow.h and analysis/representations.h: rollout on hand-made
// attention with closed-form answers (identity, uniform, a two-layer product by hand); attention
// flow against its closed form on disjoint paths and against a brute-force minimum cut;
// value-weighted norms against a hand computation and against the layer's own output
// projection; the traced pass against the model's forward; the logit lens' last row against the
// model's own MLM loss; position vectors of a circle and of the models' own tables; and
// analyze_model's flow maps against the closed forms on one sentence.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "analysis/analyze.h"
#include "analysis/attention_flow.h"
#include "analysis/extrapolate.h"
#include "analysis/representations.h"
#include "engine/bert.h"
#include "engine/config.h"
#include "engine/tokenizer.h"
#include "support/test_support.h"

using namespace analysis;

namespace {

void flow_expect_close(const torch::Tensor& a, const torch::Tensor& b, double tol = 1e-9) {
    ASSERT_EQ(a.sizes(), b.sizes());
    EXPECT_LT((a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>(), tol);
}

torch::Tensor flow_random_attention(int64_t L, int64_t T, uint64_t seed) {
    torch::manual_seed(seed);
    return torch::softmax(torch::randn({L, T, T}, torch::kDouble) * 2.0, -1);
}

/// The minimum s-t cut of the layered attention graph by enumerating every node set: the
/// max-flow min-cut theorem's other side, computed without any flow.
double flow_min_cut_by_enumeration(const torch::Tensor& a_hat, int64_t source, int64_t query) {
    const int64_t L = a_hat.size(0), T = a_hat.size(1), N = (L + 1) * T;
    const int64_t s = source, t = L * T + query;
    double best = std::numeric_limits<double>::infinity();
    for (int64_t set = 0; set < (int64_t{1} << N); ++set) {
        if (!(set >> s & 1) || (set >> t & 1)) continue;  // S holds s and not t
        double cut = 0;
        for (int64_t l = 0; l < L; ++l)
            for (int64_t i = 0; i < T; ++i)
                for (int64_t j = 0; j < T; ++j) {
                    const int64_t from = l * T + j, to = (l + 1) * T + i;
                    if ((set >> from & 1) && !(set >> to & 1)) cut += a_hat[l][i][j].item<double>();
                }
        best = std::min(best, cut);
    }
    return best;
}

engine::WordPieceTokenizer flow_tokenizer() {
    return engine::WordPieceTokenizer(
        engine::Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat",
                                    "sat", "on", "mat", ".", "dog", "ran", "a", "##s"}));
}

engine::BertForMaskedLM flow_model(const std::string& preset, bool pre_ln = false) {
    engine::ModelConfig c = test_support::tiny16_config(preset, 15, 12, /*dropout=*/false);
    c.pre_layernorm = pre_ln;
    torch::manual_seed(5);
    engine::BertForMaskedLM model(c);
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.normal_(0.0, 0.4);  // far from uniform attention
    model->eval();
    return model;
}

}  // namespace

// ---- rollout ------------------------------------------------------------------------------------

TEST(AttentionRollout, IdentityAttentionRollsOutToTheIdentity) {
    const auto eye = torch::eye(5, torch::kDouble).expand({3, 5, 5});
    const auto r = attention_rollout(eye);
    for (int64_t l = 0; l < 3; ++l) flow_expect_close(r[l], torch::eye(5, torch::kDouble));
}

TEST(AttentionRollout, UniformLayersFollowTheClosedForm) {
    // A_hat = 0.5 U + 0.5 I with U idempotent: A_hat^k = 0.5^k I + (1 - 0.5^k) U.
    const int64_t T = 4, L = 3;
    const auto u = torch::full({T, T}, 1.0 / T, torch::kDouble);
    const auto r = attention_rollout(u.expand({L, T, T}));
    for (int64_t l = 0; l < L; ++l) {
        const double k = std::pow(0.5, static_cast<double>(l + 1));
        flow_expect_close(r[l], k * torch::eye(T, torch::kDouble) + (1 - k) * u);
    }
    // Without the residual, uniform attention is uniform after any number of layers.
    flow_expect_close(attention_rollout(u.expand({L, T, T}), false)[L - 1], u);
}

TEST(AttentionRollout, TwoLayersAreTheProductOfTheResidualMapsByHand) {
    // A_1 = [[.6 .4] [.2 .8]] -> A_hat_1 = [[.8 .2] [.1 .9]]; A_2 = [[0 1] [1 0]] -> all 0.5.
    const auto a =
        torch::tensor({0.6, 0.4, 0.2, 0.8, 0.0, 1.0, 1.0, 0.0}, torch::kDouble).view({2, 2, 2});
    const auto r = attention_rollout(a);
    flow_expect_close(r[0], torch::tensor({0.8, 0.2, 0.1, 0.9}, torch::kDouble).view({2, 2}));
    // Row i of A_hat_2 A_hat_1: 0.5 * 0.8 + 0.5 * 0.1 = 0.45, 0.5 * 0.2 + 0.5 * 0.9 = 0.55.
    flow_expect_close(r[1], torch::tensor({0.45, 0.55, 0.45, 0.55}, torch::kDouble).view({2, 2}));
}

// ---- flow ---------------------------------------------------------------------------------------

TEST(AttentionFlow, OneLayerFlowIsTheAttentionRow) {
    const auto a = flow_random_attention(1, 5, 3);
    const auto a_hat = residual_attention(a);
    for (int64_t q = 0; q < 5; ++q) flow_expect_close(attention_flow_row(a, q), a_hat[0][q], 1e-12);
}

TEST(AttentionFlow, DisjointPathsAddTheirBottlenecks) {
    // Two tokens, two layers, no residual: input 0 reaches [CLS] of layer 2 through (1, 0) with
    // bottleneck min(a, c) and through (1, 1) with min(b, 1 - c).
    const double a = 0.7, b = 0.25, c = 0.4;
    const auto att =
        torch::tensor({a, 1 - a, b, 1 - b, c, 1 - c, 0.5, 0.5}, torch::kDouble).view({2, 2, 2});
    const auto flow = attention_flow_row(att, 0, /*residual=*/false);
    EXPECT_NEAR(flow[0].item<double>(), std::min(a, c) + std::min(b, 1 - c), 1e-12);
    EXPECT_NEAR(flow[1].item<double>(), std::min(1 - a, c) + std::min(1 - b, 1 - c), 1e-12);
}

TEST(AttentionFlow, EqualsTheMinimumCutOfRandomGraphs) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
        const int64_t L = seed % 2 ? 2 : 3, T = seed % 2 ? 3 : 2;
        const auto a = flow_random_attention(L, T, seed);
        const auto a_hat = residual_attention(a);
        for (int64_t q = 0; q < T; ++q) {
            const auto flow = attention_flow_row(a, q);
            for (int64_t j = 0; j < T; ++j)
                EXPECT_NEAR(flow[j].item<double>(), flow_min_cut_by_enumeration(a_hat, j, q), 1e-12)
                    << "seed " << seed << ", query " << q << ", input " << j;
        }
    }
}

TEST(AttentionFlow, NeverExceedsTheQuerysRowSum) {
    const auto flow = attention_flow_row(flow_random_attention(3, 6, 9), 0);
    EXPECT_LE(flow.max().item<double>(), 1.0 + 1e-12);
    EXPECT_GT(flow.min().item<double>(), 0.0);
}

// ---- value-weighted norms -----------------------------------------------------------------------

TEST(ValueWeightedNorms, MatchAHandComputation) {
    // f_0(x_0) = (3, 4), f_0(x_1) = (1, 0), f_1(x_0) = (0, 1), f_1(x_1) = (0, 2);
    // head 0 rows [.5 .5] [1 0], head 1 rows [.25 .75] [0 1].
    const auto f =
        torch::tensor({3., 4., 1., 0., 0., 1., 0., 2.}, torch::kDouble).view({1, 2, 2, 2});
    const auto p =
        torch::tensor({.5, .5, 1., 0., .25, .75, 0., 1.}, torch::kDouble).view({1, 2, 2, 2});
    const ValueNorms n = value_weighted_norms(p, f);
    flow_expect_close(n.value_norm[0],
                      torch::tensor({5., 1., 1., 2.}, torch::kDouble).view({2, 2}));
    flow_expect_close(n.head[0][0], torch::tensor({2.5, .5, 5., 0.}, torch::kDouble).view({2, 2}));
    flow_expect_close(n.head[0][1], torch::tensor({.25, 1.5, 0., 2.}, torch::kDouble).view({2, 2}));
    // [0,0]: .5 (3,4) + .25 (0,1) = (1.5, 2.25); [0,1]: .5 (1,0) + .75 (0,2) = (.5, 1.5);
    // [1,0]: (3,4); [1,1]: (0,2).
    flow_expect_close(
        n.layer[0],
        torch::tensor({std::sqrt(1.5 * 1.5 + 2.25 * 2.25), std::sqrt(2.5), 5., 2.}, torch::kDouble)
            .view({2, 2}));
}

TEST(ValueWeightedNorms, TransformedValuesRebuildTheAttentionOutput) {
    // sum_h sum_j alpha^h_ij f_h(x_j) + b^O is the output projection of the attention context.
    for (const bool pre_ln : {false, true}) {
        auto model = flow_model("tupe-a", pre_ln);
        torch::NoGradGuard no_grad;
        const auto ids = torch::tensor({2, 5, 6, 7, 8, 3}, torch::kLong).view({1, 6});
        const EncoderTrace trace = trace_encoder(model->bert, ids);
        for (size_t l = 0; l < 2; ++l) {
            auto* layer = model->bert->encoder->layer[l]->as<engine::BertLayerImpl>();
            const auto f = transformed_values(*layer, trace.attention_inputs[l]);  // (1, H, T, C)
            const auto p = trace.encoded.attention_probs[l].to(torch::kDouble);    // (1, H, T, T)
            const auto mine = torch::einsum("bhij,bhjc->bic", {p, f}) +
                              layer->attention->output->dense->bias.to(torch::kDouble);
            // The context the layer computes, through its own Linear modules.
            auto& self = *layer->attention->self;
            const auto v = self.value(trace.attention_inputs[l]).view({1, 6, 2, 8}).transpose(1, 2);
            const auto ctx = torch::matmul(trace.encoded.attention_probs[l], v)
                                 .transpose(1, 2)
                                 .reshape({1, 6, 16});
            flow_expect_close(mine, layer->attention->output->dense(ctx), 1e-5);
        }
    }
}

// ---- the traced pass and the logit lens ---------------------------------------------------------

TEST(EncoderTrace, MatchesTheModelsForwardPass) {
    for (const auto& [preset, pre_ln] : std::vector<std::pair<std::string, bool>>{
             {"bert-a", false}, {"tupe-r", false}, {"bert-a", true}}) {
        auto model = flow_model(preset, pre_ln);
        torch::NoGradGuard no_grad;
        const auto ids =
            torch::tensor({2, 5, 6, 7, 3, 0, 2, 11, 12, 8, 9, 3}, torch::kLong).view({2, 6});
        const auto mask =
            torch::tensor({1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1}, torch::kLong).view({2, 6});
        const EncoderTrace trace = trace_encoder(model->bert, ids, mask);
        const engine::EncoderOutput ref = model->bert->forward(ids, mask, {}, true);
        ASSERT_EQ(trace.hidden_states.size(), 3u);
        ASSERT_EQ(trace.attention_inputs.size(), 2u);
        flow_expect_close(trace.encoded.last_hidden_state, ref.last_hidden_state, 1e-6);
        for (size_t l = 0; l < 2; ++l) {
            flow_expect_close(trace.encoded.attention_probs[l], ref.attention_probs[l], 1e-6);
            flow_expect_close(trace.encoded.attention_logits[l], ref.attention_logits[l], 1e-5);
        }
        if (!pre_ln) flow_expect_close(trace.hidden_states[2], ref.last_hidden_state, 1e-6);
    }
}

TEST(LogitLens, LastRowIsTheModelsOwnMaskedLoss) {
    for (const bool pre_ln : {false, true}) {
        auto model = flow_model("tupe-a", pre_ln);
        const auto tok = flow_tokenizer();
        const auto& vocab = tok.vocab();
        std::vector<int64_t> stream;
        for (int k = 0; k < 40; ++k) stream.push_back(5 + (k * 7) % 10);
        LogitLensOptions o;
        o.length = 12;
        o.windows = 4;
        o.batch_size = 3;  // batches of 3 and 1
        o.mask_prob = 0.3;
        const LogitLensReport r = logit_lens(model, stream, vocab, o);
        ASSERT_EQ(r.rows.size(), 3u);
        EXPECT_EQ(r.rows.front().layer, -1);
        EXPECT_EQ(r.windows, 4);
        EXPECT_EQ(r.final_norm, pre_ln);
        // The same windows through BertForMaskedLM::forward, built here from the masking rule.
        std::vector<int64_t> ids, labels;
        for (int64_t w = 0; w < 4; ++w) {
            ids.push_back(vocab.cls_id());
            labels.push_back(-100);
            for (int64_t t = 0; t < 10; ++t) {
                const int64_t src = w * 10 + t, id = stream[static_cast<size_t>(src)];
                const bool m = stream_masked(o.seed, static_cast<uint64_t>(src), o.mask_prob);
                ids.push_back(m ? vocab.mask_id() : id);
                labels.push_back(m ? id : -100);
            }
            ids.push_back(vocab.sep_id());
            labels.push_back(-100);
        }
        torch::NoGradGuard no_grad;
        const engine::MlmOutput out = model->forward(torch::tensor(ids).view({4, 12}), {},
                                                     torch::tensor(labels).view({4, 12}), true);
        EXPECT_EQ(r.masked, out.num_masked);
        EXPECT_NEAR(r.rows.back().loss, out.loss.item<double>(), 1e-5);
        EXPECT_NEAR(r.rows.back().accuracy,
                    static_cast<double>(out.num_correct) / static_cast<double>(out.num_masked),
                    1e-12);
        // The floors by hand: token 5 + (k * 7) % 10 makes each of the ten ids 4 times of 40.
        EXPECT_NEAR(r.unigram_loss, std::log(10.0), 1e-12);
        int64_t fives = 0;  // the majority among equals is the smallest id, 5
        for (size_t k = 0; k < labels.size(); ++k) fives += labels[k] == 5;
        EXPECT_NEAR(r.majority_accuracy,
                    static_cast<double>(fives) / static_cast<double>(out.num_masked), 1e-12);
    }
}

// ---- position vectors ---------------------------------------------------------------------------

TEST(PositionVectors, ACircleHasItsAnglesAsCosinesAndTwoAxes) {
    // Twelve points on a circle of radius 2 in a random plane of R^6.
    const int64_t P = 12;
    torch::manual_seed(4);
    const auto basis = std::get<0>(torch::linalg_qr(torch::randn({6, 2}, torch::kDouble)));
    const auto theta = torch::arange(P, torch::kDouble) * (2 * M_PI / P);
    const auto plane = torch::stack({theta.cos(), theta.sin()}, 1) * 2.0;  // (P, 2)
    const PositionVectors v = describe_position_vectors(torch::mm(plane, basis.t()), "circle");
    flow_expect_close(v.cosine, (theta.unsqueeze(1) - theta.unsqueeze(0)).cos(), 1e-6);
    EXPECT_NEAR(v.explained[0] + v.explained[1], 1.0, 1e-9);
    EXPECT_NEAR(v.explained[0], 0.5, 1e-9);  // a circle spreads evenly over both axes
    flow_expect_close(v.pca.to(torch::kDouble).norm(2, 1), torch::full({P}, 2.0, torch::kDouble),
                      1e-5);
    EXPECT_GE(v.pca[P - 1][0].item<double>(), v.pca[0][0].item<double>());
}

TEST(PositionVectors, ReadEachSchemesOwnTable) {
    auto bert = flow_model("bert-a");
    const auto a = position_vectors(bert->bert);
    ASSERT_TRUE(a.has_value());
    flow_expect_close(a->vectors, bert->bert->embeddings->position_embeddings->weight, 1e-7);

    auto tupe = flow_model("tupe-a");
    const auto t = position_vectors(tupe->bert);
    ASSERT_TRUE(t.has_value());
    torch::NoGradGuard no_grad;
    auto& pos = tupe->bert->position;
    flow_expect_close(t->vectors, pos->pos_ln(pos->pos->weight.slice(0, 1, 13)), 1e-6);
    EXPECT_EQ(t->vectors.size(0), 12);  // token positions only; the [CLS] row is left out

    auto t5 = flow_model("t5");
    EXPECT_FALSE(position_vectors(t5->bert).has_value());
}

// ---- inside analyze_model -----------------------------------------------------------------------

TEST(AnalyzeFlow, OneSentenceMapsAreTheClosedForms) {
    auto model = flow_model("tupe-a");
    AnalyzeOptions options;
    options.properties = false;
    options.logit_lens = false;
    const AnalysisOutput out =
        analyze_model(model, flow_tokenizer(), {"the cat sat on a mat"}, options);
    ASSERT_TRUE(out.flow.has_value());
    EXPECT_EQ(out.forward_passes, 1);  // the traced pass is the one pass
    torch::NoGradGuard no_grad;
    const auto ref = model->bert->forward(out.input_ids, out.attention_mask, {}, true);
    const auto a =
        torch::stack({ref.attention_probs[0][0].mean(0), ref.attention_probs[1][0].mean(0)});
    flow_expect_close(out.flow->rollout, attention_rollout(a), 1e-5);
    for (int64_t l = 0; l < 2; ++l) {
        const auto flow = attention_flow_row(a.slice(0, 0, l + 1), 0);
        flow_expect_close(out.flow->flow_cls[l], flow / flow.sum(), 1e-5);
    }
    EXPECT_EQ(out.flow->flow_sentences, 1);
    // The sources of each [CLS] row add up to 1.
    for (const ClsSources& s : out.flow->sources)
        EXPECT_NEAR(s.cls + s.words + s.sep, 1.0, 1e-6) << s.measure << " layer " << s.layer;
}

TEST(AnalyzeFlow, BatchingAndTheFlowBudgetKeepTheMaps) {
    auto model = flow_model("bert-a");
    const std::vector<std::string> sentences = {"the cat sat on a mat", "a dog",
                                                "the dogs ran on a mat"};
    AnalyzeOptions one, two;
    one.properties = two.properties = false;
    one.logit_lens = two.logit_lens = false;
    two.batch_size = 2;
    two.flow_sentences = 2;
    const AnalysisOutput a = analyze_model(model, flow_tokenizer(), sentences, one);
    const AnalysisOutput b = analyze_model(model, flow_tokenizer(), sentences, two);
    ASSERT_TRUE(a.flow && b.flow);
    flow_expect_close(a.flow->rollout, b.flow->rollout, 1e-6);
    flow_expect_close(a.flow->norm_head, b.flow->norm_head, 1e-6);
    flow_expect_close(a.flow->cls_norm_share, b.flow->cls_norm_share, 1e-6);
    EXPECT_EQ(a.flow->flow_sentences, 3);
    EXPECT_EQ(b.flow->flow_sentences, 2);
    // Position 8 exists only in the third sentence, which the budget of two leaves out.
    EXPECT_GT(a.flow->flow_cls[1][8].item<double>(), 0.0);
    EXPECT_EQ(b.flow->flow_cls[1][8].item<double>(), 0.0);
}
