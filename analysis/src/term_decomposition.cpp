// Layer-0 attention logits split into the paper's word/position terms (Ke, He, Liu, ICLR 2021,
// Eq. 6 and Fig. 2), with the embedding LayerNorm split linearly at a shared per-token sigma so
// that the terms plus the remainder equal the model's own logits. The model's logits come from
// one forward pass with attention maps on: run here, or given by the caller (analyze_model
// reuses the pass that also feeds the [CLS] maps). Shapes: B batch, H heads, T tokens, C hidden.
#include <torch/torch.h>

#include "analysis/attention_analysis.h"
#include "engine/eval_mode.h"
#include "tensor_util.h"

namespace analysis {

using detail::dbl;
using detail::require;
using detail::shape_of;
using detail::to_cpu_float;

namespace {

/// The three additive streams of a hidden state: word, position, rest. (B, T, C) each.
struct Streams {
    torch::Tensor word, pos, rest;
};

/// LN(word + pos + rest) split linearly: each stream centred over C and divided by the
/// per-token sigma of the SUM, times the gain; the LayerNorm bias joins the rest. The parts add
/// up to LN(sum) exactly (the only nonlinearity, sigma, is shared). RMSNorm (model.norm) the
/// same without the centring, each stream over the RMS of the sum; a norm without a bias
/// (model.bias false) adds nothing to the rest.
Streams split_layer_norm(const Streams& s, engine::Norm& ln) {
    const double eps = ln->eps;
    auto total = s.word + s.pos + s.rest;  // (B, T, C)
    auto inv_sigma = ln->rms
                         ? torch::rsqrt(total.pow(2).mean(-1, /*keepdim=*/true) + eps)
                         : torch::rsqrt(total.var(-1, /*unbiased=*/false, /*keepdim=*/true) + eps);
    auto gain = dbl(ln->weight);  // (C)
    auto part = [&](const torch::Tensor& t) {
        return (ln->rms ? t : t - t.mean(-1, true)) * inv_sigma * gain;
    };
    auto rest = part(s.rest);
    return {part(s.word), part(s.pos), ln->bias.defined() ? rest + dbl(ln->bias) : rest};
}

/// A Linear layer's bias in float64, or undefined when the layer has none (model.bias false).
torch::Tensor bias_dbl(const torch::nn::Linear& linear) {
    return linear->bias.defined() ? dbl(linear->bias) : torch::Tensor();
}

/// input_ids (B, T) fits the model; attention_mask is undefined or (B, T).
void check_input(const engine::ModelConfig& config, const torch::Tensor& input_ids,
                 const torch::Tensor& attention_mask) {
    require(input_ids.defined() && input_ids.dim() == 2,
            "decompose_first_layer: input_ids must be (B, T), got " + shape_of(input_ids));
    const int64_t T = input_ids.size(1);
    require(T >= 1 && T <= config.max_position_embeddings,
            "decompose_first_layer: " + std::to_string(T) +
                " tokens do not fit max_position_embeddings = " +
                std::to_string(config.max_position_embeddings));
    require(!attention_mask.defined() || attention_mask.sizes() == input_ids.sizes(),
            "decompose_first_layer: attention_mask must be (B, T) like input_ids");
}

/// The mask on the model's device: the given one, or all ones.
torch::Tensor mask_on(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                      torch::Device device) {
    return attention_mask.defined()
               ? attention_mask.to(device)
               : torch::ones(input_ids.sizes(), input_ids.options().device(device));
}

}  // namespace

torch::Tensor FourTerms::sum() const {
    return word_word + word_pos + pos_word + pos_pos + remainder;
}

FourTerms decompose_first_layer(engine::BertModel& model, const torch::Tensor& input_ids,
                                const torch::Tensor& attention_mask) {
    check_input(model->config(), input_ids, attention_mask);
    engine::EvalModeGuard eval_mode(*model);
    torch::NoGradGuard no_grad;
    const auto device = model->embeddings->word_embeddings->weight.device();
    auto ids = input_ids.to(device, torch::kLong);
    // The reference: the model's own logits, pre-mask, all positional terms included.
    engine::EncoderOutput encoded =
        model->forward(ids, mask_on(ids, attention_mask, device), {}, /*output_attentions=*/true);
    return decompose_first_layer(model, input_ids, attention_mask, encoded);
}

FourTerms decompose_first_layer(engine::BertModel& model, const torch::Tensor& input_ids,
                                const torch::Tensor& attention_mask,
                                const engine::EncoderOutput& encoded) {
    const auto& config = model->config();
    check_input(config, input_ids, attention_mask);
    const int64_t B = input_ids.size(0), T = input_ids.size(1);
    const int64_t C = config.hidden_size, H = config.num_attention_heads, d = config.head_dim();
    require(!encoded.attention_logits.empty() && encoded.attention_logits[0].defined(),
            "decompose_first_layer: the EncoderOutput has no attention logits (run the forward "
            "pass with output_attentions = true)");
    const auto& logits0 = encoded.attention_logits[0];
    require(logits0.dim() == 4 && logits0.size(0) == B && logits0.size(1) == H &&
                logits0.size(2) == T && logits0.size(3) == T,
            "decompose_first_layer: the EncoderOutput's layer-0 logits are " + shape_of(logits0) +
                ", expected (" + std::to_string(B) + ", " + std::to_string(H) + ", " +
                std::to_string(T) + ", " + std::to_string(T) + ") for these input_ids");

    engine::EvalModeGuard eval_mode(*model);
    torch::NoGradGuard no_grad;
    auto& emb = *model->embeddings;
    const auto device = emb.word_embeddings->weight.device();
    auto ids = input_ids.to(device, torch::kLong);

    FourTerms out;
    out.logits = to_cpu_float(logits0);
    out.attention_mask =
        mask_on(ids, attention_mask, device).detach().to(torch::kCPU, torch::kLong);

    // Streams of the embedding sum, in float64 so the split itself adds no visible error.
    auto word = dbl(emb.word_embeddings->weight).index_select(0, ids.reshape({-1})).view({B, T, C});
    auto zero = torch::zeros_like(word);
    Streams s{word, zero, zero};
    auto& positional = model->position;
    const engine::PositionDescription& scheme = positional->description();
    require(!scheme.rotary && !scheme.content_bias,
            "decompose_first_layer: the four-term split (Fig. 2) needs positions added to the "
            "input or to q/k; " +
                scheme.summary +
                " mixes them inside attention (its named "
                "terms come from engine::LayerPosition::terms)");
    engine::PositionTerms terms = positional->forward(T);
    if (terms.input.defined()) {
        // BERT-A/R, sinusoidal: the input slot at positions offset..offset+T-1,
        // (T, C) -> (1, T, C) -> (B, T, C)
        s.pos = dbl(terms.input).unsqueeze(0).expand({B, T, C});
    }
    if (!emb.token_type_embeddings.is_empty()) {
        // Token type 0 everywhere, as forward() with undefined token_type_ids: (C) -> (B, T, C)
        s.rest = dbl(emb.token_type_embeddings->weight[0]).view({1, 1, C}).expand({B, T, C});
    }
    s = split_layer_norm(s, emb.LayerNorm);
    auto* layer = model->encoder->layer[0]->as<engine::BertLayerImpl>();
    // Pre-LN attends over LN(x), bar ModernBERT's layer 0 (model.skip_first_attention_norm).
    if (layer->attention_norm) s = split_layer_norm(s, layer->attention->output->LayerNorm);

    auto& self = *layer->attention->self;
    auto wq = dbl(self.query->weight), wk = dbl(self.key->weight);
    auto q_w = torch::linear(s.word, wq), q_p = torch::linear(s.pos, wq);
    auto k_w = torch::linear(s.word, wk), k_p = torch::linear(s.pos, wk);
    auto q_r = torch::linear(s.rest, wq, bias_dbl(self.query));
    auto k_r = torch::linear(s.rest, wk, bias_dbl(self.key));

    if (scheme.qk_offsets) {
        // BERT-Ad: q += pos_q_linear(pos_ln(p)). pos_ln is split like the embedding LayerNorm
        // (one stream), so the position query is (p - mean p) / sigma_p * g U^Q and pos_ln's
        // bias (through U^Q) and U^Q's own bias join the rest.
        auto proj = positional->projections->ptr<engine::PositionProjectionImpl>(0);
        auto rows = positional->positions(T, positional->pos->weight.device());
        auto p = dbl(positional->pos->weight.index_select(0, rows)).unsqueeze(0);  // (1, T, C)
        Streams ps =
            split_layer_norm({p, torch::zeros_like(p), torch::zeros_like(p)}, positional->pos_ln);
        auto uq = dbl(proj->pos_q_linear->weight), uk = dbl(proj->pos_k_linear->weight);
        q_p = q_p + torch::linear(ps.word, uq);  // (1, T, C) broadcast over B
        k_p = k_p + torch::linear(ps.word, uk);
        q_r = q_r + torch::linear(ps.rest, uq, bias_dbl(proj->pos_q_linear));
        k_r = k_r + torch::linear(ps.rest, uk, bias_dbl(proj->pos_k_linear));
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
    auto model_bias = terms.for_layer(0).bias;  // (H, T, T) or undefined
    if (scheme.untied) {
        // TUPE: the untied term (after the [CLS] reset) is the position->position term;
        // the relative bias (TUPE-R) stays a bias.
        auto rel = positional->relative_bias(T);
        auto untied = rel.defined() ? model_bias - rel : model_bias;
        pos_pos = dbl(untied).unsqueeze(0).expand({B, H, T, T});
        if (rel.defined()) bias = dbl(rel).unsqueeze(0).expand({B, H, T, T});
    } else if (model_bias.defined()) {
        bias = dbl(model_bias).unsqueeze(0).expand({B, H, T, T});  // (H, T, T) -> (B, H, T, T)
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

}  // namespace analysis
