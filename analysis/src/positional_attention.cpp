// The input-independent and [CLS] views of attention: TUPE's positional correlation per head
// before and after the [CLS] reset, with the relative bias of TUPE-R, its row softmax and
// theta1/theta2 (Ke, He, Liu, ICLR 2021, Sec. 3.2 and Fig. 6); and attention from and to [CLS]
// per layer and head over a batch (entropy, mean distance, first-k mass), ignoring padding.
// Shapes: B batch, L layers, H heads, T tokens (0 = [CLS]).
#include <torch/torch.h>

#include <algorithm>

#include "analysis/attention_analysis.h"
#include "engine/eval_mode.h"
#include "tensor_util.h"

namespace analysis {

using detail::cpu_dbl;
using detail::require;
using detail::shape_string;
using detail::to_cpu_float;

// ---- TUPE's positional correlation --------------------------------------------------------------

PositionalCorrelation tupe_positional_correlation(engine::BertModel& model, int64_t T) {
    const auto& config = model->config();
    require(model->position->description().untied,
            "tupe_positional_correlation needs a TUPE model (absolute_position = untied), got " +
                model->position->description().summary);
    require(T >= 1 && T <= config.max_position_embeddings,
            "tupe_positional_correlation: T = " + std::to_string(T) + " outside 1.." +
                std::to_string(config.max_position_embeddings));
    engine::EvalModeGuard eval_mode(*model);
    torch::NoGradGuard no_grad;
    auto& positional = model->position;
    const int64_t H = config.num_attention_heads;

    PositionalCorrelation out;
    out.cls_reset = config.untie_cls;
    auto rel = positional->relative_bias(T);  // (H, T, T) or undefined
    if (rel.defined()) out.relative = to_cpu_float(rel);
    auto terms = positional->forward(T);  // what the layers receive
    const auto groups = static_cast<int64_t>(positional->projections->size());
    for (int64_t g = 0; g < groups; ++g) {
        PositionalCorrelationGroup group;
        // At the model's positions (model.position_offset), as forward(T) above.
        auto a = positional->untied_correlation(T, g);
        group.theta1 = to_cpu_float(a.theta1);  // table row 0: (H)
        group.theta2 = to_cpu_float(a.theta2);  // table row 1: (H)
        group.raw = to_cpu_float(a.body);       // rows p_t + 1: (H, T, T)
        group.reset = group.raw.clone();
        if (config.untie_cls) {
            // Column 0 (others -> [CLS]) <- theta2, then row 0 ([CLS] -> all) <- theta1.
            group.reset.select(2, 0).copy_(group.theta2.view({H, 1}).expand({H, T}));
            group.reset.select(1, 0).copy_(group.theta1.view({H, 1}).expand({H, T}));
        }
        group.total = to_cpu_float(terms.for_layer(static_cast<size_t>(g)).bias);
        group.probs = torch::softmax(group.total.to(torch::kDouble), -1).to(torch::kFloat);
        out.groups.push_back(std::move(group));
    }
    return out;
}

// ---- [CLS] attention ----------------------------------------------------------------------------

ClsAttention cls_attention(const std::vector<torch::Tensor>& probs,
                           const torch::Tensor& attention_mask, int64_t k) {
    require(!probs.empty(), "cls_attention: no layers given");
    require(k >= 0, "cls_attention: k must be >= 0, got " + std::to_string(k));
    auto first = probs[0];
    require(first.defined() && (first.dim() == 3 || first.dim() == 4),
            "cls_attention: probs must be (B, H, T, T) or (H, T, T) per layer");
    const int64_t B = first.dim() == 4 ? first.size(0) : 1;
    const int64_t H = first.size(-3), T = first.size(-1);
    auto m =
        attention_mask.defined() ? cpu_dbl(attention_mask) : torch::ones({B, T}, torch::kDouble);
    require(m.dim() == 2 && m.size(0) == B && m.size(1) == T,
            "cls_attention: attention_mask must be (B, T) = (" + std::to_string(B) + ", " +
                std::to_string(T) + "), got " + shape_string(m.sizes()));
    auto cls_valid = m.select(1, 0);      // (B): examples with a [CLS]
    auto w = m * cls_valid.unsqueeze(1);  // (B, T): counted tokens
    auto count = w.sum(0);                // (T)
    const double examples = std::max(cls_valid.sum().item<double>(), 1.0);
    auto positions = torch::arange(T, torch::kDouble);  // (T)

    std::vector<torch::Tensor> from, to, entropy, distance, mass;
    for (size_t l = 0; l < probs.size(); ++l) {
        auto p = cpu_dbl(probs[l]);
        if (p.dim() == 3) p = p.unsqueeze(0);  // (H, T, T) -> (1, H, T, T)
        require(
            p.dim() == 4 && p.size(0) == B && p.size(1) == H && p.size(2) == T && p.size(3) == T,
            "cls_attention: layer " + std::to_string(l) + " has shape " +
                shape_string(probs[l].sizes()) + ", expected (" + std::to_string(B) + ", " +
                std::to_string(H) + ", " + std::to_string(T) + ", " + std::to_string(T) + ")");
        auto wk = w.unsqueeze(1);                                  // (B, 1, T)
        auto row = p.select(2, 0) * m.unsqueeze(1);                // (B, H, T): [CLS] -> j
        auto col = p.select(3, 0);                                 // (B, H, T): i -> [CLS]
        from.push_back((row * wk).sum(0) / count.clamp_min(1.0));  // (H, T)
        to.push_back((col * wk).sum(0) / count.clamp_min(1.0));
        auto ex = cls_valid.view({B, 1});          // (B, 1)
        auto h = -torch::xlogy(row, row).sum(-1);  // (B, H), 0 ln 0 = 0
        entropy.push_back((h * ex).sum(0) / examples);
        distance.push_back(((row * positions).sum(-1) * ex).sum(0) / examples);
        mass.push_back((row.slice(-1, 0, std::min(k, T)).sum(-1) * ex).sum(0) / examples);
    }
    ClsAttention out;
    out.k = k;
    out.from_cls = torch::stack(from).to(torch::kFloat);
    out.to_cls = torch::stack(to).to(torch::kFloat);
    out.entropy = torch::stack(entropy).to(torch::kFloat);
    out.mean_distance = torch::stack(distance).to(torch::kFloat);
    out.first_k_mass = torch::stack(mass).to(torch::kFloat);
    out.token_count = count.to(torch::kFloat);
    return out;
}

}  // namespace analysis
