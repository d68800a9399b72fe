// TUPE's untied positional term with the [CLS] reset, the T5 relative bias with TUPE-R's
// [CLS] buckets, and BERT-Ad's decoupled projections (guolinke/TUPE,
// transformer_sentence_encoder.py: get_abs_pos_bias, get_rel_pos_bias).
#include "engine/tupe.h"

#include <cmath>

namespace engine {

int64_t t5_relative_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance) {
    // T5 bucketing, as relative_position_bucket in guolinke/TUPE (bidirectional=True).
    int64_t ret = 0;
    int64_t n = -relative_position;
    num_buckets /= 2;
    if (n < 0) ret += num_buckets;  // key to the right of the query
    n = std::abs(n);
    const int64_t max_exact = num_buckets / 2;
    if (n < max_exact) return ret + n;
    // Same float arithmetic as the reference: log(n / max_exact) / log(max_distance / max_exact).
    const float ratio = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) /
                        static_cast<float>(std::log(static_cast<double>(max_distance) /
                                                    static_cast<double>(max_exact)));
    int64_t large =
        max_exact + static_cast<int64_t>(ratio * static_cast<float>(num_buckets - max_exact));
    if (large > num_buckets - 1) large = num_buckets - 1;
    return ret + large;
}

torch::Tensor relative_bucket_matrix(int64_t seq_len, int64_t num_buckets, int64_t max_distance,
                                     bool cls_buckets) {
    auto buckets = torch::empty({seq_len, seq_len}, torch::kLong);
    auto acc = buckets.accessor<int64_t, 2>();
    for (int64_t i = 0; i < seq_len; ++i)
        for (int64_t j = 0; j < seq_len; ++j)
            acc[i][j] = t5_relative_bucket(j - i, num_buckets, max_distance);
    if (cls_buckets && seq_len > 0) {
        // Reference order: others -> [CLS] first, then [CLS] -> others (so [0,0] = nb / 2).
        buckets.select(1, 0).fill_(num_buckets);
        buckets.select(0, 0).fill_(num_buckets / 2);
    }
    return buckets;
}

namespace {

torch::Tensor entry(const std::vector<torch::Tensor>& v, size_t layer) {
    if (v.empty()) return {};
    return v.size() == 1 ? v[0] : v.at(layer);
}

}  // namespace

torch::Tensor PositionTerms::bias_for(size_t layer) const { return entry(bias, layer); }
torch::Tensor PositionTerms::q_offset_for(size_t layer) const { return entry(q_offset, layer); }
torch::Tensor PositionTerms::k_offset_for(size_t layer) const { return entry(k_offset, layer); }

PositionProjectionImpl::PositionProjectionImpl(int64_t hidden_size) {
    pos_q_linear = register_module("pos_q_linear", torch::nn::Linear(hidden_size, hidden_size));
    pos_k_linear = register_module("pos_k_linear", torch::nn::Linear(hidden_size, hidden_size));
}

UntiedPositionBiasImpl::UntiedPositionBiasImpl(const ModelConfig& config) : config_(config) {
    const int64_t C = config.hidden_size, H = config.num_attention_heads;
    const auto mode = config.absolute_position;
    if (mode == AbsolutePosition::kUntied || mode == AbsolutePosition::kDecoupled) {
        // TUPE keeps one extra row: row 0 is "[CLS] to others", row 1 "others to [CLS]", and
        // token t >= 1 uses row t + 1. BERT-Ad uses rows 0..T-1 like BERT-A.
        const int64_t rows =
            config.max_position_embeddings + (mode == AbsolutePosition::kUntied ? 1 : 0);
        pos = register_module("pos", torch::nn::Embedding(rows, C));
        pos_ln = register_module(
            "pos_ln",
            torch::nn::LayerNorm(torch::nn::LayerNormOptions({C}).eps(config.layer_norm_eps)));
        projections = register_module("projections", torch::nn::ModuleList());
        const int64_t groups = config.shared_pos_term ? 1 : config.num_hidden_layers;
        for (int64_t g = 0; g < groups; ++g) projections->push_back(PositionProjection(C));
    }
    if (config.rel_pos) {
        relative_attention_bias = register_module("relative_attention_bias",
                                                  torch::nn::Embedding(config.rel_pos_bins + 1, H));
        buckets_ = relative_bucket_matrix(config.max_position_embeddings, config.rel_pos_bins,
                                          config.max_rel_pos, config.untie_cls);
    }
    if (config.untie_cls && mode != AbsolutePosition::kUntied) {
        // BERT-A + [CLS] reset (not in the paper): learned theta1 (row 0) and theta2 (column 0)
        // per head, added to the logits; every other entry of this bias is 0.
        cls_theta = register_parameter("cls_theta", torch::zeros({2, H}));
    }
}

bool UntiedPositionBiasImpl::has_terms() const {
    return !pos.is_empty() || !relative_attention_bias.is_empty() || cls_theta.defined();
}

PositionProjection UntiedPositionBiasImpl::projection(int64_t group) {
    return PositionProjection(projections->ptr<PositionProjectionImpl>(static_cast<size_t>(group)));
}

torch::Tensor UntiedPositionBiasImpl::untied_correlation(int64_t seq_len, int64_t group) {
    TORCH_CHECK(config_.absolute_position == AbsolutePosition::kUntied,
                "untied_correlation needs absolute_position = untied, got ",
                to_string(config_.absolute_position));
    TORCH_CHECK(seq_len <= config_.max_position_embeddings, "sequence of ", seq_len,
                " tokens exceeds max_position_embeddings = ", config_.max_position_embeddings);
    const int64_t H = config_.num_attention_heads, d = config_.head_dim();
    auto proj = projection(group);
    // p' = LayerNorm(p) over rows 0..T: (T+1, C)
    auto weight = pos_ln(pos->weight.slice(0, 0, seq_len + 1));
    const double scaling = 1.0 / std::sqrt(static_cast<double>(d) * config_.attention_scale_factor);
    // (T+1, C) -> (T+1, H, d) -> (H, T+1, d)
    auto pos_q = proj->pos_q_linear(weight).view({seq_len + 1, H, d}).transpose(0, 1) * scaling;
    auto pos_k = proj->pos_k_linear(weight).view({seq_len + 1, H, d}).transpose(0, 1);
    return torch::bmm(pos_q, pos_k.transpose(1, 2));  // (H, T+1, T+1)
}

torch::Tensor UntiedPositionBiasImpl::relative_bias(int64_t seq_len) {
    if (relative_attention_bias.is_empty()) return {};
    TORCH_CHECK(seq_len <= config_.max_position_embeddings, "sequence of ", seq_len,
                " tokens exceeds max_position_embeddings = ", config_.max_position_embeddings);
    auto weight = relative_attention_bias->weight;
    if (buckets_.device() != weight.device()) buckets_ = buckets_.to(weight.device());
    auto b = buckets_.slice(0, 0, seq_len).slice(1, 0, seq_len);
    // (T, T) -> (T, T, H) -> (H, T, T). Not scaled, as the reference.
    return torch::nn::functional::embedding(b, weight).permute({2, 0, 1});
}

PositionTerms UntiedPositionBiasImpl::forward(int64_t seq_len) {
    ++forward_count_;
    TORCH_CHECK(seq_len <= config_.max_position_embeddings, "sequence of ", seq_len,
                " tokens exceeds max_position_embeddings = ", config_.max_position_embeddings);
    const int64_t H = config_.num_attention_heads, T = seq_len;
    PositionTerms terms;
    auto rel = relative_bias(T);
    const int64_t groups = projections.is_empty() ? 0 : static_cast<int64_t>(projections->size());

    if (config_.absolute_position == AbsolutePosition::kUntied) {
        for (int64_t g = 0; g < groups; ++g) {
            auto a = untied_correlation(T, g);      // (H, T+1, T+1)
            auto bias = a.slice(1, 1).slice(2, 1);  // rows/cols 1..T: (H, T, T)
            if (config_.untie_cls) {
                // [CLS] reset: column 0 <- theta2 = A[h,1,1], then row 0 <- theta1 = A[h,0,0].
                auto theta1 = a.select(1, 0).select(1, 0);  // (H)
                auto theta2 = a.select(1, 1).select(1, 1);  // (H)
                auto col = theta2.view({H, 1, 1}).expand({H, T, 1});
                bias = torch::cat({col, bias.slice(2, 1)}, 2);
                auto row = theta1.view({H, 1, 1}).expand({H, 1, T});
                bias = torch::cat({row, bias.slice(1, 1)}, 1);
            }
            // TUPE-R: the reference ADDS the relative bias on top of the reset values.
            terms.bias.push_back(rel.defined() ? bias + rel : bias);
        }
    } else if (config_.absolute_position == AbsolutePosition::kDecoupled) {
        auto weight = pos_ln(pos->weight.slice(0, 0, T));  // (T, C)
        for (int64_t g = 0; g < groups; ++g) {
            auto proj = projection(g);
            terms.q_offset.push_back(proj->pos_q_linear(weight));
            terms.k_offset.push_back(proj->pos_k_linear(weight));
        }
        if (rel.defined()) terms.bias.push_back(rel);
    } else if (rel.defined()) {
        terms.bias.push_back(rel);
    }

    if (cls_theta.defined()) {
        // Zero bias with row 0 = theta1 and column 0 = theta2 (row wins at [0,0]).
        auto zeros = torch::zeros({H, T - 1, T - 1}, cls_theta.options());
        auto col = cls_theta[1].view({H, 1, 1}).expand({H, T - 1, 1});
        auto body = torch::cat({col, zeros}, 2);  // (H, T-1, T)
        auto row = cls_theta[0].view({H, 1, 1}).expand({H, 1, T});
        auto cls = torch::cat({row, body}, 1);  // (H, T, T)
        if (terms.bias.empty())
            terms.bias.push_back(cls);
        else
            for (auto& b : terms.bias) b = b + cls;
    }
    return terms;
}

}  // namespace engine
