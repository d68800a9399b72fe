// An MLM head fitted on a frozen encoder: for a pretrained encoder shipped without its head
// (a sentence-transformers or BertModel folder), the masked-token loss that `tupe ablate`
// scores needs one. The head (BERT's: dense, GELU, norm, the decoder tied to the frozen word
// embeddings, a bias per word) is re-initialised and trained by AdamW on the encoder's
// last hidden states at masked tokens of a text kept apart from the scored one, stopped where
// the loss on the fitting text's last tenth is lowest: a probe of what the encoder's outputs
// say about the masked word. Shapes: M masked rows, C hidden, V vocab.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/tokenizer.h"

namespace analysis {

struct MlmHeadFitOptions {
    int64_t length = 64;       ///< T, tokens per window with [CLS] and [SEP] (>= 4)
    int64_t windows = 1024;    ///< at most this many windows of the fitting text
    int64_t steps = 600;       ///< AdamW steps at most
    int64_t eval_every = 50;   ///< steps between two checks on the held-back tenth
    int64_t batch_rows = 512;  ///< masked rows per step
    double lr = 2e-3;
    double weight_decay = 0.01;
    double mask_prob = 0.15;
    uint64_t seed = 1;              ///< of the masked set, the init and the row order
    std::string source = "stream";  ///< for errors
};

struct MlmHeadFit {
    int64_t windows = 0, masked = 0;  ///< what the head was fitted on (both parts)
    int64_t held_back = 0;            ///< masked rows of the last tenth of the windows
    int64_t best_step = 0;            ///< the step whose head is kept
    /// Mean cross-entropy (nats) on the held-back rows: of the training rows' add-one
    /// log-unigram frequencies alone (start: the unigram reference), and of the kept head
    /// (end); train_loss is the kept head's on the training rows.
    double start_loss = 0, end_loss = 0, train_loss = 0;
};

/// Replaces model->cls's parameters by a head fitted on `stream` (see the file comment); the
/// encoder and the word embeddings are not changed, the model is left in eval mode. The
/// encoder runs once (eval, no gradients) over min(windows, stream / (T - 2)) windows (at
/// least 10); the head trains on the masked rows of the first nine tenths and is checked every
/// eval_every steps on the rest; the best check's head is kept. Throws engine::InputError(source,
/// ...) for a stream shorter than one window or without masked tokens, std::invalid_argument for
/// bad options.
MlmHeadFit fit_mlm_head(engine::BertForMaskedLM& model, const std::vector<int64_t>& stream,
                        const engine::Vocab& vocab, const MlmHeadFitOptions& options);

}  // namespace analysis
