// The positional zoo (see position.h): TUPE's untied term with the [CLS] reset and BERT-Ad's
// decoupled projections (Ke, He, Liu, ICLR 2021; guolinke/TUPE,
// transformer_sentence_encoder.py: get_abs_pos_bias, get_rel_pos_bias), the T5 relative bias,
// sinusoidal tables, RoPE (and its scaling at evaluation), ALiBi, Shaw's relative keys, DeBERTa's
// disentangled terms, FIRE, KERPLE and randomized positions.
#include "engine/position.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include "engine/batched_matmul.h"

namespace engine {

// ---- formulas ---------------------------------------------------------------------------------

int64_t t5_relative_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance) {
    // T5 bucketing (Raffel et al. 2020), as relative_position_bucket in guolinke/TUPE
    // (bidirectional=True).
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

std::vector<double> alibi_slopes(int64_t num_heads) {
    // Press, Smith, Lewis, ICLR 2022, sec. 3: for n heads a geometric sequence starting at
    // 2^(-8/n) with that ratio; non-powers of two as in their reference code (get_slopes).
    auto power_of_2 = [](int64_t n) {
        std::vector<double> s;
        const double start = std::pow(2.0, -8.0 / static_cast<double>(n));
        for (int64_t h = 0; h < n; ++h) s.push_back(std::pow(start, static_cast<double>(h + 1)));
        return s;
    };
    TORCH_CHECK(num_heads >= 1, "alibi_slopes: num_heads must be >= 1");
    int64_t closest = 1;
    while (closest * 2 <= num_heads) closest *= 2;
    auto slopes = power_of_2(closest);
    if (closest != num_heads) {
        const auto extra = power_of_2(2 * closest);
        for (int64_t i = 0; i < num_heads - closest; ++i)
            slopes.push_back(extra[static_cast<size_t>(2 * i)]);
    }
    return slopes;
}

torch::Tensor sinusoidal_table(const torch::Tensor& positions, int64_t hidden_size) {
    // Vaswani et al. 2017, sec. 3.5, computed in float64 and rounded once.
    auto pos = positions.to(torch::kCPU, torch::kDouble).view({-1, 1});  // (T, 1)
    auto i = torch::arange(0, hidden_size, 2, torch::kDouble);           // 2i
    auto inv = torch::pow(10000.0, -i / static_cast<double>(hidden_size)).view({1, -1});
    auto angle = pos * inv;  // (T, ceil(C/2))
    auto table = torch::empty({pos.size(0), hidden_size}, torch::kDouble);
    table.slice(1, 0, hidden_size, 2).copy_(torch::sin(angle));
    const int64_t odd = hidden_size / 2;
    if (odd > 0) table.slice(1, 1, hidden_size, 2).copy_(torch::cos(angle.slice(1, 0, odd)));
    return table.to(positions.device());
}

std::string rope_scaling_name(RopeScaling::Method method) {
    switch (method) {
        case RopeScaling::Method::kNone: return "none";
        case RopeScaling::Method::kInterpolation: return "pi";
        case RopeScaling::Method::kNtk: return "ntk";
        case RopeScaling::Method::kYarn: return "yarn";
    }
    return "none";
}

RopeScaling::Method parse_rope_scaling(const std::string& name) {
    for (auto m : {RopeScaling::Method::kNone, RopeScaling::Method::kInterpolation,
                   RopeScaling::Method::kNtk, RopeScaling::Method::kYarn})
        if (rope_scaling_name(m) == name) return m;
    throw std::invalid_argument("unknown RoPE scaling '" + name + "' (none, pi, ntk or yarn)");
}

torch::Tensor rope_frequencies(int64_t rope_dims, double base, const RopeScaling& scaling) {
    using Method = RopeScaling::Method;
    const double s = scaling.factor, r = static_cast<double>(rope_dims);
    if (scaling.method != Method::kNone && !(s >= 1 && std::isfinite(s)))
        throw std::invalid_argument("RoPE scaling factor must be a finite number >= 1, got " +
                                    std::to_string(s));
    // theta_i = base^(-2i / r), i = 0..r/2-1 (RoFormer Eq. 15 with r rotated dimensions).
    auto i2 = torch::arange(0, rope_dims, 2, torch::kDouble);
    switch (scaling.method) {
        case Method::kNone: return torch::pow(base, -i2 / r);
        case Method::kInterpolation:
            // Chen et al. 2023: position m rotated as m / s, i.e. every frequency divided by s.
            return torch::pow(base, -i2 / r) / s;
        case Method::kNtk:
            // NTK-aware (bloc97 2023; YaRN sec. 3.1): a larger base, so that the lowest
            // frequency (i = r/2 - 1) is divided by exactly s and the highest kept.
            if (rope_dims < 4)
                throw std::invalid_argument(
                    "NTK-aware RoPE scaling needs at least 4 rotated dimensions (its exponent is "
                    "r / (r - 2)), got " +
                    std::to_string(rope_dims));
            return torch::pow(base * std::pow(s, r / (r - 2)), -i2 / r);
        case Method::kYarn: {
            // YaRN (Peng et al., ICLR 2024), sec. 3.2 "NTK-by-parts": pairs that turn fewer than
            // alpha = 1 times over the training length L are interpolated, more than beta = 32
            // times kept, a linear ramp in between.
            if (scaling.original_length < 1)
                throw std::invalid_argument("YaRN needs the training length (original_length)");
            auto theta = torch::pow(base, -i2 / r);
            const double two_pi = 2.0 * std::acos(-1.0);
            auto rotations = static_cast<double>(scaling.original_length) * theta / two_pi;
            auto gamma = ((rotations - 1.0) / (32.0 - 1.0)).clamp(0.0, 1.0);
            return (1 - gamma) * theta / s + gamma * theta;
        }
    }
    return torch::pow(base, -i2 / r);
}

double rope_logit_scale(const RopeScaling& scaling) {
    // YaRN sec. 3.4: q and k both times sqrt(1/t) = 0.1 ln s + 1, so the logits times its square.
    if (scaling.method != RopeScaling::Method::kYarn || scaling.factor <= 1) return 1.0;
    const double m = 0.1 * std::log(scaling.factor) + 1.0;
    return m * m;
}

torch::Tensor fire_input(const torch::Tensor& positions, const torch::Tensor& c,
                         const torch::Tensor& threshold) {
    // FIRE (Li et al., ICLR 2024), progressive interpolation with a threshold, and their listing:
    // psi(d) = log(|c d| + 1), normalised by psi(max(L, i)) + 1e-6 for query position i and keys j
    // <= i. Two-sided here: the normaliser is the later of the two positions, max(L, p_i, p_j), and
    // the sign of p_i - p_j tells left from right, so one MLP sees [-1, 1] at any length.
    const int64_t T = positions.size(0);
    auto p = positions.to(c.device(), c.scalar_type());
    auto psi = [&](const torch::Tensor& d) { return torch::log(torch::abs(c * d) + 1.0); };
    auto diff = p.view({T, 1}) - p.view({1, T});                  // [i][j] = p_i - p_j
    auto later = torch::maximum(p.view({T, 1}), p.view({1, T}));  // max(p_i, p_j)
    auto normaliser = psi(torch::maximum(later, threshold)) + 1e-6;
    return torch::sign(diff) * psi(diff.abs()) / normaliser;
}

double fire_init_threshold(const ModelConfig& config) {
    return std::max(1.0, static_cast<double>(config.max_position_embeddings) / 4.0);
}

// ---- the layer's view --------------------------------------------------------------------------

namespace {

// RoFormer (Su et al.), Eq. 14-16: each pair (x_{2i}, x_{2i+1}) of the first r dimensions
// rotated by angle m * theta_i; the rest passes unchanged. x (B, H, T, d); cos/sin (T, r/2).
torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                     int64_t r) {
    const int64_t d = x.size(-1);
    auto head = x.slice(-1, 0, r);
    auto x1 = head.slice(-1, 0, r, 2), x2 = head.slice(-1, 1, r, 2);  // (B, H, T, r/2)
    auto c = cos.to(x.scalar_type()), s = sin.to(x.scalar_type());
    auto out1 = x1 * c - x2 * s, out2 = x2 * c + x1 * s;
    auto rotated = torch::stack({out1, out2}, -1).flatten(-2);  // back to interleaved (.., r)
    return r == d ? rotated : torch::cat({rotated, x.slice(-1, r, d)}, -1);
}

torch::Tensor matmul_t(const torch::Tensor& a, const torch::Tensor& b) {
    return batched_matmul(a, b.transpose(-2, -1));
}

}  // namespace

void LayerPosition::offset_qk(torch::Tensor& q, torch::Tensor& k) const {
    if (!q_offset.defined()) return;
    // BERT-Ad: (xW^Q + p'U^Q)(xW^K + p'U^K)^T = the four terms of TUPE's Eq. (6).
    q = q + q_offset.unsqueeze(0);  // (T, C) broadcast over B
    k = k + k_offset.unsqueeze(0);
}

namespace {

// The content-dependent terms, (B, H, T, T) each, from the scaled query and the key.
void content_terms(const LayerPosition& p, const torch::Tensor& qs, const torch::Tensor& k,
                   std::vector<std::pair<std::string, torch::Tensor>>& out) {
    if (p.rel_keys.defined()) {
        // Shaw et al. 2018 / HF modeling_bert relative_key: q_i . r_ij, and for
        // relative_key_query also k_j . r_ij, both inside the 1/sqrt(d) scaling.
        auto r = p.rel_keys.to(qs.scalar_type());
        out.emplace_back("c2p", torch::einsum("bhld,lrd->bhlr", {qs, r}));
        if (p.rel_key_query)
            out.emplace_back("p2c", torch::einsum("bhrd,lrd->bhlr", {k * p.scaling, r}));
    }
    if (p.c2p_keys.defined()) {
        // He et al., DeBERTa, Eq. 4: c2p = Q_c K_r[delta(i,j)]^T, p2c = K_c Q_r[delta(j,i)]^T.
        const int64_t B = qs.size(0), H = qs.size(1), T = qs.size(2);
        auto idx = p.rel_index.view({1, 1, T, T}).expand({B, H, T, T});
        auto c2p_all = torch::matmul(qs, p.c2p_keys.to(qs.scalar_type()).transpose(-2, -1));
        out.emplace_back("c2p", c2p_all.gather(-1, idx));  // [i][j] = q_i . K_r[delta(i,j)]
        auto p2c_all =
            torch::matmul(k * p.scaling, p.p2c_queries.to(k.scalar_type()).transpose(-2, -1));
        // gather gives [j][i] = k_j . Q_r[delta(j,i)]; transposed to [i][j].
        out.emplace_back("p2c", p2c_all.gather(-1, idx).transpose(-2, -1));
    }
}

}  // namespace

torch::Tensor LayerPosition::scores(const torch::Tensor& q, const torch::Tensor& k) const {
    auto qs = q * scaling;
    torch::Tensor s;
    if (rope_dims > 0) {
        auto qr = rotate(qs, rope_cos, rope_sin, rope_dims);
        auto kr = rotate(k, rope_cos, rope_sin, rope_dims);
        s = matmul_t(qr, kr);  // depends on positions only through j - i
        if (rope_untie_cls) {
            // [CLS] reset on RoPE: [CLS]'s row and column from the unrotated q and k, so its
            // logits carry no position (the bias slot adds theta1 and theta2).
            auto row = matmul_t(qs.slice(2, 0, 1), k);              // (B, H, 1, T)
            auto col = matmul_t(qs.slice(2, 1), k.slice(2, 0, 1));  // (B, H, T-1, 1)
            s = torch::cat({row, torch::cat({col, s.slice(2, 1).slice(3, 1)}, 3)}, 2);
        }
    } else {
        s = matmul_t(qs, k);
    }
    std::vector<std::pair<std::string, torch::Tensor>> extra;
    content_terms(*this, qs, k, extra);
    for (auto& [name, t] : extra) s = s + t;
    return s;
}

std::vector<std::pair<std::string, torch::Tensor>> LayerPosition::terms(
    const torch::Tensor& q, const torch::Tensor& k) const {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    auto qs = q * scaling;
    auto content = matmul_t(qs, k);
    out.emplace_back("content", content);
    if (rope_dims > 0) {
        LayerPosition rope_only;
        rope_only.scaling = scaling;
        rope_only.rope_cos = rope_cos, rope_only.rope_sin = rope_sin;
        rope_only.rope_dims = rope_dims, rope_only.rope_untie_cls = rope_untie_cls;
        out.emplace_back("rotation", rope_only.scores(q, k) - content);
    }
    content_terms(*this, qs, k, out);
    if (bias.defined()) out.emplace_back("bias", bias.unsqueeze(0).expand_as(content));
    return out;
}

// ---- the module ------------------------------------------------------------------------------

FireBiasImpl::FireBiasImpl(int64_t num_heads, double init_threshold_)
    : init_threshold(init_threshold_) {
    // Li et al. 2024, their listing: mlp_width 32, init_c 0.1, L_multiplier 1 (init_L is fixed).
    constexpr int64_t kFireMlpWidth = 32;
    mlp = register_module(
        "mlp", torch::nn::Sequential(torch::nn::Linear(1, kFireMlpWidth), torch::nn::ReLU(),
                                     torch::nn::Linear(kFireMlpWidth, num_heads)));
    c = register_parameter("c", torch::full({}, 0.1));
    L_multiplier = register_parameter("L_multiplier", torch::ones({}));
}

torch::Tensor FireBiasImpl::threshold() const { return L_multiplier.abs() * init_threshold; }

torch::Tensor FireBiasImpl::forward(const torch::Tensor& positions, bool cls_free) {
    auto x = fire_input(positions, c, threshold());  // (T, T)
    if (cls_free) {
        // [CLS] reset: its row and column carry no distance (f(0) for every pair).
        const int64_t T = x.size(0);
        auto keep = torch::ones({T, T}, x.options());
        keep.select(0, 0).zero_();
        keep.select(1, 0).zero_();
        x = x * keep;
    }
    // (T, T) -> (T, T, 1) -> MLP -> (T, T, H) -> (H, T, T)
    return mlp->forward(x.unsqueeze(-1)).permute({2, 0, 1});
}

PositionProjectionImpl::PositionProjectionImpl(int64_t hidden_size, bool bias) {
    const auto options = torch::nn::LinearOptions(hidden_size, hidden_size).bias(bias);
    pos_q_linear = register_module("pos_q_linear", torch::nn::Linear(options));
    pos_k_linear = register_module("pos_k_linear", torch::nn::Linear(options));
}

namespace {

int64_t relative_clip(const ModelConfig& c) {
    return c.max_relative_distance > 0 ? c.max_relative_distance : c.max_position_embeddings - 1;
}

// KERPLE's floor on r1 and r2 (their code's eps), and the power kernel's ceiling on r2.
constexpr double kKerpleEps = 1e-2;
constexpr double kKerpleMaxPower = 2.0;

}  // namespace

int64_t PositionEncodingImpl::layer_groups() const {
    return config_.shared_pos_term ? 1 : config_.num_hidden_layers;
}

PositionEncodingImpl::PositionEncodingImpl(const ModelConfig& config)
    : config_(config),
      description_(describe_position(config)),
      position_offset_(config.position_offset) {
    const int64_t C = config.hidden_size, H = config.num_attention_heads, d = config.head_dim();
    const auto& abs = description_.absolute;
    const auto& rel = description_.relative;
    if (abs == "untied" || abs == "decoupled") {
        // TUPE keeps one extra row: row 0 is "[CLS] to others", row 1 "others to [CLS]", and
        // token t >= 1 uses row t + 1. BERT-Ad uses rows 0..T-1 like BERT-A.
        const int64_t rows = config.max_position_embeddings + (abs == "untied" ? 1 : 0);
        pos = register_module("pos", torch::nn::Embedding(rows, C));
        pos_ln = register_module("pos_ln", Norm(C, config));
    }
    if (abs == "untied" || abs == "decoupled" || rel == "deberta") {
        projections = register_module("projections", torch::nn::ModuleList());
        for (int64_t g = 0; g < layer_groups(); ++g)
            projections->push_back(PositionProjection(C, config.bias));
    }
    if (rel == "t5")
        relative_attention_bias = register_module("relative_attention_bias",
                                                  torch::nn::Embedding(config.rel_pos_bins + 1, H));
    if (rel == "shaw" || rel == "shaw_key_query") {
        // HF: distance_embedding = Embedding(2 * max_position_embeddings - 1, d) per layer;
        // here 2k + 1 rows for distances clipped to [-k, k] (k = max_position_embeddings - 1
        // by default, which is HF's table exactly).
        distance_embedding = register_module("distance_embedding", torch::nn::ModuleList());
        for (int64_t g = 0; g < layer_groups(); ++g)
            distance_embedding->push_back(torch::nn::Embedding(2 * relative_clip(config) + 1, d));
    }
    if (rel == "deberta")
        // One table P of 2k relative positions for all layers, projected per layer.
        rel_embeddings =
            register_module("rel_embeddings", torch::nn::Embedding(2 * relative_clip(config), C));
    if (rel == "fire") {
        fire = register_module("fire", torch::nn::ModuleList());
        for (int64_t g = 0; g < layer_groups(); ++g)
            fire->push_back(FireBias(H, fire_init_threshold(config)));
    }
    if (rel == "kerple_log" || rel == "kerple_power") {
        // Chi et al., KERPLE, NeurIPS 2022, and their GPT-NeoX code: per head r1, r2 drawn as
        // bias_p ~ U(0, 2) and bias_a ~ U(0, 1) there, kept >= 1e-2. Log kernel
        // -bias_p ln(1 + bias_a d): r1 = bias_p, r2 = bias_a; power kernel -bias_a d^bias_p:
        // r1 = bias_a, r2 = bias_p (the exponent, <= 2).
        const bool log_kernel = rel == "kerple_log";
        const int64_t G = layer_groups();
        auto r1 = torch::rand({G, H}) * (log_kernel ? 2.0 : 1.0);
        auto r2 = torch::rand({G, H}) * (log_kernel ? 1.0 : 2.0);
        kerple_r1 = register_parameter("kerple_r1", r1.clamp_min(kKerpleEps));
        kerple_r2 = register_parameter("kerple_r2", r2.clamp_min(kKerpleEps));
    }
    if (config.untie_cls && abs != "untied") {
        // [CLS] reset on a scheme without TUPE's own theta: learned theta1 (row 0) and theta2
        // (column 0) per head in the bias slot.
        cls_theta = register_parameter("cls_theta", torch::zeros({2, H}));
    }
}

bool PositionEncodingImpl::has_parameters() { return !parameters(/*recurse=*/true).empty(); }

PositionProjection PositionEncodingImpl::projection(int64_t group) {
    return PositionProjection(projections->ptr<PositionProjectionImpl>(static_cast<size_t>(group)));
}

torch::Tensor PositionEncodingImpl::positions(int64_t seq_len, const torch::Device& device,
                                              bool randomize) const {
    if (constant_positions_)
        return torch::full({seq_len}, position_offset_,
                           torch::TensorOptions().dtype(torch::kLong).device(device));
    const int64_t range = config_.randomized_positions_max;
    if (randomize && range > 0 && !description_.order_blind) {
        // Randomized positional encodings (Ruoss et al., ACL 2023): a sorted random
        // subset of {0..M-1} of size T, so that positions up to M are trained on short inputs.
        TORCH_CHECK(seq_len <= range, "randomized positions: a sequence of ", seq_len,
                    " tokens needs model.randomized_positions_max >= ", seq_len, ", got ", range);
        auto subset =
            torch::randperm(range, torch::TensorOptions().dtype(torch::kLong)).slice(0, 0, seq_len);
        return (std::get<0>(subset.sort()) + position_offset_).to(device);
    }
    return torch::arange(position_offset_, position_offset_ + seq_len,
                         torch::TensorOptions().dtype(torch::kLong).device(device));
}

void PositionEncodingImpl::set_position_offset(int64_t offset) {
    // The same rule as describe_position's for model.position_offset: learned tables have no
    // row below 0.
    if (offset < 0)
        throw std::invalid_argument("position offset must be >= 0, got " + std::to_string(offset));
    position_offset_ = offset;
}

torch::Tensor PositionEncodingImpl::untied_rows(const torch::Tensor& rows, int64_t group) {
    const int64_t H = config_.num_attention_heads, d = config_.head_dim(), n = rows.size(0);
    auto proj = projection(group);
    auto weight = pos_ln(pos->weight.index_select(0, rows));  // p' = LayerNorm(p): (n, C)
    // (n, C) -> (n, H, d) -> (H, n, d); the query side carries 1/sqrt(d * factor).
    auto pos_q = proj->pos_q_linear(weight).view({n, H, d}).transpose(0, 1) *
                 (1.0 / std::sqrt(static_cast<double>(d) * config_.attention_scale_factor));
    auto pos_k = proj->pos_k_linear(weight).view({n, H, d}).transpose(0, 1);
    return torch::bmm(pos_q, pos_k.transpose(1, 2));  // (H, n, n)
}

UntiedCorrelation PositionEncodingImpl::untied_correlation(const torch::Tensor& positions,
                                                           int64_t group) {
    TORCH_CHECK(description_.untied, "untied_correlation needs absolute_position = untied, got ",
                description_.absolute);
    TORCH_CHECK(positions.dim() == 1 && positions.size(0) >= 1, "positions must be (T), got ",
                positions.sizes());
    const int64_t last = positions.max().item<int64_t>();
    TORCH_CHECK(last < config_.max_position_embeddings, "last position ", last,
                " does not fit max_position_embeddings = ", config_.max_position_embeddings);
    // Rows 0 and 1 are the reset's own (guolinke/TUPE: theta1 from row 0, theta2 from row 1),
    // whatever the positions; token t uses row p_t + 1. With p_0 = 0, row 1 is also token 0's
    // row and the (T+1)-row product of the reference gives the same numbers; with any other
    // first position (model.position_offset, a shifted window, randomized positions) row 1
    // must be asked for on its own, or theta2 would move with the positions.
    auto p = positions.to(torch::kLong).to(pos->weight.device());
    const bool from_zero = positions[0].item<int64_t>() == 0;
    auto head = torch::arange(from_zero ? 1 : 2, p.options());
    auto a = untied_rows(torch::cat({head, p + 1}), group);  // (H, n, n), n = T+1 or T+2
    const int64_t skip = from_zero ? 1 : 2;
    UntiedCorrelation out;
    out.theta1 = a.select(1, 0).select(1, 0);    // (H): A[h, 0, 0]
    out.theta2 = a.select(1, 1).select(1, 1);    // (H): A[h, 1, 1]
    out.body = a.slice(1, skip).slice(2, skip);  // (H, T, T)
    return out;
}

UntiedCorrelation PositionEncodingImpl::untied_correlation(int64_t seq_len, int64_t group) {
    return untied_correlation(positions(seq_len, pos->weight.device()), group);
}

torch::Tensor PositionEncodingImpl::t5_bias(const torch::Tensor& positions) {
    // Buckets of p_j - p_i through a lookup table over the distances that occur (the scalar
    // function keeps the reference's float arithmetic), [CLS] buckets for the reset.
    const int64_t T = positions.size(0);
    auto p = positions.to(torch::kCPU);
    const int64_t lo = p.min().item<int64_t>(), hi = p.max().item<int64_t>();
    const int64_t span = hi - lo;
    auto lut = torch::empty({2 * span + 1}, torch::kLong);
    auto l = lut.accessor<int64_t, 1>();
    for (int64_t r = -span; r <= span; ++r)
        l[r + span] = t5_relative_bucket(r, config_.rel_pos_bins, config_.max_rel_pos);
    auto relpos = p.view({1, T}) - p.view({T, 1});  // [i][j] = p_j - p_i
    auto buckets = lut.index_select(0, (relpos + span).reshape({-1})).view({T, T});
    if (config_.untie_cls) {
        buckets.select(1, 0).fill_(config_.rel_pos_bins);
        buckets.select(0, 0).fill_(config_.rel_pos_bins / 2);
    }
    auto weight = relative_attention_bias->weight;
    // (T, T) -> (T, T, H) -> (H, T, T). Not scaled, as the reference.
    return torch::nn::functional::embedding(buckets.to(weight.device()), weight).permute({2, 0, 1});
}

torch::Tensor PositionEncodingImpl::kerple_bias(const torch::Tensor& positions, int64_t group) {
    // KERPLE (Chi et al., NeurIPS 2022), symmetric: d = |p_i - p_j|,
    //   log:   -r1 ln(1 + r2 d)     power: -r1 d^r2, 0 < r2 <= 2.
    // In training compute() has projected r1 and r2 onto their range (project_kerple); the
    // clamp here keeps the function defined for any weights at evaluation.
    const bool power = description_.relative == "kerple_power";
    const int64_t T = positions.size(0), H = config_.num_attention_heads;
    auto r1 = kerple_r1[group].clamp_min(kKerpleEps).view({H, 1, 1});
    auto r2 = power ? kerple_r2[group].clamp(kKerpleEps, kKerpleMaxPower).view({H, 1, 1})
                    : kerple_r2[group].clamp_min(kKerpleEps).view({H, 1, 1});
    auto p = positions.to(kerple_r1.device(), kerple_r1.scalar_type());
    auto dist = (p.view({1, T}) - p.view({T, 1})).abs();  // (T, T)
    if (config_.untie_cls) {
        dist.select(0, 0).zero_();  // [CLS]'s row and column carry no distance, as ALiBi's
        dist.select(1, 0).zero_();
    }
    if (!power) return -r1 * torch::log1p(r2 * dist.unsqueeze(0));
    // d^r2 as exp(r2 ln d) where d > 0 (d is a whole number, so d >= 1 there), 0 at d = 0:
    // no 0 * ln 0 in the gradient of r2.
    auto d = dist.unsqueeze(0);
    auto pow = torch::exp(r2 * torch::log(d.clamp_min(1.0)));
    return -r1 * torch::where(d > 0, pow, torch::zeros_like(pow));
}

void PositionEncodingImpl::project_kerple() {
    // KERPLE's code clamps the parameters' data in place before each use in training, a
    // projected gradient step: a parameter pushed below the floor is put back on it and keeps
    // its gradient (a clamp in the formula alone would leave it there with none). Once per
    // forward pass, before any group uses them (an in-place change after a use would break
    // that use's backward).
    torch::NoGradGuard no_grad;
    kerple_r1.clamp_min_(kKerpleEps);
    if (description_.relative == "kerple_power")
        kerple_r2.clamp_(kKerpleEps, kKerpleMaxPower);
    else
        kerple_r2.clamp_min_(kKerpleEps);
}

void PositionEncodingImpl::set_rope_scaling(const RopeScaling& scaling) {
    if (scaling.method == RopeScaling::Method::kNone) {
        rope_scaling_ = RopeScaling{};
        return;
    }
    if (!description_.rotary)
        throw std::invalid_argument("RoPE scaling (" + rope_scaling_name(scaling.method) +
                                    ") on a model without RoPE: " + description_.summary);
    // Validates the factor, YaRN's length and NTK's dimensions now rather than mid-forward.
    const int64_t d = config_.head_dim();
    const int64_t rope_dims =
        static_cast<int64_t>(static_cast<double>(d) * config_.rope_fraction) / 2 * 2;
    rope_frequencies(rope_dims, config_.rope_base, scaling);
    rope_scaling_ = scaling;
}

torch::Tensor PositionEncodingImpl::relative_bias(int64_t seq_len) {
    if (relative_attention_bias.is_empty()) return {};
    return t5_bias(positions(seq_len, relative_attention_bias->weight.device()));
}

torch::Tensor PositionEncodingImpl::cls_reset_bias(const torch::Tensor& bias, int64_t T) {
    // Row 0 = theta1 and column 0 = theta2 (row wins at [0,0]) added to a bias whose [CLS]
    // row and column carry no position (T5's [CLS] buckets, ALiBi's zeroed row/column, or no
    // bias at all).
    const int64_t H = config_.num_attention_heads;
    auto zeros = torch::zeros({H, T - 1, T - 1}, cls_theta.options());
    auto col = cls_theta[1].view({H, 1, 1}).expand({H, T - 1, 1});
    auto body = torch::cat({col, zeros}, 2);  // (H, T-1, T)
    auto row = cls_theta[0].view({H, 1, 1}).expand({H, 1, T});
    auto cls = torch::cat({row, body}, 1);  // (H, T, T)
    return bias.defined() ? bias + cls : cls;
}

PositionTerms PositionEncodingImpl::forward(int64_t seq_len) {
    torch::Device device(torch::kCPU);
    for (const auto& p : parameters()) {
        device = p.device();
        break;
    }
    torch::ScalarType dtype = torch::kFloat;
    for (const auto& p : parameters()) {
        dtype = p.scalar_type();
        break;
    }
    if (!word_table_.is_empty()) {
        device = word_table_->weight.device();
        dtype = word_table_->weight.scalar_type();
    }
    return forward(positions(seq_len, device), dtype);
}

PositionTerms PositionEncodingImpl::forward(const torch::Tensor& positions,
                                            torch::ScalarType dtype) {
    ++forward_count_;
    PositionTerms terms = compute(positions, dtype);
    if (ablation_.mode == PositionAblation::Mode::kOff) return terms;
    return ablate(std::move(terms), positions, dtype);
}

std::string ablation_mode_name(PositionAblation::Mode mode) {
    switch (mode) {
        case PositionAblation::Mode::kOff: return "off";
        case PositionAblation::Mode::kZero: return "zero";
        case PositionAblation::Mode::kMean: return "mean";
        case PositionAblation::Mode::kShuffle: return "shuffle";
        case PositionAblation::Mode::kPatch: return "patch";
    }
    return "off";
}

PositionAblation::Mode parse_ablation_mode(const std::string& name) {
    for (auto m : {PositionAblation::Mode::kZero, PositionAblation::Mode::kMean,
                   PositionAblation::Mode::kShuffle, PositionAblation::Mode::kPatch,
                   PositionAblation::Mode::kOff})
        if (ablation_mode_name(m) == name) return m;
    throw std::invalid_argument("unknown ablation mode '" + name + "' (zero, mean or shuffle)");
}

void PositionEncodingImpl::set_ablation(const PositionAblation& ablation) {
    if (ablation.layer < -1 || ablation.layer >= config_.num_hidden_layers)
        throw std::invalid_argument("ablation: layer " + std::to_string(ablation.layer) +
                                    " outside 0.." + std::to_string(config_.num_hidden_layers - 1) +
                                    " (or -1)");
    if (ablation.head < -1 || ablation.head >= config_.num_attention_heads)
        throw std::invalid_argument("ablation: head " + std::to_string(ablation.head) +
                                    " outside 0.." +
                                    std::to_string(config_.num_attention_heads - 1) + " (or -1)");
    if (ablation.mode == PositionAblation::Mode::kPatch && !patch_source_)
        throw std::invalid_argument("ablation: mode patch needs a patch source (set_patch_source)");
    ablation_ = ablation;
}

void PositionEncodingImpl::set_patch_source(std::shared_ptr<PositionEncodingImpl> donor) {
    if (!donor) {
        patch_source_ = nullptr;
        return;
    }
    auto differ = [](const std::string& what, const std::string& ours, const std::string& theirs) {
        throw std::invalid_argument("patch source: " + what + " " + theirs + ", not " + ours);
    };
    const ModelConfig& o = donor->config_;
    if (donor->description_.summary != description_.summary)
        differ("positions", description_.summary, donor->description_.summary);
    auto same = [&](const char* what, int64_t ours, int64_t theirs) {
        if (ours != theirs) differ(what, std::to_string(ours), std::to_string(theirs));
    };
    same("num_hidden_layers", config_.num_hidden_layers, o.num_hidden_layers);
    same("num_attention_heads", config_.num_attention_heads, o.num_attention_heads);
    same("hidden_size", config_.hidden_size, o.hidden_size);
    same("max_position_embeddings", config_.max_position_embeddings, o.max_position_embeddings);
    auto shape = [](const torch::Tensor& t) {
        std::ostringstream os;
        os << t.sizes();
        return os.str();
    };
    const auto ours = named_parameters(), theirs = donor->named_parameters();
    if (ours.size() != theirs.size())
        differ("positional parameters", std::to_string(ours.size()), std::to_string(theirs.size()));
    for (const auto& p : ours) {
        const torch::Tensor* q = theirs.find(p.key());
        if (!q) differ("has no parameter", p.key(), "");
        if (!q->sizes().equals(p.value().sizes()))
            differ(p.key() + " of shape", shape(p.value()), shape(*q));
    }
    if (input_table_.is_empty() != donor->input_table_.is_empty())
        differ("an input table", input_table_.is_empty() ? "none" : "one",
               donor->input_table_.is_empty() ? "none" : "one");
    if (!input_table_.is_empty() &&
        !input_table_->weight.sizes().equals(donor->input_table_->weight.sizes()))
        differ("input table of shape", shape(input_table_->weight),
               shape(donor->input_table_->weight));
    patch_source_ = std::move(donor);
}

PositionTerms PositionEncodingImpl::ablate(PositionTerms terms, const torch::Tensor& positions,
                                           torch::ScalarType dtype) {
    using Mode = PositionAblation::Mode;
    const int64_t T = positions.size(0), L = config_.num_hidden_layers;
    const int64_t H = config_.num_attention_heads;
    // The alternative terms, one per layer.
    PositionTerms alt;
    if (ablation_.mode == Mode::kShuffle) {
        // [CLS]'s position stays; positions 1..T-1 are permuted (the same permutation for
        // every window of this length).
        std::vector<int64_t> order(static_cast<size_t>(T));
        std::iota(order.begin(), order.end(), 0);
        std::mt19937_64 rng(ablation_.seed);
        if (T > 2) std::shuffle(order.begin() + 1, order.end(), rng);
        auto index = torch::tensor(order, torch::kLong).to(positions.device());
        alt = compute(positions.index_select(0, index), dtype);
    } else if (ablation_.mode == Mode::kPatch) {
        TORCH_CHECK(patch_source_, "ablation mode patch without a patch source (set_patch_source)");
        alt = patch_source_->compute(positions, dtype);
    } else {
        for (size_t i = 0; i < terms.layers.size(); ++i) {
            const LayerPosition& lp = terms.layers[i];
            LayerPosition empty;
            empty.scaling = lp.scaling;
            if (ablation_.mode == Mode::kMean && lp.q_offset.defined()) {
                empty.q_offset = lp.q_offset.mean(0, true).expand_as(lp.q_offset);
                empty.k_offset = lp.k_offset.mean(0, true).expand_as(lp.k_offset);
            }
            alt.layers.push_back(std::move(empty));
        }
        if (terms.input.defined() && ablation_.mode == Mode::kMean)
            alt.input = terms.input.mean(0, true).expand_as(terms.input);
    }
    // The input slot has no heads or layers: only the whole-model ablation touches it.
    if (ablation_.layer < 0 && ablation_.head < 0) terms.input = alt.input;
    auto heads = torch::zeros({H}, torch::kBool);
    if (ablation_.head < 0)
        heads.fill_(true);
    else
        heads[ablation_.head] = true;
    PositionTerms out;
    out.input = terms.input;
    for (int64_t i = 0; i < L; ++i) {
        LayerPosition lp = terms.for_layer(static_cast<size_t>(i));
        if (ablation_.layer < 0 || ablation_.layer == i) {
            lp.ablated =
                std::make_shared<const LayerPosition>(alt.for_layer(static_cast<size_t>(i)));
            lp.ablated_heads = heads.to(positions.device());
        }
        out.layers.push_back(std::move(lp));
    }
    return out;
}

PositionTerms PositionEncodingImpl::compute(const torch::Tensor& positions,
                                            torch::ScalarType dtype) {
    TORCH_CHECK(positions.dim() == 1 && positions.size(0) >= 1, "positions must be (T), got ",
                positions.sizes());
    const int64_t T = positions.size(0), H = config_.num_attention_heads, d = config_.head_dim();
    const int64_t C = config_.hidden_size;
    const auto& abs = description_.absolute;
    const auto& rel = description_.relative;
    const int64_t last = positions.max().item<int64_t>();
    if (!description_.extrapolates)
        TORCH_CHECK(last < config_.max_position_embeddings, "sequence of ", T,
                    " tokens (last position ", last,
                    ") does not fit max_position_embeddings = ", config_.max_position_embeddings,
                    ": absolute_position = ", abs, " is a learned table and cannot extrapolate");
    PositionTerms out;

    // Input slot.
    if (abs == "input") {
        TORCH_CHECK(!input_table_.is_empty(), "PositionEncoding: no input table attached");
        out.input =
            input_table_->weight.index_select(0, positions.to(input_table_->weight.device()));
    } else if (abs == "sinusoidal") {
        out.input = sinusoidal_table(positions, C).to(dtype);
    }
    if (out.input.defined() && config_.scale_input_positions)
        out.input = out.input * (1.0 / std::sqrt(static_cast<double>(C)));

    // What all layers share: T5 and ALiBi biases, RoPE's angles, DeBERTa's index.
    torch::Tensor shared_bias;
    if (rel == "t5") shared_bias = t5_bias(positions);
    if (rel == "alibi") {
        // Symmetric (bidirectional) ALiBi: -m_h |p_i - p_j|, not scaled.
        auto p = positions.to(dtype);
        auto dist = (p.view({1, T}) - p.view({T, 1})).abs();  // (T, T)
        if (config_.untie_cls) {
            dist.select(0, 0).zero_();  // [CLS]'s row and column carry no distance
            dist.select(1, 0).zero_();
        }
        const auto slopes = alibi_slopes(H);
        auto m = torch::tensor(slopes, torch::kDouble).to(positions.device(), dtype);
        shared_bias = -m.view({H, 1, 1}) * dist.unsqueeze(0);
    }
    torch::Tensor rope_cos, rope_sin, rope_cos_local, rope_sin_local;
    int64_t rope_dims = 0;
    if (rel == "rope") {
        rope_dims = static_cast<int64_t>(static_cast<double>(d) * config_.rope_fraction) / 2 * 2;
        auto angles = [&](double base, torch::Tensor& cos, torch::Tensor& sin) {
            // theta_i = base^(-2i / r), or scaled for evaluation beyond L (RopeScaling).
            auto theta = rope_frequencies(rope_dims, base, rope_scaling_);
            auto angle =
                positions.to(torch::kCPU, torch::kDouble).view({-1, 1}) * theta.view({1, -1});
            cos = torch::cos(angle).to(positions.device(), dtype);
            sin = torch::sin(angle).to(positions.device(), dtype);
        };
        angles(config_.rope_base, rope_cos, rope_sin);
        // ModernBERT (Warner et al. 2024, sec. 2.1.2): local layers keep theta 10k, global
        // layers take 160k.
        if (config_.rope_base_local > 0)
            angles(config_.rope_base_local, rope_cos_local, rope_sin_local);
    }
    const int64_t k_clip = relative_clip(config_);
    torch::Tensor shaw_index, deberta_index;
    if (rel == "shaw" || rel == "shaw_key_query") {
        // HF: distance = p_i - p_j, row distance + (max_position_embeddings - 1); clipped here.
        auto p = positions.view({-1});
        shaw_index = (p.view({T, 1}) - p.view({1, T})).clamp(-k_clip, k_clip) + k_clip;
    }
    if (rel == "deberta") {
        // DeBERTa Eq. 3: delta(i, j) = clamp(i - j + k, 0, 2k - 1).
        auto p = positions.view({-1});
        deberta_index = (p.view({T, 1}) - p.view({1, T}) + k_clip).clamp(0, 2 * k_clip - 1);
    }

    double scaling = 1.0 / std::sqrt(static_cast<double>(d) * config_.attention_scale_factor);
    if (rope_dims > 0) scaling *= rope_logit_scale(rope_scaling_);  // YaRN's temperature
    const bool kerple = rel == "kerple_log" || rel == "kerple_power";
    if (kerple && is_training()) project_kerple();
    const bool per_group = abs == "untied" || abs == "decoupled" || rel == "deberta" ||
                           rel == "shaw" || rel == "shaw_key_query" || rel == "fire" || kerple;
    const int64_t groups = per_group ? layer_groups() : 1;
    torch::Tensor decoupled_p, deberta_p;
    if (abs == "decoupled") decoupled_p = pos_ln(pos->weight.index_select(0, positions));
    if (rel == "deberta") deberta_p = rel_embeddings->weight;  // (2k, C)
    for (int64_t g = 0; g < groups; ++g) {
        LayerPosition lp;
        lp.scaling = scaling;
        torch::Tensor bias;
        if (abs == "untied") {
            auto a = untied_correlation(positions, g);
            bias = a.body;  // (H, T, T)
            if (config_.untie_cls) {
                // [CLS] reset: column 0 <- theta2, then row 0 <- theta1 (row wins at [0,0]).
                auto col = a.theta2.view({H, 1, 1}).expand({H, T, 1});
                bias = torch::cat({col, bias.slice(2, 1)}, 2);
                auto row = a.theta1.view({H, 1, 1}).expand({H, 1, T});
                bias = torch::cat({row, bias.slice(1, 1)}, 1);
            }
        }
        // TUPE-R: the reference ADDS the relative bias on top of the reset values.
        if (shared_bias.defined()) bias = bias.defined() ? bias + shared_bias : shared_bias;
        torch::Tensor group_bias;  // FIRE and KERPLE: a learned function of the positions
        if (rel == "fire")
            group_bias = fire->ptr<FireBiasImpl>(static_cast<size_t>(g))
                             ->forward(positions, config_.untie_cls);
        if (kerple) group_bias = kerple_bias(positions, g);
        if (group_bias.defined()) bias = bias.defined() ? bias + group_bias : group_bias;
        if (cls_theta.defined()) bias = cls_reset_bias(bias, T);
        lp.bias = bias;
        if (abs == "decoupled") {
            auto proj = projection(g);
            lp.q_offset = proj->pos_q_linear(decoupled_p);
            lp.k_offset = proj->pos_k_linear(decoupled_p);
        }
        if (rope_dims > 0) {
            lp.rope_cos = rope_cos, lp.rope_sin = rope_sin, lp.rope_dims = rope_dims;
            lp.rope_untie_cls = config_.untie_cls;
        }
        if (shaw_index.defined()) {
            auto table = distance_embedding->ptr<torch::nn::EmbeddingImpl>(static_cast<size_t>(g));
            lp.rel_keys = table->forward(shaw_index);  // (T, T, d)
            lp.rel_key_query = rel == "shaw_key_query";
        }
        if (deberta_index.defined()) {
            // Q_r = P W_{q,r}, K_r = P W_{k,r}: (2k, C) -> (2k, H, d) -> (H, 2k, d).
            auto proj = projection(g);
            const int64_t n = deberta_p.size(0);
            lp.p2c_queries = proj->pos_q_linear(deberta_p).view({n, H, d}).transpose(0, 1);
            lp.c2p_keys = proj->pos_k_linear(deberta_p).view({n, H, d}).transpose(0, 1);
            lp.rel_index = deberta_index;
        }
        out.layers.push_back(std::move(lp));
    }
    if (config_.local_window > 0) {
        // Alternating local and global attention (ModernBERT, Warner et al. 2024, sec. 2.1.2,
        // after Gemma 2): every global_every-th layer global, the others attend within
        // |i - j| <= local_window (token distance, whatever the positions), through an
        // additive -inf mask. One entry per layer from here on.
        const int64_t L = config_.num_hidden_layers;
        auto t = torch::arange(T, torch::TensorOptions().dtype(torch::kLong));
        auto far = (t.view({T, 1}) - t.view({1, T})).abs() > config_.local_window;  // (T, T)
        auto window = torch::zeros({T, T}, torch::TensorOptions().dtype(dtype))
                          .masked_fill(far, -std::numeric_limits<double>::infinity())
                          .to(positions.device());
        PositionTerms layered;
        layered.input = out.input;
        for (int64_t i = 0; i < L; ++i) {
            LayerPosition lp = out.for_layer(static_cast<size_t>(i));
            if (config_.local_layer(i)) {
                lp.window = window;
                if (rope_cos_local.defined())
                    lp.rope_cos = rope_cos_local, lp.rope_sin = rope_sin_local;
            }
            layered.layers.push_back(std::move(lp));
        }
        return layered;
    }
    return out;
}

}  // namespace engine
