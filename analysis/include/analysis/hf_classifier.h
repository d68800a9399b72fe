// A fine-tuned sequence classifier (engine::BertForSequenceClassification, finetune.h) as an HF
// folder, both ways: what transformers' AutoModelForSequenceClassification loads
// (BertForSequenceClassification, or python/tupe_hf's TupeForSequenceClassification through
// config.json's auto_map) with the task's label names, and a folder transformers saved from a
// BertForSequenceClassification read back with its pooler and classifier; and one text (pair)
// through a classifier, what `tupe classify` prints. Shapes: T tokens, L labels.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/finetune.h"
#include "engine/tokenizer.h"

namespace analysis {

/// The task a classifier was fine-tuned on and its label names: config.json's
/// finetuning_task, id2label and problem_type.
struct ClassifierHead {
    std::string task;                 ///< GLUE folder name ("RTE", "STS-B"), "" when unknown
    std::vector<std::string> labels;  ///< one per logit; {"score"} for a regression
    bool regression = false;          ///< one logit, read as the predicted value (STS-B)
};

/// The head of a workbench fine-tuning of `task_key` (analysis/tasks.h) with `num_labels`
/// logits: the registry's label strings (TSV order, which is the logits' order), "score" for
/// a regression, LABEL_0 ... (transformers' default) for a task the registry does not know.
ClassifierHead classifier_head_for(const std::string& task_key, int64_t num_labels);

/// config.json for a sequence classifier: hf_config_for's keys with architectures
/// BertForSequenceClassification (model_type "bert") or TupeForSequenceClassification
/// (model_type "tupe"), id2label / label2id (hence num_labels), problem_type
/// ("single_label_classification" or "regression") and finetuning_task.
std::string hf_classifier_config_for(const engine::ModelConfig& config, const ClassifierHead& head);

/// Writes `model` as an HF folder (export_hf_bert's files, hf_classifier_config_for's
/// config.json): the encoder under bert.*, the pooler as bert.pooler.dense.*, the classifier
/// as classifier.*, float32. Throws engine::CheckpointError naming the file; `notes` as
/// export_hf_bert's.
void export_hf_classifier(engine::BertForSequenceClassification& model, const ClassifierHead& head,
                          const std::string& vocab_path, bool lower_case, const std::string& dir,
                          std::vector<std::string>* notes = nullptr);

/// Whether dir/config.json's architectures name a sequence classifier
/// (*ForSequenceClassification); false when the file is absent or has no architectures.
bool hf_folder_is_classifier(const std::string& dir);

/// A sequence classifier read from an HF folder.
struct HfClassifier {
    engine::BertForSequenceClassification model{nullptr};  ///< eval mode, float32
    ClassifierHead head;
};

/// Reads a folder transformers saved from a BertForSequenceClassification (or an
/// export_hf_classifier folder): the encoder as import_hf_bert reads it, bert.pooler.dense.*
/// and classifier.*; the label count from classifier.weight's rows, the names from id2label
/// when it has one per row (else LABEL_i), regression when problem_type says so or there is
/// one label. Throws engine::CheckpointError naming the file for a missing pooler or
/// classifier tensor or a mis-shaped one.
HfClassifier import_hf_classifier(const std::string& dir,
                                  std::vector<std::string>* notes = nullptr);

/// One text, or a pair, through a classifier, encoded as fine-tuning encodes it
/// ([CLS] a [SEP] (b [SEP]), segment ids, at most max_position_embeddings tokens).
struct Classification {
    std::vector<std::string> tokens;
    std::vector<double> logits;         ///< (L)
    std::vector<double> probabilities;  ///< softmax of the logits; empty for a regression
};

Classification classify_text(engine::BertForSequenceClassification& model,
                             const engine::WordPieceTokenizer& tokenizer, const std::string& text_a,
                             const std::string& text_b = "");

}  // namespace analysis
