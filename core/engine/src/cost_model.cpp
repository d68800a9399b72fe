// Analytic FLOPs and peak memory of a training step (see cost_model.h for every term; each
// positional scheme's own terms are in its row, engine/position_scheme.h).
#include "engine/cost_model.h"

#include "engine/position_scheme.h"

namespace engine {

namespace {

// The positional terms of the config's rows: their `flops` or `memory`, summed.
double scheme_terms(const ModelConfig& c, int64_t B, int64_t T, bool bf16,
                    double (*SchemeRow::*term)(const CostShape&)) {
    describe_position(c);  // validates the combination (cost_model.h: throws)
    const double H = static_cast<double>(c.num_attention_heads),
                 C = static_cast<double>(c.hidden_size),
                 L = static_cast<double>(c.num_hidden_layers);
    const CostShape shape{c,
                          static_cast<double>(B),
                          static_cast<double>(T),
                          static_cast<double>(B * T),
                          C,
                          H,
                          C / H,
                          L,
                          c.shared_pos_term ? 1.0 : L,
                          bf16 ? 2.0 : 4.0,
                          2.0 * static_cast<double>(relative_distance_clip(c)),
                          bf16};
    double sum = 0;
    for (Scheme id : active_schemes(c))
        if (const auto f = scheme_row(id).*term) sum += f(shape);
    return sum;
}

}  // namespace

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
    f.positional = scheme_terms(c, B, T, /*bf16=*/false, &SchemeRow::flops);
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
    est.positional = scheme_terms(c, B, T, bf16, &SchemeRow::memory);
    return est;
}

}  // namespace engine
