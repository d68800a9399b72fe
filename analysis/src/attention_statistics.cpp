// Numbers read off attention maps: how uniform a layer-0 term looks (its spread across keys,
// Fig. 2's "looks like noise" as a figure), per head and relative to word->word; and the head
// taxonomy of the paper's Fig. 6 (global, local, broad, previous, next) with the statistics
// behind it. Plain float64 arithmetic on CPU copies; shapes: B batch, H heads, T tokens.
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "analysis/attention_analysis.h"
#include "tensor_util.h"

namespace analysis {

using detail::cpu_dbl;
using detail::require;
using detail::shape_of;
using detail::shape_string;

// ---- how uniform a term looks -------------------------------------------------------------------

const std::array<TermField, 6>& term_fields() {
    static const std::array<TermField, 6> fields = {{
        {"word_word", &FourTerms::word_word, &TermSpread::word_word},
        {"word_pos", &FourTerms::word_pos, &TermSpread::word_pos},
        {"pos_word", &FourTerms::pos_word, &TermSpread::pos_word},
        {"pos_pos", &FourTerms::pos_pos, &TermSpread::pos_pos},
        {"bias", &FourTerms::bias, &TermSpread::bias},
        {"rest", &FourTerms::rest, &TermSpread::rest},
    }};
    return fields;
}

TermSpread relative_to_word_word(const TermSpread& spread) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    TermSpread r;
    for (const TermField& f : term_fields())
        r.*f.spread = spread.word_word > 0 ? spread.*f.spread / spread.word_word : nan;
    return r;
}

double uniformity(const torch::Tensor& term, const torch::Tensor& attention_mask) {
    require(term.defined() && (term.dim() == 2 || term.dim() == 3),
            "uniformity: term must be (T, T) or (B, T, T)");
    auto t = cpu_dbl(term);
    if (t.dim() == 2) t = t.unsqueeze(0);  // (T, T) -> (1, T, T)
    const int64_t B = t.size(0), T = t.size(1);
    require(t.size(2) == T, "uniformity: term must be square, got " + shape_string(term.sizes()));
    auto m =
        attention_mask.defined() ? cpu_dbl(attention_mask) : torch::ones({B, T}, torch::kDouble);
    require(m.dim() == 2 && m.size(0) == B && m.size(1) == T,
            "uniformity: attention_mask must be (B, T) = (" + std::to_string(B) + ", " +
                std::to_string(T) + ")");
    auto keys = m.unsqueeze(1);                               // (B, 1, T)
    auto n = keys.sum(-1, /*keepdim=*/true).clamp_min(1.0);   // (B, 1, 1)
    auto mean = (t * keys).sum(-1, true) / n;                 // (B, T, 1)
    auto var = ((t - mean).pow(2) * keys).sum(-1, true) / n;  // (B, T, 1)
    const double rows = m.sum().item<double>();
    if (rows <= 0) return 0.0;
    return std::sqrt((var.squeeze(-1) * m).sum().item<double>() / rows);
}

TermStats term_statistics(const FourTerms& terms) {
    require(terms.word_word.defined() && terms.word_word.dim() == 4,
            "term_statistics: terms.word_word must be (B, H, T, T)");
    const int64_t H = terms.word_word.size(1);
    TermStats stats;
    for (int64_t h = 0; h < H; ++h) {
        TermSpread s;
        for (const TermField& f : term_fields())
            s.*f.spread = uniformity((terms.*f.tensor).select(1, h), terms.attention_mask);
        stats.spread.push_back(s);
        stats.relative.push_back(relative_to_word_word(s));
    }
    return stats;
}

// ---- head taxonomy ------------------------------------------------------------------------------

const char* to_string(HeadPattern pattern) {
    switch (pattern) {
        case HeadPattern::kGlobal: return "global";
        case HeadPattern::kLocal: return "local";
        case HeadPattern::kBroad: return "broad";
        case HeadPattern::kPrevious: return "previous";
        case HeadPattern::kNext: return "next";
    }
    return "unknown";
}

HeadStatistics head_statistics(const torch::Tensor& probs, bool skip_cls) {
    require(probs.defined() && probs.dim() == 2 && probs.size(0) == probs.size(1),
            "head_statistics: probs must be (T, T), got " + shape_of(probs));
    auto p = cpu_dbl(probs);
    if (skip_cls) {
        p = p.slice(0, 1).slice(1, 1);  // (T, T) -> (T-1, T-1)
        p = p / p.sum(-1, /*keepdim=*/true).clamp_min(1e-300);
    }
    const int64_t n = p.size(0);
    require(n >= 2, "head_statistics: needs at least 2 positions, got " + std::to_string(n));
    auto idx = torch::arange(n, torch::kDouble);
    auto i = idx.unsqueeze(1), j = idx.unsqueeze(0);  // (n, 1), (1, n)
    HeadStatistics s;
    s.positions = n;
    s.mean_distance = (p * (i - j).abs()).sum(-1).mean().item<double>() / static_cast<double>(n);
    s.entropy =
        (-torch::xlogy(p, p).sum(-1)).mean().item<double>() / std::log(static_cast<double>(n));
    s.previous_mass = (p * (j < i).to(torch::kDouble)).sum(-1).mean().item<double>();
    s.next_mass = (p * (j > i).to(torch::kDouble)).sum(-1).mean().item<double>();
    s.self_mass = p.diagonal().mean().item<double>();
    return s;
}

HeadPattern classify_head(const torch::Tensor& probs, const TaxonomyThresholds& thresholds) {
    const HeadStatistics s = head_statistics(probs, thresholds.skip_cls);
    // A strong lean defines the pattern whatever the width; then uniformity; then width.
    if (s.previous_mass - s.next_mass >= thresholds.min_asymmetry) return HeadPattern::kPrevious;
    if (s.next_mass - s.previous_mass >= thresholds.min_asymmetry) return HeadPattern::kNext;
    if (s.entropy >= thresholds.global_min_entropy) return HeadPattern::kGlobal;
    if (s.mean_distance <= thresholds.local_max_distance) return HeadPattern::kLocal;
    return HeadPattern::kBroad;
}

std::vector<HeadPattern> classify_heads(const torch::Tensor& probs,
                                        const TaxonomyThresholds& thresholds) {
    require(probs.defined() && probs.dim() == 3, "classify_heads: probs must be (H, T, T)");
    std::vector<HeadPattern> out;
    for (int64_t h = 0; h < probs.size(0); ++h) out.push_back(classify_head(probs[h], thresholds));
    return out;
}

double mean_attention_distance(const torch::Tensor& probs) {
    require(probs.defined() && probs.dim() >= 2 && probs.size(-1) == probs.size(-2),
            "mean_attention_distance: probs must be (..., T, T)");
    auto p = cpu_dbl(probs);
    const int64_t T = p.size(-1);
    auto idx = torch::arange(T, torch::kDouble);
    auto dist = (idx.unsqueeze(1) - idx.unsqueeze(0)).abs();  // (T, T): |i - j|
    return (p * dist).sum(-1).mean().item<double>();
}

}  // namespace analysis
