// Analytic cost of one MLM training step (engine::mlm_train_step: forward, backward, clipping,
// AdamW), without LibTorch: the FLOPs per step and the memory the step keeps alive at its peak,
// per positional scheme, from the model config and the batch's shape. `tupe bench` reports
// achieved FLOP/s and the RSS ratio against these; the runner and the app can size a run with
// them before building anything.
//
// Shapes: B batch, T tokens per sequence, C hidden, H heads, d = C / H, F FFN width,
// V vocabulary, L layers, M masked positions (the MLM targets of the batch), N = B * T,
// S = B * H * T * T (one attention-probability tensor), P parameters.
#pragma once

#include <cstdint>

#include "engine/config.h"

namespace engine {

/// Forward FLOPs of one step, by part, and the training step's total.
///
/// Counted from the shapes, 2 FLOPs per multiply-add, matmuls only: embedding look-ups,
/// LayerNorm, softmax, GELU, dropout, RoPE's rotation, bias look-ups and the optimizer are
/// O(N*C) or O(S) element-wise work and not counted.
///   encoder     per layer: QKV projection 2*N*C*3C, scores 2*N*T*C (= 2*B*H*T*T*d),
///               context 2*N*T*C, attention output 2*N*C*C, FFN 2*N*C*F * 2 (in and out;
///               * 3 for a gated FFN, model.ffn geglu or swiglu, whose input projection is
///               2F wide). Local layers (model.local_window) count every score: the window
///               is a mask on the full T x T logits.
///   positional  the scheme's own matmuls: the sum of its rows' `flops` (SchemeRow,
///               core/engine/src/position_scheme.cpp, where each term is written out; "groups"
///               = 1 when shared_pos_term, else L). E.g. TUPE's p'U^Q and p'U^K over the T+1
///               rows and its (H, T+1, T+1) correlations, 2*2*(T+1)*C*C + 2*(T+1)^2*C per
///               group; 0 for the input tables, NoPE, T5, ALiBi, KERPLE and RoPE.
///   head        the MLM head at the M masked positions only (what the engine computes):
///               transform 2*M*C*C, decoder 2*M*C*V.
/// A training step costs forward x 3: the backward pass computes two matmuls of the forward's
/// size per forward matmul (the gradients of both operands).
struct StepFlops {
    double encoder = 0;     ///< the L encoder layers
    double positional = 0;  ///< the scheme's own matmuls (0 for most schemes)
    double head = 0;        ///< the MLM head at the masked positions
    double forward() const { return encoder + positional + head; }
    double step() const { return 3.0 * forward(); }
};

/// FLOPs of one training step of `config` on `batch` sequences of `seq_len` tokens with
/// `masked_tokens` MLM targets in all. Throws std::invalid_argument (describe_position) when
/// the config's scheme is inconsistent.
StepFlops count_step_flops(const ModelConfig& config, int64_t batch, int64_t seq_len,
                           int64_t masked_tokens);

/// What one training step keeps alive at its peak, in bytes, by part.
///
///   params       P*4 fp32 master weights; under bf16 autocast also the bf16 weight copies
///                autocast caches for the step, P*2.
///   grads        P*4.
///   optimizer    AdamW's exp_avg and exp_avg_sq, 2*P*4.
///   activations  what autograd saves for backward, with e = 4 bytes (fp32) or 2 (bf16):
///     per post-LN layer
///       matmul inputs: x, the QKV buffer (3NC), q*scale, the dropped probabilities (S), the
///         merged context, the attention block output y, the GELU output (NF):
///         (7NC + S + NF) * e
///       softmax output S*e, GELU input NF*e (a gated FFN also its gate half and the gated
///       product, 2NF*e), the two LayerNorm inputs 2NC*4,
///       dropout masks (S + 2NC) * 1 byte;
///     embeddings: the LayerNorm input N*C*4 and a dropout mask N*C bytes;
///     MLM head: 5 (M, C) tensors *4, logits M*V*e, the fp32 log-softmax M*V*4 (plus the fp32
///       copy of bf16 logits, M*V*4), and at the start of backward the logits' gradient M*V*4;
///     the backward of one layer holding a few S-sized gradients at once: 2*S*4.
///   positional   the schemes whose positional terms are tensors of their own: the sum of
///                their rows' `memory` (position_scheme.cpp, each term written out there;
///                Shaw's relative keys and the q their product saves, DeBERTa's products
///                against every relative row, FIRE's MLP activations, KERPLE's kernel, ...).
///                Every other scheme's positional tensors are (H, T, T) or smaller: not counted.
/// Not counted: the input batch, the (H, T, T) positional terms, allocator slack and what the
/// process held before the model was built (libraries, BLAS buffers). engine::tensor_memory
/// counts the same tensors in a real step; tests/engine/test_tensor_memory.cpp holds the
/// estimate within 20% of that count for every preset.
struct StepMemory {
    double params = 0;
    double grads = 0;
    double optimizer = 0;
    double activations = 0;
    double positional = 0;
    double total() const { return params + grads + optimizer + activations + positional; }
};

/// Peak memory of one training step of `config` with `n_params` parameters (the model's own
/// count: every scheme's tables included) on `batch` sequences of `seq_len` tokens with
/// `masked_tokens` MLM targets, in fp32 or under bf16 autocast (`bf16`).
StepMemory estimate_step_memory(const ModelConfig& config, int64_t n_params, int64_t batch,
                                int64_t seq_len, int64_t masked_tokens, bool bf16);

}  // namespace engine
