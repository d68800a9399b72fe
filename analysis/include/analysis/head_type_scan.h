// Head types of a model on text (issue 25, sec. 3): one forward pass per batch of windows
// [CLS] w_1 .. w_(T-2) [SEP] of a token stream with the attention maps on, every head's maps
// pooled by analysis::HeadTypeAccumulator (analysis/head_types.h, torch-free, where the scores
// and the rule are defined) and classified. `tupe heads` runs it on every stored checkpoint of
// a run, so that a type's appearance during pretraining can be dated.
// Shapes: L layers, H heads, T tokens per window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/head_types.h"
#include "engine/bert.h"
#include "engine/tokenizer.h"

namespace analysis {

struct HeadTypeScanOptions {
    /// T, tokens per window with [CLS] and [SEP] (>= 3); 0 = min(128, max_position_embeddings)
    int64_t length = 0;
    int64_t windows = 32;    ///< at most this many windows from the stream's start
    int64_t batch_size = 8;  ///< windows per forward pass
    HeadTypeThresholds thresholds;
    std::string source = "stream";  ///< for errors
};

/// One head: its pooled scores and its primary type.
struct HeadTypeRow {
    int64_t layer = 0, head = 0;
    HeadTypeScores scores;
    HeadType type = HeadType::kMixed;
};

struct HeadTypeScan {
    std::string summary;  ///< PositionDescription::summary
    std::string rule;     ///< describe(thresholds)
    int64_t length = 0, windows = 0;
    std::vector<HeadTypeRow> rows;  ///< layer-major, L x H
};

/// Scans min(windows, stream / (T - 2)) consecutive windows in eval mode without gradients (the
/// training flag is restored). The stream holds no special tokens (a corpus' token stream).
/// Throws std::invalid_argument for bad options, engine::InputError(source, ...) for a stream
/// shorter than one window or ids outside the model's vocabulary.
HeadTypeScan scan_head_types(engine::BertModel& model, const std::vector<int64_t>& stream,
                             const engine::Vocab& vocab, const HeadTypeScanOptions& options);

}  // namespace analysis
