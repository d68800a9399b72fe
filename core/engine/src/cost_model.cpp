// Analytic FLOPs and peak memory of a training step (see cost_model.h for every term).
#include "engine/cost_model.h"

#include "engine/position_scheme.h"

namespace engine {

StepFlops count_step_flops(const ModelConfig& c, int64_t B, int64_t T, int64_t M) {
    const double N = static_cast<double>(B * T), C = static_cast<double>(c.hidden_size),
                 F = static_cast<double>(c.intermediate_size),
                 V = static_cast<double>(c.vocab_size),
                 L = static_cast<double>(c.num_hidden_layers), t = static_cast<double>(T);
    // A gated FFN (model.ffn geglu, swiglu) projects to 2F before the gate: three C x F
    // matmuls instead of two. A local layer still computes every score (the window masks).
    const double ffn_matmuls = c.ffn == "gelu" ? 2.0 : 3.0;
    StepFlops f;
    f.encoder =
        L * (2 * N * C * 3 * C + 2 * 2 * N * t * C + 2 * N * C * C + ffn_matmuls * 2 * N * C * F);
    const double groups = c.shared_pos_term ? 1.0 : L;
    const auto scheme = describe_position(c);
    const double k2 =
        2.0 * static_cast<double>(c.max_relative_distance > 0 ? c.max_relative_distance
                                                              : c.max_position_embeddings - 1);
    if (scheme.untied)
        f.positional = groups * (2 * 2 * (t + 1) * C * C + 2 * (t + 1) * (t + 1) * C);
    else if (scheme.qk_offsets)
        f.positional = groups * 2 * 2 * t * C * C;
    if (scheme.relative == "deberta")  // Q_r, K_r per group; c2p and p2c against 2k rows
        f.positional = groups * 2 * 2 * k2 * C * C + L * 2 * 2 * N * k2 * C;
    if (scheme.relative == "shaw" || scheme.relative == "shaw_key_query")  // q.r (and k.r)
        f.positional = L * (scheme.relative == "shaw" ? 1 : 2) * 2 * N * t * C;
    if (scheme.relative == "fire")  // the MLP 1 -> 32 -> H at every (i, j), per group
        f.positional = groups * t * t * 2 * 32 * (1 + static_cast<double>(c.num_attention_heads));
    f.head = 2 * static_cast<double>(M) * C * C + 2 * static_cast<double>(M) * C * V;
    return f;
}

StepMemory estimate_step_memory(const ModelConfig& c, int64_t n_params, int64_t B, int64_t T,
                                int64_t M, bool bf16) {
    const double P = static_cast<double>(n_params), N = static_cast<double>(B * T),
                 C = static_cast<double>(c.hidden_size),
                 F = static_cast<double>(c.intermediate_size),
                 V = static_cast<double>(c.vocab_size),
                 L = static_cast<double>(c.num_hidden_layers),
                 S = static_cast<double>(B * c.num_attention_heads * T * T),
                 m = static_cast<double>(M);
    const double e = bf16 ? 2.0 : 4.0;
    StepMemory est;
    est.params = P * 4 + (bf16 ? P * 2 : 0.0);
    est.grads = P * 4;
    est.optimizer = 2 * P * 4;
    // A gated FFN also keeps the gate's half of the 2F projection and the gated product.
    const double gated = c.ffn == "gelu" ? 0.0 : 2 * N * F * e;
    const double layer = (7 * N * C + S + N * F) * e + S * e + N * F * e + gated + 2 * N * C * 4 +
                         (S + 2 * N * C) * 1;
    const double head =
        5 * m * C * 4 + m * V * e + m * V * 4 + (bf16 ? m * V * 4 : 0.0) + m * V * 4;
    est.activations = L * layer + N * C * 4 + N * C + head + 2 * S * 4;
    // The schemes whose positional terms are tensors of their own (cost_model.h).
    const auto scheme = describe_position(c);
    const double t = static_cast<double>(T), H = static_cast<double>(c.num_attention_heads),
                 d = C / H, groups = c.shared_pos_term ? 1.0 : L,
                 BHT = static_cast<double>(B * c.num_attention_heads * T);
    if (scheme.relative == "shaw" || scheme.relative == "shaw_key_query")
        est.positional = groups * t * t * d * 4 + (bf16 ? L * t * t * d * e : 0.0) +
                         L * (scheme.relative == "shaw" ? 1.0 : 3.0) * N * C * e +
                         (scheme.relative == "shaw" ? 0.0 : t * t * d * 4);
    if (scheme.relative == "deberta") {
        const double k2 =
            2.0 * static_cast<double>(c.max_relative_distance > 0 ? c.max_relative_distance
                                                                  : c.max_position_embeddings - 1);
        est.positional = L * (2 * BHT * k2 * e + N * C * e) + BHT * k2 * 4;
    }
    if (scheme.relative == "kerple_log" || scheme.relative == "kerple_power")
        est.positional = groups * 2 * H * t * t * 4;
    if (scheme.relative == "fire")
        est.positional = groups * t * t * ((32 + H) * e + 4 * 4) + t * t * 32 * 4;
    return est;
}

}  // namespace engine
