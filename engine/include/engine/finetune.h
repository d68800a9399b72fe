// GLUE-style fine-tuning of a pretrained encoder: HF's BertForSequenceClassification (pooler on
// [CLS], dropout, linear classifier; MSE regression when num_labels = 1), length-bucketed
// batches, AdamW with linear warm-up (ratio 0.06) and decay, as in TUPE_NOTES.md ("The paper's
// setup"). Shapes: B batch, T tokens, C hidden, L num_labels.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/config.h"
#include "engine/tokenizer.h"

namespace engine {

/// One example of a (single-sentence or sentence-pair) task.
struct LabeledText {
    std::string text_a, text_b;  ///< text_b empty = single sentence.
    int64_t label = -1;          ///< Classification: class in [0, num_labels).
    float target = 0.f;          ///< Regression (num_labels = 1): the value to predict.
};

/// Fine-tuning hyper-parameters. Defaults: the paper's GLUE setup (batch 32, warm-up ratio
/// 0.06, lr from {2,3,4,5}e-5), AdamW betas (0.9, 0.98) and eps 1e-6 as fairseq's RoBERTa GLUE
/// recipe that the TUPE reference builds on.
struct FinetuneConfig {
    int64_t num_labels = 2;  ///< 1 = regression (MSE on target).
    double lr = 2e-5;
    int64_t epochs = 3;
    int64_t batch_size = 32;
    double warmup_ratio = 0.06;  ///< Share of all steps spent warming up (rounded up).
    double weight_decay = 0.01;  ///< Not applied to LayerNorm weights and biases.
    double classifier_dropout = 0.1;
    int64_t max_seq_len = 128;  ///< Tokens incl. [CLS]/[SEP]; <= max_position_embeddings.
    uint64_t seed = 1;
    double clip_norm = 1.0;       ///< 0 disables clipping.
    std::string device = "auto";  ///< cpu, cuda, cuda:N or auto.
    std::string dtype = "fp32";   ///< fp32, bf16 (autocast), auto (precision.h); fp16: CUDA.
    int64_t threads = 0;          ///< Intra-op threads, 0 = the CPUs available (threads.h).
};

class DistributedContext;

/// HF: pooler.dense; tanh(dense(h[:, 0])), the [CLS] state. (HF keeps it in BertModel as
/// bert.pooler; our BertModel has none, so it lives in the classification model.)
struct BertPoolerImpl : torch::nn::Module {
    explicit BertPoolerImpl(const ModelConfig& config);
    /// (B, T, C) -> (B, C)
    torch::Tensor forward(const torch::Tensor& hidden_states);
    torch::nn::Linear dense{nullptr};
};
TORCH_MODULE(BertPooler);

/// HF BertForSequenceClassification: bert.*, pooler.dense, dropout, classifier (C -> L).
class BertForSequenceClassificationImpl : public torch::nn::Module {
  public:
    /// The encoder and the heads, all freshly initialised (N(0, initializer_range), zero
    /// biases); call load_pretrained to start from a pretraining checkpoint.
    BertForSequenceClassificationImpl(const ModelConfig& config, int64_t num_labels = 2,
                                      double classifier_dropout = 0.1);

    /// input_ids (B, T), attention_mask (B, T) 1 = token (undefined = all 1), token_type_ids
    /// (B, T) or undefined -> logits (B, L).
    torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                          const torch::Tensor& token_type_ids = {});

    /// Copies every bert.* parameter and buffer of `pretrained` into this model's encoder
    /// (across devices if needed); `pretrained` is only read. TORCH_CHECK fails naming the
    /// tensor when the two encoders do not have the same parameters and shapes.
    void load_pretrained(BertForMaskedLM& pretrained);

    const ModelConfig& config() const { return bert->config(); }
    int64_t num_labels() const { return num_labels_; }

    BertModel bert{nullptr};
    BertPooler pooler{nullptr};
    torch::nn::Dropout dropout{nullptr};
    torch::nn::Linear classifier{nullptr};

  private:
    int64_t num_labels_;
};
TORCH_MODULE(BertForSequenceClassification);

/// A fine-tuned model as the runner saves it (finetune.save: best, engine/src/checkpoint.cpp):
/// the encoder's resolved config, the task key, the best epoch and the weights (bert.*,
/// pooler.dense.*, classifier.*).
struct FinetunedCheckpoint {
    PretrainConfig config;
    BertForSequenceClassification model{nullptr};  ///< eval mode
    std::string task;                              ///< the task's key, e.g. "RTE"
    int64_t epoch = 0;                             ///< the best epoch, 1-based
};

/// Writes `model` with its encoder's config, task and epoch to `path` atomically (temporary
/// file, then rename). Throws CheckpointError naming `path`.
void save_finetuned(const std::string& path, BertForSequenceClassification& model,
                    const PretrainConfig& encoder, const std::string& task, int64_t epoch);

/// Reads what save_finetuned wrote. Throws CheckpointError naming `path` when it is missing,
/// corrupt, of another format, or of weights that do not fit its config.
FinetunedCheckpoint load_finetuned(const std::string& path,
                                   torch::Device device = torch::Device(torch::kCPU));

/// The archive's format tag ("tupe-workbench/checkpoint/2", "tupe-finetuned-v1", ...), or ""
/// when `path` is not a readable archive with one.
std::string checkpoint_format(const std::string& path);

/// Whether `path` is a fine-tuned model (save_finetuned's format), not a pretraining checkpoint.
bool is_finetuned_checkpoint(const std::string& path);

/// Batches of indices into `lengths` for one epoch: a (seed, epoch) permutation is cut into
/// chunks of 50 batches, each chunk sorted by length and cut into batches of batch_size, and
/// the batch order shuffled. Every index appears exactly once; only the last batch may be
/// smaller. Deterministic in (seed, epoch) with every standard library.
std::vector<std::vector<size_t>> bucketed_batches(const std::vector<int64_t>& lengths,
                                                  int64_t batch_size, uint64_t seed,
                                                  uint64_t epoch);

/// The state after one epoch of fine-tuning.
struct EpochResult {
    int64_t epoch = 0;      ///< 1-based.
    double train_loss = 0;  ///< Mean training loss of the epoch, per example.
    /// Per dev set, per example in its order: the predicted label index (as a double) or, for
    /// regression, the predicted value.
    std::vector<std::vector<double>> predictions;
    double seconds = 0;  ///< Wall time of the epoch, evaluation included.
};

struct FinetuneResult {
    std::vector<EpochResult> epochs;  ///< Completed epochs only.
    bool stopped = false;             ///< Ended by the stop flag.
};

struct FinetuneCallbacks {
    /// After every optimizer step: steps done (1-based), all steps of the run, the step's loss.
    std::function<void(int64_t step, int64_t total_steps, double loss)> on_step;
    std::function<void(const EpochResult&)> on_epoch;  ///< After each dev evaluation.
    /// After on_epoch: that epoch's model (eval mode, on its device), e.g. to copy the best
    /// epoch's weights. Must not change the model.
    std::function<void(const EpochResult&, BertForSequenceClassification&)> on_epoch_model;
    std::function<void(const std::string& message)> on_message;  ///< Informational lines.
    const std::atomic<bool>* stop = nullptr;                     ///< Checked before every step.
};

/// Fine-tunes a copy of `pretrained` (which is not modified) on `train` and predicts every dev
/// set after every epoch. Texts are encoded once as [CLS] a [SEP] (b [SEP]) of at most
/// max_seq_len tokens; batches are length-bucketed and padded to their longest sequence.
/// Throws std::invalid_argument for a bad config, empty train set, or a label out of range
/// (naming the example index); TrainingDiverged for a non-finite loss (naming the step).
///
/// Data-parallel with `dist` (every rank calls this with the same data and config): each
/// global batch is split into contiguous per-rank shards, each rank's loss is its shard's sum
/// over the global batch size, the gradients are summed over ranks in buckets during backward
/// (GradientReducer), so every rank takes the single-process step on the same global batch.
/// Rank 0's weights are broadcast first; dev predictions are computed batch-by-batch across
/// ranks and summed, so every rank returns all of them. Stop and non-finite losses are agreed
/// on by all ranks at every step. Dropout draws from a per-rank stream.
FinetuneResult finetune(BertForMaskedLM& pretrained, const WordPieceTokenizer& tokenizer,
                        const std::vector<LabeledText>& train,
                        const std::vector<std::vector<LabeledText>>& dev_sets,
                        const FinetuneConfig& config, const FinetuneCallbacks& callbacks = {},
                        DistributedContext* dist = nullptr);

/// Predictions of `model` (in eval mode, on its parameters' device) for each of `sets`, as
/// EpochResult::predictions: encoded with config.max_seq_len, length-sorted batches of
/// config.batch_size, config.dtype ("auto" as in finetune). Labels of `sets` are not read.
std::vector<std::vector<double>> predict_sets(BertForSequenceClassification& model,
                                              const WordPieceTokenizer& tokenizer,
                                              const std::vector<std::vector<LabeledText>>& sets,
                                              const FinetuneConfig& config);

}  // namespace engine
