// Causal positional ablation (issue 25, sec. 1): which heads' positional terms the model uses to
// predict. For every layer and head, the change in masked-token loss on held-out text when
// that head's positional contribution is removed (engine::PositionAblation), the same masked
// tokens each time (extrapolate.h's stream_masked), with a bootstrap interval over the text's
// windows; then every head of every layer at once. Schemes whose positions enter at the input
// (learned and sinusoidal tables) have no per-head contribution: only the whole-model row.
//
// A large positional share (properties.h) says a head's logits vary with position; a large
// delta loss says the model's predictions need that variation. The report carries both, per
// head, and their Spearman correlation: is share a proxy for use?
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/position.h"
#include "engine/tokenizer.h"

namespace analysis {

struct AblationOptions {
    /// T, tokens per window with [CLS] and [SEP] (>= 4); 0 = min(128, max_position_embeddings)
    int64_t length = 0;
    int64_t windows = 256;   ///< at most this many windows from the stream's start
    int64_t batch_size = 8;  ///< windows per forward pass
    engine::PositionAblation::Mode mode = engine::PositionAblation::Mode::kZero;
    /// kPatch's donor: another model's position module of the same scheme and shape (its
    /// terms replace the ablated head's; PositionEncodingImpl::set_patch_source checks the fit
    /// and throws std::invalid_argument naming what differs).
    std::shared_ptr<engine::PositionEncodingImpl> patch_source;
    uint64_t seed = 1;  ///< of the masked set, the shuffles and the bootstrap
    double mask_prob = 0.15;
    int64_t resamples = 2000;  ///< bootstrap resamples of the windows
    /// Also measure each head's positional share (properties.h) on the same windows.
    bool with_share = true;
    std::string source = "stream";  ///< for errors
};

/// One ablation: layer and head (-1 = every layer / every head), the loss with it, its change
/// from the unablated loss (nats, mean over the same masked tokens) and the 95% percentile
/// bootstrap interval of that change over windows.
struct AblationRow {
    int64_t layer = -1, head = -1;
    double loss = 0, delta_loss = 0, ci_lo = 0, ci_hi = 0;
    /// The head's positional share (properties.h, variance share of Delta_pos); NaN for the
    /// whole-model row or without with_share.
    double positional_share = 0;
};

struct AblationReport {
    std::string summary;  ///< PositionDescription::summary
    std::string mode;     ///< "zero", "mean" or "shuffle"
    /// What was removed: "per head: ..." or "input table: whole model only", in words.
    std::string scope;
    int64_t length = 0, windows = 0, masked = 0;
    double loss = 0;                ///< the unablated windows
    std::vector<AblationRow> rows;  ///< per head (layer-major), then the whole-model row
    /// Spearman correlation (metrics.h) of positional share and delta loss over the per-head
    /// rows whose share is defined; NaN with fewer than 3 such heads, without shares, or when
    /// either has no spread (NoPE).
    double share_use_spearman = 0;
};

/// Runs every ablation on min(windows, stream / (T - 2)) windows in eval mode without
/// gradients; the model's ablation switch and training flag are restored, also on a throw.
/// Throws std::invalid_argument for bad options, engine::InputError(source, ...) for a stream
/// shorter than one window, ids outside the vocabulary, or no masked token.
AblationReport positional_ablation(engine::BertForMaskedLM& model,
                                   const std::vector<int64_t>& stream, const engine::Vocab& vocab,
                                   const AblationOptions& options);

}  // namespace analysis
