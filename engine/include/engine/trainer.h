// MLM pretraining: AdamW with linear warm-up and decay, clipping, accumulation, validation,
// optional autocast, atomic checkpoints and exact resume. Reports through plain callbacks and
// a stop flag, so the CLI (progress bar) and the Qt app (signals) are thin faces over it.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/config.h"
#include "engine/corpus.h"

namespace engine {

/// Reported after every optimizer step.
struct StepReport {
    int64_t step = 0;  ///< Steps done (1-based after the first step).
    int64_t total_steps = 0;
    double loss = 0;  ///< Training MLM loss of this step.
    double lr = 0;
    double grad_norm = 0;          ///< Before clipping.
    double seconds = 0;            ///< Wall time of this step.
    double tokens_per_second = 0;  ///< Real (non-padding) tokens, this step.
    int64_t tokens_seen = 0;       ///< Cumulative real tokens.
    double elapsed = 0;            ///< Seconds since this process started training.
};

/// Validation result at a step.
struct EvalReport {
    int64_t step = 0;
    double loss = 0;      ///< Mean MLM cross-entropy over all masked validation tokens.
    double accuracy = 0;  ///< Share of masked tokens predicted exactly.
    int64_t masked_tokens = 0;
};

struct TrainCallbacks {
    std::function<void(const StepReport&)> on_step;
    std::function<void(const EvalReport&)> on_eval;
    std::function<void(const std::string& path, int64_t step)> on_checkpoint;
    std::function<void(const std::string& message)> on_message;  ///< Informational lines.
    const std::atomic<bool>* stop = nullptr;  ///< Checked between steps; a checkpoint is written.
    /// Steps at which a checkpoint is also kept as out_dir/checkpoint-STEP.pt (the experiment
    /// runner fine-tunes from these); on_checkpoint is called for them too.
    std::vector<int64_t> snapshot_steps;
};

/// out_dir/checkpoint-STEP.pt: a snapshot kept at one of TrainCallbacks::snapshot_steps.
std::string snapshot_path(const std::string& out_dir, int64_t step);

struct TrainResult {
    int64_t final_step = 0;
    int64_t resumed_from = 0;       ///< Step of the checkpoint resumed from (0 = fresh).
    bool stopped = false;           ///< Ended by the stop flag before `steps`.
    std::vector<EvalReport> evals;  ///< Every validation, including those before a resume.
    std::string checkpoint;         ///< Path of the last checkpoint written.
    CorpusFloor floor;              ///< The validation targets' floor (also out_dir/floor.txt).
};

/// File names inside a run's out_dir.
std::string checkpoint_path(const std::string& out_dir);  ///< out_dir/checkpoint.pt
std::string metrics_path(const std::string& out_dir);     ///< out_dir/metrics.tsv

/// Resolves "auto" / "cpu" / "cuda[:N]"; throws std::invalid_argument for an unusable device.
torch::Device resolve_device(const std::string& name);

class DistributedContext;

/// Runs (or resumes, when out_dir holds a checkpoint of the same config) MLM pretraining.
/// Throws InputError for bad data files, CheckpointError for a checkpoint that does not match,
/// TrainingDiverged for a non-finite loss (the last good checkpoint is left untouched).
///
/// With `dist` (one rank of a data-parallel group; see distributed.h), the global batch of
/// step s is the one-process batch (samples s*B .. s*B+B-1); rank r trains on its contiguous
/// B/W of it, gradients are summed over ranks, and the update equals one process's. Rank 0
/// alone writes the run directory, checkpoints and metrics.tsv and evaluates (result.evals
/// is empty on the other ranks); out_dir must be shared by all ranks for a resume. Dropout
/// draws its own stream per rank and step. Throws DistributedError when a peer fails.
TrainResult pretrain(const PretrainConfig& config, const TrainCallbacks& callbacks = {},
                     DistributedContext* dist = nullptr);

/// A loaded checkpoint: its config, the model in eval mode and where training stood.
struct LoadedCheckpoint {
    PretrainConfig config;
    BertForMaskedLM model{nullptr};
    int64_t step = 0;
    std::vector<EvalReport> evals;
};

/// Loads a checkpoint written by pretrain(). Throws CheckpointError naming the file when it is
/// missing, truncated, not a checkpoint, or of parameters that do not fit its own config.
LoadedCheckpoint load_checkpoint(const std::string& path,
                                 torch::Device device = torch::Device(torch::kCPU));

/// The model's weights as name -> tensor (HF names), for torch::pickle_save / torch.load.
std::vector<std::pair<std::string, torch::Tensor>> named_weights(BertForMaskedLM& model);

}  // namespace engine
