// The positional module (see position.h): the layer's view of the slots (offsets, RoPE's
// rotation, the content terms), the loop over the scheme modules (engine/src/schemes/, one
// file per scheme, where each formula is cited), local windows, randomized positions and the
// analysis hooks (offsets, constant positions, ablations, patching, RoPE scaling).
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
#include "schemes/scheme_module.h"

namespace engine {

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

// The content slot's terms, (B, H, T, T) each, from the scaled query and the key (`content`:
// qs.k^T where the caller has it).
void content_terms(const LayerPosition& p, const torch::Tensor& qs, const torch::Tensor& k,
                   const torch::Tensor& content,
                   std::vector<std::pair<std::string, torch::Tensor>>& out) {
    for (const auto& term : p.content) term->add_terms(qs, k, content, p.scaling, out);
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
    content_terms(*this, qs, k, rope_dims > 0 ? torch::Tensor() : s, extra);
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
    content_terms(*this, qs, k, content, out);
    if (bias.defined()) out.emplace_back("bias", bias.unsqueeze(0).expand_as(content));
    return out;
}

// ---- the module ------------------------------------------------------------------------------

PositionProjectionImpl::PositionProjectionImpl(int64_t hidden_size, bool bias) {
    const auto options = torch::nn::LinearOptions(hidden_size, hidden_size).bias(bias);
    pos_q_linear = register_module("pos_q_linear", torch::nn::Linear(options));
    pos_k_linear = register_module("pos_k_linear", torch::nn::Linear(options));
}

int64_t PositionEncodingImpl::layer_groups() const {
    return config_.shared_pos_term ? 1 : config_.num_hidden_layers;
}

PositionEncodingImpl::PositionEncodingImpl(const ModelConfig& config)
    : config_(config),
      description_(describe_position(config)),
      position_offset_(config.position_offset) {
    // One module per row, in the rows' order (absolute, relative, [CLS] reset): each registers
    // its parameters here, so their names and order are the checkpoints'.
    for (Scheme id : active_schemes(config)) {
        modules_.push_back(schemes::make_scheme_module(id, *this));
        if (scheme_row(id).per_layer_group) groups_ = layer_groups();
    }
}

PositionEncodingImpl::~PositionEncodingImpl() = default;

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

void PositionEncodingImpl::set_rope_scaling(const RopeScaling& scaling) {
    if (scaling.method == RopeScaling::Method::kNone) {
        rope_scaling_ = RopeScaling{};
        return;
    }
    if (!description_.rotary)
        throw std::invalid_argument("RoPE scaling (" + rope_scaling_name(scaling.method) +
                                    ") on a model without RoPE: " + description_.summary);
    // Validates the factor, YaRN's length and NTK's dimensions now rather than mid-forward.
    rope_frequencies(rope_dims(config_), config_.rope_base, scaling);
    rope_scaling_ = scaling;
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
    const int64_t T = positions.size(0);
    const int64_t last = positions.max().item<int64_t>();
    if (!description_.extrapolates)
        TORCH_CHECK(last < config_.max_position_embeddings, "sequence of ", T,
                    " tokens (last position ", last,
                    ") does not fit max_position_embeddings = ", config_.max_position_embeddings,
                    ": absolute_position = ", description_.absolute,
                    " is a learned table and cannot extrapolate");
    PositionTerms out;
    LayerPosition unscaled;
    unscaled.scaling =
        1.0 / std::sqrt(static_cast<double>(config_.head_dim()) * config_.attention_scale_factor);
    out.layers.assign(static_cast<size_t>(groups_), unscaled);  // one per layer group
    const schemes::SchemeInputs in{positions, dtype, is_training()};
    for (auto& module : modules_) module->contribute(in, out);
    if (out.input.defined() && config_.scale_input_positions)
        out.input = out.input * (1.0 / std::sqrt(static_cast<double>(config_.hidden_size)));
    if (config_.local_window > 0) return local_layers(std::move(out), T, dtype, positions.device());
    return out;
}

PositionTerms PositionEncodingImpl::local_layers(PositionTerms terms, int64_t T,
                                                 torch::ScalarType dtype,
                                                 const torch::Device& device) const {
    // Alternating local and global attention (ModernBERT, Warner et al. 2024, sec. 2.1.2,
    // after Gemma 2): every global_every-th layer global, the others attend within
    // |i - j| <= local_window (token distance, whatever the positions), through an
    // additive -inf mask. One entry per layer from here on.
    const int64_t L = config_.num_hidden_layers;
    auto t = torch::arange(T, torch::TensorOptions().dtype(torch::kLong));
    auto far = (t.view({T, 1}) - t.view({1, T})).abs() > config_.local_window;  // (T, T)
    auto window = torch::zeros({T, T}, torch::TensorOptions().dtype(dtype))
                      .masked_fill(far, -std::numeric_limits<double>::infinity())
                      .to(device);
    PositionTerms layered;
    layered.input = terms.input;
    for (int64_t i = 0; i < L; ++i) {
        LayerPosition lp = terms.for_layer(static_cast<size_t>(i));
        if (config_.local_layer(i)) {
            lp.window = window;
            for (const auto& module : modules_) module->localize(lp);  // RoPE's local base
        }
        layered.layers.push_back(std::move(lp));
    }
    return layered;
}

}  // namespace engine
