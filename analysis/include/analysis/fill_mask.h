// What an MLM predicts at each [MASK] of a sentence: the top K vocabulary entries with their
// natural-log probabilities (log-softmax of the MLM head's logits), for `tupe fill-mask` and the
// HF export checks (transformers' AutoModelForMaskedLM on an export gives the same numbers).
// Shapes: T tokens ([CLS] ... [SEP]), V vocabulary entries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/tokenizer.h"

namespace analysis {

/// One candidate token at a masked position.
struct MaskCandidate {
    std::string token;
    int64_t id = 0;
    double logprob = 0;  ///< natural log, fp32 log-softmax over the V entries
};

/// The candidates at one [MASK], best first.
struct MaskPrediction {
    int64_t position = 0;  ///< index in the encoded sequence ([CLS] is 0)
    std::vector<MaskCandidate> top;
};

struct FillMaskResult {
    std::vector<std::string> tokens;  ///< the encoded sequence, [CLS] and [SEP] included
    std::vector<MaskPrediction> masks;
};

/// Encodes `text` as [CLS] text [SEP] with every literal "[MASK]" the mask token (the pieces
/// between them tokenized as usual, as BertTokenizer splits on its special tokens), runs the
/// encoder and the MLM head once (eval, no gradients; the training flag is restored) and keeps
/// the top_k entries at each [MASK]. Throws engine::InputError("--text", ...) without a [MASK]
/// or when the text needs more tokens than max_position_embeddings, and
/// std::invalid_argument for top_k < 1.
FillMaskResult fill_mask(engine::BertForMaskedLM& model,
                         const engine::WordPieceTokenizer& tokenizer, const std::string& text,
                         int64_t top_k);

/// {"masks": [{"position": i, "top": [{"token": t, "id": n, "logprob": x}, ...]}, ...]},
/// logprobs with 17 significant digits (they read back to the same double).
std::string fill_mask_json(const FillMaskResult& result);

}  // namespace analysis
