// The BERT encoder family and its MLM head (HF modeling_bert structure and names; TUPE's
// positional terms from engine/position.h are computed once per forward and passed to each layer).
#include "engine/bert.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/core/PhiloxRNGEngine.h>

#include <cmath>
#include <mutex>

#include "engine/batched_matmul.h"
#include "engine/fused_ops.h"
#include "engine/fused_train_ops.h"
#include "simd_lanes.h"

namespace engine {

namespace {

Norm make_layer_norm(const ModelConfig& c) { return Norm(c.hidden_size, c); }

// A Linear layer of the encoder: with its bias unless model.bias is false (ModernBERT).
torch::nn::Linear make_linear(int64_t in, int64_t out, const ModelConfig& c) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(c.bias));
}

// LibTorch 1.13's CPU layer_norm rejects a bf16 input with fp32 weights, and its CPU autocast
// does not cast for it: under autocast the input is brought to the weights' dtype here.
torch::Tensor apply_norm(Norm& norm, const torch::Tensor& x) {
    const auto dtype = norm->weight.scalar_type();
    return norm(x.scalar_type() == dtype ? x : x.to(dtype));
}

torch::Tensor apply_dropout(torch::nn::Dropout& module, const torch::Tensor& x) {
    return engine::dropout(x, module->options.p(), module->is_training());
}

// gelu(dense(x)), erf GELU as HF "gelu". On CPU the bias add and the GELU are one pass forward
// and backward after a bias-free matmul (engine/fused_train_ops.h).
torch::Tensor bert_linear_gelu(torch::nn::Linear& dense, const torch::Tensor& x) {
    if (fused_training_enabled() && x.device().is_cpu())
        return fused_bias_gelu(torch::linear(x, dense->weight), dense->bias);
    return torch::gelu(dense(x));
}

}  // namespace

// ---- dropout ----------------------------------------------------------------------------------

#ifdef TUPE_SIMD_LANES
namespace {

using lanes::I8;
using lanes::U8;
typedef uint64_t BertU64x4 __attribute__((vector_size(32)));

// The 32 x 32 -> 64-bit products a * k of 8 lanes, low and high halves; k holds the factor
// zero-extended in each 64-bit lane.
TUPE_INLINE void philox_mulhilo8(const U8& a, const BertU64x4& k, U8* lo, U8* hi) {
    const BertU64x4 mask = BertU64x4{} + 0xFFFFFFFFull;
    const BertU64x4 even = (BertU64x4)a & mask, odd = (BertU64x4)a >> 32;
    const BertU64x4 pe = even * k, po = odd * k;
    *lo = (U8)((pe & mask) | (po << 32));
    *hi = (U8)((pe >> 32) | (po & ~mask));
}

// A Philox multiplier as philox_mulhilo8 takes it, hidden from constant folding: GCC then
// multiplies the zero-extended lanes (pmuludq) instead of expanding the constant into shifts.
TUPE_INLINE BertU64x4 philox_factor(uint32_t k) {
    BertU64x4 v = BertU64x4{} + k;
    __asm__("" : "+m"(v));
    return v & (BertU64x4{} + 0xFFFFFFFFull);
}

// Keep masks of dropout's blocks: block b of `block` elements from at::Philox4_32(seed, b, 0),
// element i of the block from output i % 4 of the 10-round Philox of counter i / 4 (the stream
// a scalar loop of rng() calls gives, bit for bit), 8 counters (32 elements) at a time.
struct DropoutMaskBlocks {
    uint64_t seed;
    float* m;
    int64_t n, block;
    uint32_t threshold;
    float scale;

    TUPE_INLINE void run(int64_t b0, int64_t b1) const {
        constexpr uint32_t kA = 0x9E3779B9, kB = 0xBB67AE85;  // Philox key increments
        constexpr uint32_t kSA = 0xD2511F53, kSB = 0xCD9E8D57;
        const U8 lane{0, 1, 2, 3, 4, 5, 6, 7};
        const BertU64x4 sa = philox_factor(kSA), sb = philox_factor(kSB);
        for (int64_t b = b0; b < b1; ++b) {
            const int64_t begin = b * block, end = std::min(n, begin + block);
            for (int64_t i = begin; i < end; i += 32) {
                U8 c0 = lane + static_cast<uint32_t>((i - begin) / 4), c1 = U8{};
                U8 c2 = U8{} + static_cast<uint32_t>(b), c3 = U8{} + static_cast<uint32_t>(b >> 32);
                uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
                for (int round = 0; round < 10; ++round) {
                    U8 lo0, hi0, lo1, hi1;
                    philox_mulhilo8(c0, sa, &lo0, &hi0);
                    philox_mulhilo8(c2, sb, &lo1, &hi1);
                    const U8 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
                    c0 = n0;
                    c1 = lo1;
                    c2 = n2;
                    c3 = lo0;
                    k0 += kA;
                    k1 += kB;
                }
                // Output q of counter lane l is element i + 4 l + q.
                const lanes::F8 keep = lanes::splat(scale), drop = lanes::splat(0.0f);
                const U8* out[4] = {&c0, &c1, &c2, &c3};
                float v[4][8];
                for (int q = 0; q < 4; ++q) {
                    const lanes::F8 r = lanes::select((I8)(*out[q] >= threshold), keep, drop);
                    std::memcpy(v[q], &r, sizeof r);
                }
                const int64_t count = std::min<int64_t>(32, end - i);
                for (int64_t e = 0; e < count; ++e) m[i + e] = v[e & 3][e >> 2];
            }
        }
    }
};

}  // namespace
#endif

// On CUDA, LibTorch's own. On CPU, LibTorch 1.13's dropout draws its mask with a
// serial bernoulli_ (one Mersenne-Twister draw per element, single-threaded without MKL): ~10%
// of a small-model training step. Here the keep mask comes from Philox (counter-based, so
// blocks of 4096 elements are drawn in parallel and the result does not depend on the thread
// count), seeded from torch's default CPU generator: torch::manual_seed and the generator
// state saved in checkpoints still make it reproducible. Same semantics: each element kept
// with probability 1 - p (to 2^-32) and scaled by 1 / (1 - p).
torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
    TORCH_CHECK(p >= 0.0 && p <= 1.0, "dropout probability must be in [0, 1], got ", p);
    if (!training || p == 0.0) return x;
    if (!x.device().is_cpu() || p >= 1.0) return torch::dropout(x, p, true);
    uint64_t seed = 0;
    {
        auto gen = at::detail::getDefaultCPUGenerator();
        std::lock_guard<std::mutex> lock(gen.mutex());
        seed = gen.get<at::CPUGeneratorImpl>()->random64();
    }
    auto mask = torch::empty(x.sizes(), x.options().dtype(torch::kFloat).requires_grad(false));
    float* m = mask.data_ptr<float>();
    const int64_t n = mask.numel(), block = 4096;
    const auto threshold = static_cast<uint32_t>(std::min(4294967295.0, p * 4294967296.0));
    const float scale = static_cast<float>(1.0 / (1.0 - p));
#ifdef TUPE_SIMD_LANES
    const bool lanes8 = fused_training_enabled();
    if (lanes8) {
        const DropoutMaskBlocks k{seed, m, n, block, threshold, scale};
        lanes::parallel_items(k, (n + block - 1) / block, 16);
    }
#else
    const bool lanes8 = false;
#endif
    if (!lanes8) {
        at::parallel_for(0, (n + block - 1) / block, 16, [&](int64_t b0, int64_t b1) {
            for (int64_t b = b0; b < b1; ++b) {
                at::Philox4_32 rng(seed, static_cast<uint64_t>(b), 0);
                const int64_t end = std::min(n, (b + 1) * block);
                for (int64_t i = b * block; i < end; ++i) m[i] = rng() >= threshold ? scale : 0.0f;
            }
        });
    }
    // Under autocast x may be bf16: keep its dtype (the scale rounds to bf16, as it does in
    // LibTorch's own bf16 dropout).
    return x * (x.scalar_type() == torch::kFloat ? mask : mask.to(x.scalar_type()));
}

// ---- embeddings -------------------------------------------------------------------------------

BertEmbeddingsImpl::BertEmbeddingsImpl(const ModelConfig& c) {
    word_embeddings =
        register_module("word_embeddings", torch::nn::Embedding(c.vocab_size, c.hidden_size));
    if (describe_position(c).learned_input)
        position_embeddings = register_module(
            "position_embeddings", torch::nn::Embedding(c.max_position_embeddings, c.hidden_size));
    if (c.type_vocab_size > 0)
        token_type_embeddings = register_module(
            "token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.hidden_size));
    LayerNorm = register_module("LayerNorm", make_layer_norm(c));
    dropout = register_module("dropout", torch::nn::Dropout(c.hidden_dropout_prob));
}

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& input_ids,
                                          const torch::Tensor& token_type_ids,
                                          const torch::Tensor& position_input) {
    auto x = word_embeddings(input_ids);  // (B, T, C)
    // BERT-A, sinusoidal: positions added to the words (the mixing TUPE removes).
    if (position_input.defined()) x = x + position_input.unsqueeze(0);
    if (!token_type_embeddings.is_empty()) {
        if (token_type_ids.defined())
            x = x + token_type_embeddings(token_type_ids);
        else
            x = x + token_type_embeddings->weight[0];
    }
    return apply_dropout(dropout, apply_norm(LayerNorm, x));
}

// ---- attention --------------------------------------------------------------------------------

BertSelfAttentionImpl::BertSelfAttentionImpl(const ModelConfig& c)
    : num_heads(c.num_attention_heads), head_dim(c.head_dim()) {
    query = register_module("query", make_linear(c.hidden_size, c.hidden_size, c));
    key = register_module("key", make_linear(c.hidden_size, c.hidden_size, c));
    value = register_module("value", make_linear(c.hidden_size, c.hidden_size, c));
    dropout = register_module("dropout", torch::nn::Dropout(c.attention_probs_dropout_prob));
    // 1/sqrt(d) for BERT, 1/sqrt(2d) for TUPE, 1/sqrt(4d) for BERT-Ad (attention scale factor).
    scaling = 1.0 / std::sqrt(static_cast<double>(head_dim) * c.attention_scale_factor);
}

torch::Tensor BertSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask_bias,
                                             const LayerPosition& position,
                                             torch::Tensor* logits_out, torch::Tensor* probs_out) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    // One fused projection for Q, K and V; the parameters keep HF's separate names.
    auto w = torch::cat({query->weight, key->weight, value->weight}, 0);  // (3C, C)
    torch::Tensor b;                                                      // (3C) or none
    if (query->bias.defined()) b = torch::cat({query->bias, key->bias, value->bias}, 0);
    auto qkv = torch::linear(x, w, b);  // (B, T, 3C)
    auto parts = qkv.chunk(3, -1);
    auto q = parts[0], k = parts[1], v = parts[2];
    const torch::Tensor q_raw = q, k_raw = k;  // for an ablated head (analysis only)
    position.offset_qk(q, k);                  // BERT-Ad's q/k slot
    // (B, T, C) -> (B, T, H, d) -> (B, H, T, d)
    q = q.view({B, T, num_heads, head_dim}).transpose(1, 2);
    k = k.view({B, T, num_heads, head_dim}).transpose(1, 2);
    v = v.view({B, T, num_heads, head_dim}).transpose(1, 2);

    // Scaled q.k^T, with RoPE's rotation and the content-dependent terms (Shaw, DeBERTa); the
    // products are one sgemm per head on the views' strides (engine/batched_matmul.h).
    auto scores = position.scores(q, k);  // (B, H, T, T)
    torch::Tensor bias = position.bias;
    if (position.ablated) {
        // `tupe ablate` (engine/position.h, PositionAblation): the ablated heads take their
        // logits, bias included, from the alternative terms.
        const LayerPosition& alt = *position.ablated;
        auto qa = q_raw, ka = k_raw;
        alt.offset_qk(qa, ka);
        qa = qa.view({B, T, num_heads, head_dim}).transpose(1, 2);
        ka = ka.view({B, T, num_heads, head_dim}).transpose(1, 2);
        auto alt_scores = alt.scores(qa, ka);
        if (alt.bias.defined()) alt_scores = alt_scores + alt.bias.unsqueeze(0);
        if (bias.defined()) scores = scores + bias.unsqueeze(0);
        scores =
            torch::where(position.ablated_heads.view({1, num_heads, 1, 1}), alt_scores, scores);
        bias = torch::Tensor();
    }
    torch::Tensor probs;
    if (!logits_out && !probs_out) {
        // Training path: bias (H, T, T) broadcast over B, mask (B, 1, 1, T) and softmax in one
        // CPU kernel with its own backward (engine/fused_ops.h; elsewhere the composition below).
        // A local layer's window (T, T) joins the bias, which the kernel takes per head.
        if (position.window.defined())
            bias = bias.defined() ? bias + position.window
                                  : position.window.unsqueeze(0).expand({num_heads, T, T});
        probs = fused_attention_softmax(scores, bias, mask_bias);  // (B, H, T, T)
    } else {
        // The analysis hook: the unfused composition, so the logits before the masks come out.
        // The positional bias (H, T, T) broadcasts over the batch; never copied to B*H*T*T.
        if (bias.defined()) scores = scores + bias.unsqueeze(0);
        if (logits_out) *logits_out = scores;
        if (mask_bias.defined()) scores = scores + mask_bias;              // (B, 1, 1, T)
        if (position.window.defined()) scores = scores + position.window;  // (T, T)
        probs = torch::softmax(scores, -1);
        if (probs_out) *probs_out = probs;
    }
    auto ctx = batched_matmul(apply_dropout(dropout, probs), v);  // (B, H, T, d)
    // (B, H, T, d) -> (B, T, H, d) -> (B, T, C)
    return ctx.transpose(1, 2).reshape({B, T, C});
}

BertOutputImpl::BertOutputImpl(int64_t in, int64_t out, const ModelConfig& c, bool with_norm)
    : pre_layernorm(c.pre_layernorm) {
    TORCH_CHECK(with_norm || c.pre_layernorm, "BertOutput: post-LN needs its LayerNorm");
    dense = register_module("dense", make_linear(in, out, c));
    if (with_norm) LayerNorm = register_module("LayerNorm", make_layer_norm(c));
    dropout = register_module("dropout", torch::nn::Dropout(c.hidden_dropout_prob));
}

torch::Tensor BertOutputImpl::forward(const torch::Tensor& h, const torch::Tensor& residual) {
    auto d = apply_dropout(dropout, dense(h));
    // Post-LN normalises the sum; pre-LN normalised the sub-layer's input instead (in BertLayer).
    if (pre_layernorm) return d + residual;
    // On CPU the residual add and the LayerNorm are one pass (engine/fused_train_ops.h).
    if (fused_training_enabled() && d.device().is_cpu() && !LayerNorm->rms &&
        LayerNorm->bias.defined())
        return fused_residual_layer_norm(d, residual, LayerNorm->weight, LayerNorm->bias,
                                         LayerNorm->eps);
    return apply_norm(LayerNorm, d + residual);
}

BertAttentionImpl::BertAttentionImpl(const ModelConfig& c, int64_t layer) {
    self = register_module("self", BertSelfAttention(c));
    // Pre-LN: output.LayerNorm normalises attention's input; ModernBERT's layer 0 has none.
    output =
        register_module("output", BertOutput(c.hidden_size, c.hidden_size, c,
                                             !c.pre_layernorm || c.attention_input_norm(layer)));
}

BertIntermediateImpl::BertIntermediateImpl(const ModelConfig& c) : ffn(c.ffn) {
    // Gated FFNs (Shazeer 2020): intermediate_size is the gated width, so the input projection
    // has twice its rows (ModernBERT's Wi); 3CF weights in the FFN instead of 2CF.
    const int64_t rows = ffn == "gelu" ? c.intermediate_size : 2 * c.intermediate_size;
    dense = register_module("dense", make_linear(c.hidden_size, rows, c));
}

torch::Tensor BertIntermediateImpl::forward(const torch::Tensor& x) {
    if (ffn == "gelu") return bert_linear_gelu(dense, x);  // erf GELU, as HF "gelu"
    // Shazeer 2020, Eq. 5-6: GEGLU(x) = GELU(xW) * xV, SwiGLU(x) = Swish_1(xW) * xV; W and V
    // are the two halves of dense, in ModernBERT's order (input, gate = Wi(x).chunk(2)).
    auto halves = dense(x).chunk(2, -1);  // (.., 2F) -> 2 x (.., F)
    auto act = ffn == "geglu" ? torch::gelu(halves[0]) : torch::silu(halves[0]);
    return act * halves[1];
}

BertLayerImpl::BertLayerImpl(const ModelConfig& c, int64_t layer)
    : pre_layernorm(c.pre_layernorm), attention_norm(c.attention_input_norm(layer)) {
    attention = register_module("attention", BertAttention(c, layer));
    intermediate = register_module("intermediate", BertIntermediate(c));
    output = register_module("output", BertOutput(c.intermediate_size, c.hidden_size, c));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask_bias,
                                     const LayerPosition& position, torch::Tensor* logits_out,
                                     torch::Tensor* probs_out) {
    auto& attn_out = attention->output;
    if (pre_layernorm) {
        // Pre-LN: x + f(LN(x)); attention.output.LayerNorm and output.LayerNorm normalise the
        // inputs of the two sub-layers. ModernBERT's layer 0 attends over x itself: the
        // embedding norm has just normalised it (Warner et al. 2024, sec. 2.1.1).
        auto h = attention->self(attention_norm ? apply_norm(attn_out->LayerNorm, x) : x, mask_bias,
                                 position, logits_out, probs_out);
        auto y = attn_out(h, x);
        return output(intermediate(apply_norm(output->LayerNorm, y)), y);
    }
    auto h = attention->self(x, mask_bias, position, logits_out, probs_out);
    auto y = attn_out(h, x);
    return output(intermediate(y), y);
}

BertEncoderImpl::BertEncoderImpl(const ModelConfig& c) {
    layer = register_module("layer", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) layer->push_back(BertLayer(c, i));
    if (c.pre_layernorm) final_layer_norm = register_module("final_layer_norm", make_layer_norm(c));
}

// ---- model ------------------------------------------------------------------------------------

BertModelImpl::BertModelImpl(const ModelConfig& config) : config_(config) {
    config_.validate();
    embeddings = register_module("embeddings", BertEmbeddings(config_));
    position = PositionEncoding(config_);
    position->attach_word_table(embeddings->word_embeddings);
    if (!embeddings->position_embeddings.is_empty())
        position->attach_input_table(embeddings->position_embeddings);
    if (position->has_parameters()) position = register_module("position_bias", position);
    encoder = register_module("encoder", BertEncoder(config_));
    init_bert_weights(*this, config_);
}

EncoderOutput BertModelImpl::forward(const torch::Tensor& input_ids,
                                     const torch::Tensor& attention_mask,
                                     const torch::Tensor& token_type_ids, bool output_attentions) {
    TORCH_CHECK(input_ids.dim() == 2, "input_ids must be (B, T), got ", input_ids.sizes());
    const int64_t T = input_ids.size(1);
    TORCH_CHECK(T >= 1, "input_ids: empty sequence");
    // Every positional term is computed once, before the layer loop (TUPE, Sec. 3.2); a learned
    // table refuses positions beyond max_position_embeddings here. In training, positions are
    // randomized when model.randomized_positions_max asks for it (Ruoss et al. 2023).
    PositionTerms terms =
        position->forward(position->positions(T, input_ids.device(), /*randomize=*/is_training()),
                          embeddings->word_embeddings->weight.scalar_type());
    auto x = embeddings(input_ids, token_type_ids, terms.input);  // (B, T, C)

    torch::Tensor mask_bias;
    if (attention_mask.defined()) {
        // (B, T) -> (B, 1, 1, T): 0 for tokens, a large negative number for padding.
        mask_bias = (1.0 - attention_mask.to(x.dtype())).view({input_ids.size(0), 1, 1, T}) * -1e9;
    }

    EncoderOutput out;
    const size_t L = encoder->layer->size();
    for (size_t i = 0; i < L; ++i) {
        torch::Tensor logits, probs;
        x = encoder->layer[i]->as<BertLayerImpl>()->forward(x, mask_bias, terms.for_layer(i),
                                                            output_attentions ? &logits : nullptr,
                                                            output_attentions ? &probs : nullptr);
        if (output_attentions) {
            out.attention_logits.push_back(logits);
            out.attention_probs.push_back(probs);
        }
    }
    if (!encoder->final_layer_norm.is_empty()) x = apply_norm(encoder->final_layer_norm, x);
    out.last_hidden_state = x;
    return out;
}

// ---- MLM head ---------------------------------------------------------------------------------

BertPredictionHeadTransformImpl::BertPredictionHeadTransformImpl(const ModelConfig& c) {
    dense = register_module("dense", make_linear(c.hidden_size, c.hidden_size, c));
    LayerNorm = register_module("LayerNorm", make_layer_norm(c));
}

torch::Tensor BertPredictionHeadTransformImpl::forward(const torch::Tensor& h) {
    return apply_norm(LayerNorm, bert_linear_gelu(dense, h));
}

BertLMPredictionHeadImpl::BertLMPredictionHeadImpl(const ModelConfig& c) {
    transform = register_module("transform", BertPredictionHeadTransform(c));
    bias = register_parameter("bias", torch::zeros({c.vocab_size}));
}

BertOnlyMLMHeadImpl::BertOnlyMLMHeadImpl(const ModelConfig& c) {
    predictions = register_module("predictions", BertLMPredictionHead(c));
}

BertForMaskedLMImpl::BertForMaskedLMImpl(const ModelConfig& config) {
    bert = register_module("bert", BertModel(config));
    cls = register_module("cls", BertOnlyMLMHead(bert->config()));
    init_bert_weights(*cls, bert->config());
}

MlmOutput BertForMaskedLMImpl::forward(const torch::Tensor& input_ids,
                                       const torch::Tensor& attention_mask,
                                       const torch::Tensor& labels, bool count_correct,
                                       bool output_attentions) {
    MlmOutput out;
    out.encoder = bert->forward(input_ids, attention_mask, {}, output_attentions);
    const auto& h = out.encoder.last_hidden_state;  // (B, T, C)
    // Logits only at masked positions: (B*T) -> M selected rows.
    auto flat_labels = labels.reshape({-1});
    auto index = (flat_labels != -100).nonzero().squeeze(1);  // (M)
    out.num_masked = index.size(0);
    auto selected = h.reshape({-1, h.size(2)}).index_select(0, index);  // (M, C)
    auto& pred = cls->predictions;
    auto t = pred->transform(selected);
    // Decoder tied to the word embeddings: (M, C) x (V, C)^T + b -> (M, V)
    out.logits = torch::linear(t, bert->embeddings->word_embeddings->weight, pred->bias);
    auto targets = flat_labels.index_select(0, index);
    if (out.num_masked > 0) {
        // log-softmax + NLL in one pass each way on CPU (engine/fused_train_ops.h); the loss is
        // fp32 (reduced-precision logits are upcast), fp64 logits keep fp64.
        out.loss = fused_cross_entropy(out.logits, targets);
    } else {
        out.loss = out.logits.sum() * 0.0;  // keeps the graph valid for an all-unmasked batch
    }
    if (count_correct && out.num_masked > 0) {
        out.num_correct = out.logits.argmax(-1).eq(targets).sum().item<int64_t>();
    }
    return out;
}

// ---- init and counting ------------------------------------------------------------------------

void init_bert_weights(torch::nn::Module& module, const ModelConfig& config) {
    torch::NoGradGuard no_grad;
    module.apply([&](torch::nn::Module& m) {
        if (auto* linear = m.as<torch::nn::LinearImpl>()) {
            linear->weight.normal_(0.0, config.initializer_range);
            if (linear->bias.defined()) linear->bias.zero_();
        } else if (auto* emb = m.as<torch::nn::EmbeddingImpl>()) {
            emb->weight.normal_(0.0, config.initializer_range);
        } else if (auto* ln = m.as<torch::nn::LayerNormImpl>()) {
            ln->weight.fill_(1.0);
            ln->bias.zero_();
        } else if (auto* norm = m.as<NormImpl>()) {
            norm->weight.fill_(1.0);
            if (norm->bias.defined()) norm->bias.zero_();
        }
    });
    if (auto* model = module.as<BertModelImpl>()) {
        auto& words = model->embeddings->word_embeddings->weight;
        if (config.pad_token_id < words.size(0)) words[config.pad_token_id].zero_();
    }
}

std::map<std::string, int64_t> parameter_groups(torch::nn::Module& module) {
    std::map<std::string, int64_t> groups{
        {"embeddings", 0}, {"positional", 0}, {"encoder", 0}, {"mlm_head", 0}, {"total", 0}};
    for (const auto& item : module.named_parameters(/*recurse=*/true)) {
        const std::string& name = item.key();
        const int64_t n = item.value().numel();
        auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
        if (has("position_bias.") || has("position_embeddings"))
            groups["positional"] += n;
        else if (has("embeddings."))
            groups["embeddings"] += n;
        else if (has("encoder."))
            groups["encoder"] += n;
        else if (has("cls."))
            groups["mlm_head"] += n;
        groups["total"] += n;
    }
    return groups;
}

}  // namespace engine
