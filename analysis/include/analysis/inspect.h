// Attention inspection of one text: tokenise, run the encoder once with attention maps on, and
// keep every layer's pre-softmax logits (all positional terms included, TUPE Eq. 6/7) and
// softmax probabilities, or write them out as .npy for NumPy and the app.
// Shapes: L layers, H heads, T tokens ([CLS] ... [SEP] included).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/tokenizer.h"

namespace analysis {

/// The attention of one encoded text, on the CPU, batch dimension removed.
struct Inspection {
    std::vector<std::string> tokens;    ///< The wordpieces, [CLS] and [SEP] included (T of them).
    torch::Tensor input_ids;            ///< (T) int64
    torch::Tensor token_type_ids;       ///< (T) int64
    std::vector<torch::Tensor> logits;  ///< Per layer, (H, T, T) float32, before softmax.
    std::vector<torch::Tensor> probs;   ///< Per layer, (H, T, T) float32, rows sum to 1.
};

/// Encodes text_a (and text_b as the second segment when non-empty) and runs one forward pass
/// of model->bert in eval mode without gradients (the model's training flag is restored
/// afterwards). Throws engine::InputError("--text", ...) when the text needs more tokens than
/// the model's position table (max_position_embeddings): nothing is truncated silently.
Inspection inspect_text(engine::BertForMaskedLM& model, const engine::WordPieceTokenizer& tokenizer,
                        const std::string& text_a, const std::string& text_b = {});

/// Creates out_dir and writes tokens.txt (one token per line), input_ids.npy and
/// token_type_ids.npy (int64, T) and, for every layer L counted from 0, layerL_logits.npy and
/// layerL_probs.npy (float32, H x T x T). Throws engine::InputError naming the directory or file
/// on failure.
void write_inspection(const Inspection& inspection, const std::string& out_dir);

/// The softmax probabilities in the layout bertviz's head_view / model_view take, as JSON text:
/// {"tokens": [T], "attention": L x H x T x T nested lists (rows sum to 1), "token_type_ids": [T],
/// "layers": L, "heads": H, "model": model, "variant": variant}. Floats are written with the
/// shortest digits that read back as the same float32. Python opens it with
/// `head_view([torch.tensor(a).unsqueeze(0) for a in d["attention"]], d["tokens"])`.
std::string bertviz_json(const Inspection& inspection, const std::string& model,
                         const std::string& variant);

/// A self-contained HTML page holding bertviz_json's text in
/// <script type="application/json" id="attention"> (every '<', '>' and '&' escaped as \u00XX so
/// no token can close the element) and a note with the Python that opens it with bertviz.
/// No bertviz code is embedded.
std::string bertviz_html(const Inspection& inspection, const std::string& model,
                         const std::string& variant);

/// Writes bertviz_html to `path` when it ends in ".html" or ".htm", else bertviz_json. Creates
/// the parent directory; throws engine::InputError(path, ...) on failure.
void write_bertviz(const Inspection& inspection, const std::string& model,
                   const std::string& variant, const std::string& path);

}  // namespace analysis
