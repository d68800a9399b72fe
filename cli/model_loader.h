// One model loader for every command that reads a model (`tupe inspect`, `analyze`, `ablate`,
// `heads`; a classifier for `tupe classify` and `tupe export`): a pretraining checkpoint (vocab.txt
// beside it), an HF BERT folder (a transformers BertForMaskedLM, BertModel or sentence-transformers
// folder: config.json + model.safetensors or pytorch_model.bin + vocab.txt,
// analysis::import_hf_bert), or init:PRESET[:SIZE] (fresh weights, seed 1). What a source lacks is
// a field here, not a branch in each command: an HF folder has no training corpus or length, a
// BertModel has no MLM head.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/hf_classifier.h"
#include "engine/bert.h"
#include "engine/config.h"
#include "engine/finetune.h"
#include "engine/tokenizer.h"

namespace cli {

/// A model to read with its tokenizer.
struct LoadedModel {
    engine::BertForMaskedLM model{nullptr};
    std::unique_ptr<engine::WordPieceTokenizer> tokenizer;
    std::string name;                ///< the spec as given
    std::string kind;                ///< "checkpoint", "hf" or "init"
    int64_t step = 0;                ///< a checkpoint's training step, else 0
    int64_t train_length = 0;        ///< data.max_seq_len of a pretraining checkpoint, else 0
    bool has_mlm_head = true;        ///< false for an HF BertModel (its head is random)
    std::vector<std::string> notes;  ///< what the HF import did (e.g. no MLM head)
    std::optional<engine::PretrainConfig> config;  ///< a pretraining checkpoint's run config
};

/// True when `path` is a folder with a config.json: an HF model, not a run folder.
bool is_hf_folder(const std::string& path);

/// Loads SPEC (see the file comment). --vocab (`vocab_flag`) overrides the vocabulary of a
/// `primary` model; a secondary one (analyze's --compare) keeps its own and falls back to
/// --vocab only when it has none; `cased` turns lower-casing off. Throws engine::InputError /
/// engine::CheckpointError naming the file, UsageError for init: without --vocab.
LoadedModel load_model(const std::string& spec, const std::string& vocab_flag, bool cased,
                       bool primary = true);

/// A fine-tuned sequence classifier with its tokenizer.
struct LoadedClassifier {
    engine::BertForSequenceClassification model{nullptr};  ///< eval mode
    analysis::ClassifierHead head;
    std::unique_ptr<engine::WordPieceTokenizer> tokenizer;
    std::string vocab_path;          ///< the vocabulary the tokenizer was read from
    std::string what;                ///< e.g. "tupe-a fine-tuned on RTE, epoch 3"
    std::vector<std::string> notes;  ///< what the HF import did
};

/// Loads a fine-tuned model: a run's finetune/JOB/model.pt (finetune.save: best; its vocabulary
/// beside it, else the run folder's vocab.txt two levels up, else the config's data.vocab) or
/// an HF sequence-classification folder (analysis::import_hf_classifier). --vocab
/// (`vocab_flag`) overrides. Throws engine::InputError / engine::CheckpointError naming the
/// file, e.g. for a pretraining checkpoint or an HF folder without a classifier.
LoadedClassifier load_classifier(const std::string& spec, const std::string& vocab_flag);

/// Throws engine::InputError, one line naming the model and `what` needs the head, when the
/// model has no MLM head (an HF BertModel or sentence-transformers folder).
void require_mlm_head(const LoadedModel& m, const std::string& what);

/// The tokens a command scores: --corpus when given (up to max_tokens stream tokens), else a
/// checkpoint's own held-out documents; an HF folder has no training corpus, so it needs
/// --corpus (engine::InputError otherwise). `text` is set to what was read, in words.
std::vector<int64_t> scored_stream(const LoadedModel& m, const std::string& corpus,
                                   int64_t max_tokens, std::string& text);

/// Tokens per window when the command was given none: a checkpoint's training length, else 128,
/// never more than the position table.
int64_t default_window_length(const LoadedModel& m);

}  // namespace cli
