// The microscope computations: layer-0 logits split into word/position terms (TUPE paper,
// Eq. 6 and Fig. 2) with the embedding LayerNorm split linearly at a shared per-token sigma,
// term spreads, TUPE's positional correlation (Fig. 6), [CLS] attention, the head taxonomy, and
// the import of HF BertForMaskedLM checkpoints (transformers' modeling_bert names).
// Everything runs without gradients in eval mode; results are float32 CPU tensors or doubles.
#include "engine/eval_mode.h"
#include "analysis/attention_analysis.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "analysis/safetensors.h"
#include "engine/errors.h"

namespace analysis {

namespace fs = std::filesystem;

namespace {

void require(bool condition, const std::string& message) {
    if (!condition) throw std::invalid_argument(message);
}

std::string shape_string(c10::IntArrayRef sizes) {
    std::ostringstream os;
    os << sizes;
    return os.str();
}

using engine::EvalModeGuard;

torch::Tensor to_cpu_float(const torch::Tensor& t) {
    return t.detach().to(torch::kCPU, torch::kFloat);
}

torch::Tensor dbl(const torch::Tensor& t) { return t.detach().to(torch::kDouble); }

/// The three additive streams of a hidden state: word, position, rest. (B, T, C) each.
struct Streams {
    torch::Tensor word, pos, rest;
};

/// LN(word + pos + rest) split linearly: each stream centred over C and divided by the
/// per-token sigma of the SUM, times the gain; the LayerNorm bias joins the rest. The parts add
/// up to LN(sum) exactly (the only nonlinearity, sigma, is shared).
Streams split_layer_norm(const Streams& s, torch::nn::LayerNorm& ln) {
    const double eps = ln->options.eps();
    auto total = s.word + s.pos + s.rest;  // (B, T, C)
    auto inv_sigma = torch::rsqrt(total.var(-1, /*unbiased=*/false, /*keepdim=*/true) + eps);
    auto gain = dbl(ln->weight), shift = dbl(ln->bias);  // (C)
    auto part = [&](const torch::Tensor& t) { return (t - t.mean(-1, true)) * inv_sigma * gain; };
    return {part(s.word), part(s.pos), part(s.rest) + shift};
}

}  // namespace

// ---- Eq. (6) / Fig. 2 -------------------------------------------------------------------------

torch::Tensor FourTerms::sum() const {
    return word_word + word_pos + pos_word + pos_pos + remainder;
}

FourTerms decompose_first_layer(engine::BertModel& model, const torch::Tensor& input_ids,
                                const torch::Tensor& attention_mask) {
    require(input_ids.defined() && input_ids.dim() == 2,
            "decompose_first_layer: input_ids must be (B, T), got " +
                (input_ids.defined() ? shape_string(input_ids.sizes()) : std::string("undefined")));
    const auto& config = model->config();
    const int64_t B = input_ids.size(0), T = input_ids.size(1);
    const int64_t C = config.hidden_size, H = config.num_attention_heads, d = config.head_dim();
    require(T >= 1 && T <= config.max_position_embeddings,
            "decompose_first_layer: " + std::to_string(T) +
                " tokens do not fit max_position_embeddings = " +
                std::to_string(config.max_position_embeddings));
    require(!attention_mask.defined() || attention_mask.sizes() == input_ids.sizes(),
            "decompose_first_layer: attention_mask must be (B, T) like input_ids");

    EvalModeGuard eval_mode(*model);
    torch::NoGradGuard no_grad;
    auto& emb = *model->embeddings;
    const auto device = emb.word_embeddings->weight.device();
    auto ids = input_ids.to(device, torch::kLong);
    auto mask =
        attention_mask.defined() ? attention_mask.to(device) : torch::ones({B, T}, ids.options());

    FourTerms out;
    // The reference: the model's own logits, pre-mask, all positional terms included.
    engine::EncoderOutput enc = model->forward(ids, mask, {}, /*output_attentions=*/true);
    out.logits = to_cpu_float(enc.attention_logits.at(0));
    out.attention_mask = mask.detach().to(torch::kCPU, torch::kLong);

    // Streams of the embedding sum, in float64 so the split itself adds no visible error.
    auto word = dbl(emb.word_embeddings->weight).index_select(0, ids.reshape({-1})).view({B, T, C});
    auto zero = torch::zeros_like(word);
    Streams s{word, zero, zero};
    if (!emb.position_embeddings.is_empty()) {
        // BERT-A/R: positions 0..T-1, (T, C) -> (1, T, C) -> (B, T, C)
        s.pos = dbl(emb.position_embeddings->weight).slice(0, 0, T).unsqueeze(0).expand({B, T, C});
    }
    if (!emb.token_type_embeddings.is_empty()) {
        // Token type 0 everywhere, as forward() with undefined token_type_ids: (C) -> (B, T, C)
        s.rest = dbl(emb.token_type_embeddings->weight[0]).view({1, 1, C}).expand({B, T, C});
    }
    s = split_layer_norm(s, emb.LayerNorm);
    auto* layer = model->encoder->layer[0]->as<engine::BertLayerImpl>();
    if (layer->pre_layernorm) s = split_layer_norm(s, layer->attention->output->LayerNorm);

    auto& self = *layer->attention->self;
    auto wq = dbl(self.query->weight), wk = dbl(self.key->weight);
    auto q_w = torch::linear(s.word, wq), q_p = torch::linear(s.pos, wq);
    auto k_w = torch::linear(s.word, wk), k_p = torch::linear(s.pos, wk);
    auto q_r = torch::linear(s.rest, wq, dbl(self.query->bias));
    auto k_r = torch::linear(s.rest, wk, dbl(self.key->bias));

    const auto mode = config.absolute_position;
    auto& positional = model->position_bias;
    if (mode == engine::AbsolutePosition::kDecoupled) {
        // BERT-Ad: q += pos_q_linear(pos_ln(p)). pos_ln is split like the embedding LayerNorm
        // (one stream), so the position query is (p - mean p) / sigma_p * g U^Q and pos_ln's
        // bias (through U^Q) and U^Q's own bias join the rest.
        auto proj = positional->projections->ptr<engine::PositionProjectionImpl>(0);
        auto p = dbl(positional->pos->weight).slice(0, 0, T).unsqueeze(0);  // (1, T, C)
        Streams ps =
            split_layer_norm({p, torch::zeros_like(p), torch::zeros_like(p)}, positional->pos_ln);
        auto uq = dbl(proj->pos_q_linear->weight), uk = dbl(proj->pos_k_linear->weight);
        q_p = q_p + torch::linear(ps.word, uq);  // (1, T, C) broadcast over B
        k_p = k_p + torch::linear(ps.word, uk);
        q_r = q_r + torch::linear(ps.rest, uq, dbl(proj->pos_q_linear->bias));
        k_r = k_r + torch::linear(ps.rest, uk, dbl(proj->pos_k_linear->bias));
        q_p = q_p.expand({B, T, C});
        k_p = k_p.expand({B, T, C});
    }

    out.scale = self.scaling;
    auto heads = [&](const torch::Tensor& t) {
        // (B, T, C) -> (B, T, H, d) -> (B, H, T, d)
        return t.reshape({B, T, H, d}).transpose(1, 2);
    };
    auto product = [&](const torch::Tensor& q, const torch::Tensor& k) {
        return torch::matmul(heads(q) * out.scale, heads(k).transpose(-2, -1));  // (B, H, T, T)
    };
    auto word_word = product(q_w, k_w), word_pos = product(q_w, k_p);
    auto pos_word = product(q_p, k_w), pos_pos = product(q_p, k_p);
    auto rest = product(q_w + q_p, k_r) + product(q_r, k_w + k_p) + product(q_r, k_r);

    auto bias = torch::zeros_like(word_word);
    if (!positional.is_empty()) {
        auto terms = positional->forward(T);
        auto model_bias = terms.bias_for(0);  // (H, T, T) or undefined
        if (mode == engine::AbsolutePosition::kUntied) {
            // TUPE: the untied term (after the [CLS] reset) is the position->position term;
            // the relative bias (TUPE-R) stays a bias.
            auto rel = positional->relative_bias(T);
            auto untied = rel.defined() ? model_bias - rel : model_bias;
            pos_pos = dbl(untied).unsqueeze(0).expand({B, H, T, T});
            if (rel.defined()) bias = dbl(rel).unsqueeze(0).expand({B, H, T, T});
        } else if (model_bias.defined()) {
            bias = dbl(model_bias).unsqueeze(0).expand({B, H, T, T});  // (H, T, T) -> (B, H, T, T)
        }
    }
    out.word_word = to_cpu_float(word_word);
    out.word_pos = to_cpu_float(word_pos);
    out.pos_word = to_cpu_float(pos_word);
    out.pos_pos = to_cpu_float(pos_pos);
    out.bias = to_cpu_float(bias);
    out.rest = to_cpu_float(rest);
    out.remainder = to_cpu_float(bias + rest);
    return out;
}

// ---- uniformity -------------------------------------------------------------------------------

double uniformity(const torch::Tensor& term, const torch::Tensor& attention_mask) {
    require(term.defined() && (term.dim() == 2 || term.dim() == 3),
            "uniformity: term must be (T, T) or (B, T, T)");
    auto t = term.detach().to(torch::kCPU, torch::kDouble);
    if (t.dim() == 2) t = t.unsqueeze(0);  // (T, T) -> (1, T, T)
    const int64_t B = t.size(0), T = t.size(1);
    require(t.size(2) == T, "uniformity: term must be square, got " + shape_string(term.sizes()));
    auto m = attention_mask.defined() ? attention_mask.to(torch::kCPU, torch::kDouble)
                                      : torch::ones({B, T}, torch::kDouble);
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
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int64_t h = 0; h < H; ++h) {
        auto u = [&](const torch::Tensor& t) {
            return uniformity(t.select(1, h), terms.attention_mask);
        };
        TermSpread s;
        s.word_word = u(terms.word_word);
        s.word_pos = u(terms.word_pos);
        s.pos_word = u(terms.pos_word);
        s.pos_pos = u(terms.pos_pos);
        s.bias = u(terms.bias);
        s.rest = u(terms.rest);
        TermSpread r;
        auto rel = [&](double v) { return s.word_word > 0 ? v / s.word_word : nan; };
        r.word_word = rel(s.word_word);
        r.word_pos = rel(s.word_pos);
        r.pos_word = rel(s.pos_word);
        r.pos_pos = rel(s.pos_pos);
        r.bias = rel(s.bias);
        r.rest = rel(s.rest);
        stats.spread.push_back(s);
        stats.relative.push_back(r);
    }
    return stats;
}

// ---- TUPE's positional correlation ------------------------------------------------------------

PositionalCorrelation tupe_positional_correlation(engine::BertModel& model, int64_t T) {
    const auto& config = model->config();
    require(config.absolute_position == engine::AbsolutePosition::kUntied &&
                !model->position_bias.is_empty(),
            std::string("tupe_positional_correlation needs a TUPE model (absolute_position = "
                        "untied), got ") +
                engine::to_string(config.absolute_position));
    require(T >= 1 && T <= config.max_position_embeddings,
            "tupe_positional_correlation: T = " + std::to_string(T) + " outside 1.." +
                std::to_string(config.max_position_embeddings));
    EvalModeGuard eval_mode(*model);
    torch::NoGradGuard no_grad;
    auto& positional = model->position_bias;
    const int64_t H = config.num_attention_heads;

    PositionalCorrelation out;
    out.cls_reset = config.untie_cls;
    auto rel = positional->relative_bias(T);  // (H, T, T) or undefined
    if (rel.defined()) out.relative = to_cpu_float(rel);
    auto terms = positional->forward(T);  // what the layers receive
    const auto groups = static_cast<int64_t>(positional->projections->size());
    for (int64_t g = 0; g < groups; ++g) {
        PositionalCorrelationGroup group;
        auto a = positional->untied_correlation(T, g);  // (H, T+1, T+1), position rows 0..T
        group.theta1 = to_cpu_float(a.select(1, 0).select(1, 0));  // A[h, 0, 0]
        group.theta2 = to_cpu_float(a.select(1, 1).select(1, 1));  // A[h, 1, 1]
        group.raw = to_cpu_float(a.slice(1, 1).slice(2, 1));       // rows/cols 1..T: (H, T, T)
        group.reset = group.raw.clone();
        if (config.untie_cls) {
            // Column 0 (others -> [CLS]) <- theta2, then row 0 ([CLS] -> all) <- theta1.
            group.reset.select(2, 0).copy_(group.theta2.view({H, 1}).expand({H, T}));
            group.reset.select(1, 0).copy_(group.theta1.view({H, 1}).expand({H, T}));
        }
        group.total = to_cpu_float(terms.bias_for(static_cast<size_t>(g)));
        group.probs = torch::softmax(group.total.to(torch::kDouble), -1).to(torch::kFloat);
        out.groups.push_back(std::move(group));
    }
    return out;
}

// ---- [CLS] attention --------------------------------------------------------------------------

ClsAttention cls_attention(const std::vector<torch::Tensor>& probs,
                           const torch::Tensor& attention_mask, int64_t k) {
    require(!probs.empty(), "cls_attention: no layers given");
    require(k >= 0, "cls_attention: k must be >= 0, got " + std::to_string(k));
    auto first = probs[0];
    require(first.defined() && (first.dim() == 3 || first.dim() == 4),
            "cls_attention: probs must be (B, H, T, T) or (H, T, T) per layer");
    const int64_t B = first.dim() == 4 ? first.size(0) : 1;
    const int64_t H = first.size(-3), T = first.size(-1);
    auto m = attention_mask.defined() ? attention_mask.to(torch::kCPU, torch::kDouble)
                                      : torch::ones({B, T}, torch::kDouble);
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
        auto p = probs[l].detach().to(torch::kCPU, torch::kDouble);
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

// ---- head taxonomy ----------------------------------------------------------------------------

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
            "head_statistics: probs must be (T, T), got " +
                (probs.defined() ? shape_string(probs.sizes()) : std::string("undefined")));
    auto p = probs.detach().to(torch::kCPU, torch::kDouble);
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
    auto p = probs.detach().to(torch::kCPU, torch::kDouble);
    const int64_t T = p.size(-1);
    auto idx = torch::arange(T, torch::kDouble);
    auto dist = (idx.unsqueeze(1) - idx.unsqueeze(0)).abs();  // (T, T): |i - j|
    return (p * dist).sum(-1).mean().item<double>();
}

// ---- HF import ---------------------------------------------------------------------------------

namespace {

std::string read_text(const std::string& path) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw engine::CheckpointError(path, "no such file");
    std::ifstream in(path, std::ios::binary);
    std::ostringstream os;
    os << in.rdbuf();
    if (!in) throw engine::CheckpointError(path, "read failed");
    return os.str();
}

/// Old TF-converted checkpoints call LayerNorm parameters gamma/beta.
std::string canonical_hf_name(std::string name) {
    auto ends_with = [&](const std::string& suffix) {
        return name.size() >= suffix.size() &&
               name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (name.find("LayerNorm.") != std::string::npos) {
        if (ends_with(".gamma")) return name.substr(0, name.size() - 6) + ".weight";
        if (ends_with(".beta")) return name.substr(0, name.size() - 5) + ".bias";
    }
    return name;
}

bool starts_with(const std::string& s, const std::string& prefix) {
    return s.compare(0, prefix.size(), prefix) == 0;
}

/// HF tensors the engine has no place for and that carry nothing it needs.
bool ignored_hf_name(const std::string& name) {
    return starts_with(name, "bert.pooler.") || starts_with(name, "cls.seq_relationship.") ||
           name == "bert.embeddings.position_ids" || name == "cls.predictions.decoder.bias" ||
           name == "cls.predictions.decoder.weight";
}

}  // namespace

engine::ModelConfig read_hf_bert_config(const std::string& path) {
    const std::string bytes = read_text(path);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(bytes.begin(), bytes.end());
    } catch (const nlohmann::json::exception& e) {
        throw engine::CheckpointError(path, std::string("malformed JSON: ") + e.what());
    }
    if (!j.is_object()) throw engine::CheckpointError(path, "not a JSON object");

    auto get_int = [&](const char* key, int64_t& field, bool required) {
        if (!j.contains(key)) {
            if (required)
                throw engine::CheckpointError(path, std::string("missing key '") + key + "'");
            return;
        }
        if (!j[key].is_number_integer()) {
            throw engine::CheckpointError(
                path, std::string("key '") + key + "' must be an integer, got " + j[key].dump());
        }
        field = j[key].get<int64_t>();
    };
    auto get_double = [&](const char* key, double& field) {
        if (!j.contains(key) || j[key].is_null()) return;
        if (!j[key].is_number()) {
            throw engine::CheckpointError(
                path, std::string("key '") + key + "' must be a number, got " + j[key].dump());
        }
        field = j[key].get<double>();
    };
    auto require_string = [&](const char* key, const char* allowed) {
        if (!j.contains(key)) return;
        if (!j[key].is_string() || j[key].get<std::string>() != allowed) {
            throw engine::CheckpointError(
                path, std::string("key '") + key + "' is " + j[key].dump() +
                          "; the engine's BERT-A supports only \"" + allowed + "\"");
        }
    };

    engine::ModelConfig c = engine::make_model_config("bert-a", "tiny");
    c.size = "hf";
    get_int("vocab_size", c.vocab_size, true);
    get_int("hidden_size", c.hidden_size, true);
    get_int("num_hidden_layers", c.num_hidden_layers, true);
    get_int("num_attention_heads", c.num_attention_heads, true);
    get_int("intermediate_size", c.intermediate_size, true);
    get_int("max_position_embeddings", c.max_position_embeddings, true);
    c.type_vocab_size = 2;
    get_int("type_vocab_size", c.type_vocab_size, false);
    c.layer_norm_eps = 1e-12;
    get_double("layer_norm_eps", c.layer_norm_eps);
    get_double("hidden_dropout_prob", c.hidden_dropout_prob);
    get_double("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
    get_double("initializer_range", c.initializer_range);
    if (j.contains("pad_token_id") && !j["pad_token_id"].is_null())
        get_int("pad_token_id", c.pad_token_id, false);
    // HF "gelu" is the erf form, as the engine's BertIntermediate; gelu_new (tanh) is not.
    require_string("hidden_act", "gelu");
    require_string("position_embedding_type", "absolute");
    require_string("model_type", "bert");
    if (j.contains("is_decoder") && j["is_decoder"].is_boolean() && j["is_decoder"].get<bool>())
        throw engine::CheckpointError(path, "is_decoder = true: only encoders are supported");
    try {
        c.validate();
    } catch (const std::exception& e) {
        throw engine::CheckpointError(path,
                                      std::string("config does not fit the engine: ") + e.what());
    }
    return c;
}

NamedTensors read_hf_state_dict(const std::string& dir) {
    const fs::path d(dir);
    std::error_code ec;
    if (fs::exists(d / "model.safetensors", ec))
        return read_safetensors((d / "model.safetensors").string());
    if (fs::exists(d / "pytorch_model.bin", ec))
        return read_torch_state_dict((d / "pytorch_model.bin").string());
    if (fs::exists(d / "model.safetensors.index.json", ec) ||
        fs::exists(d / "pytorch_model.bin.index.json", ec))
        throw engine::CheckpointError(dir,
                                      "sharded checkpoints are not supported; merge the shards");
    throw engine::CheckpointError(dir, "neither model.safetensors nor pytorch_model.bin found");
}

engine::BertForMaskedLM import_hf_bert(const std::string& dir) {
    const fs::path d(dir);
    const engine::ModelConfig config = read_hf_bert_config((d / "config.json").string());
    std::error_code ec;
    const std::string weights_file = fs::exists(d / "model.safetensors", ec)
                                         ? (d / "model.safetensors").string()
                                         : (d / "pytorch_model.bin").string();
    NamedTensors state = read_hf_state_dict(dir);

    std::unordered_map<std::string, torch::Tensor> by_name;
    bool has_bert_prefix = false;
    for (auto& [raw, tensor] : state) {
        const std::string name = canonical_hf_name(raw);
        has_bert_prefix = has_bert_prefix || starts_with(name, "bert.");
        if (!by_name.emplace(name, tensor).second)
            throw engine::CheckpointError(weights_file, "tensor '" + name + "' appears twice");
    }
    if (!has_bert_prefix) {
        throw engine::CheckpointError(
            weights_file,
            "no 'bert.*' tensors: not a BertForMaskedLM checkpoint (a bare "
            "BertModel has no MLM head to import)");
    }

    engine::BertForMaskedLM model(config);
    torch::NoGradGuard no_grad;
    std::set<std::string> used;
    for (auto& item : model->named_parameters(/*recurse=*/true)) {
        const std::string& name = item.key();
        auto found = by_name.find(name);
        if (found == by_name.end()) {
            throw engine::CheckpointError(
                weights_file, "missing tensor '" + name + "' (config.json says " +
                                  std::to_string(config.num_hidden_layers) + " layers)");
        }
        auto& param = item.value();
        const auto& src = found->second;
        if (!src.is_floating_point() || src.sizes() != param.sizes()) {
            throw engine::CheckpointError(
                weights_file, "tensor '" + name + "' is " + shape_string(src.sizes()) + " " +
                                  c10::toString(src.scalar_type()) + ", the model (from " +
                                  "config.json) expects " + shape_string(param.sizes()) + " float");
        }
        param.copy_(src.to(param.scalar_type()));
        used.insert(name);
    }
    for (const auto& [name, tensor] : by_name) {
        if (used.count(name)) continue;
        if (!ignored_hf_name(name)) {
            throw engine::CheckpointError(
                weights_file,
                "unexpected tensor '" + name + "' (does config.json fit this checkpoint?)");
        }
    }
    // The engine ties the decoder to the word embeddings, as HF does; an untied decoder would be
    // silently replaced, so refuse it.
    auto decoder = by_name.find("cls.predictions.decoder.weight");
    if (decoder != by_name.end()) {
        const auto& words = model->bert->embeddings->word_embeddings->weight;
        if (decoder->second.sizes() != words.sizes() ||
            !torch::equal(decoder->second.to(words.scalar_type()), words)) {
            throw engine::CheckpointError(weights_file,
                                          "cls.predictions.decoder.weight differs from the word "
                                          "embeddings; untied decoders are not supported");
        }
    }
    model->eval();
    return model;
}

engine::Vocab import_hf_vocab(const std::string& dir, const engine::ModelConfig& config) {
    const std::string path = (fs::path(dir) / "vocab.txt").string();
    engine::Vocab vocab = engine::Vocab::load(path);
    if (vocab.size() > config.vocab_size) {
        throw engine::CheckpointError(path, std::to_string(vocab.size()) +
                                                " tokens, more than the model's vocab_size = " +
                                                std::to_string(config.vocab_size));
    }
    return vocab;
}

}  // namespace analysis
