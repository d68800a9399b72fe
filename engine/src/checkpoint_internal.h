// The pretraining checkpoint file as the trainer writes and resumes it: save, read and check,
// restore into a model and an optimizer, and an atomic copy for snapshots. The format itself is
// checkpoint.cpp; the public face (checkpoint_path, load_checkpoint) is engine/trainer.h.
// Internal to the engine (not installed).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/config.h"
#include "engine/trainer.h"

namespace engine::detail {

/// A checkpoint as read and checked, before its archives are loaded into a model and an
/// optimizer.
struct RawCheckpoint {
    PretrainConfig config;
    int64_t step = 0, tokens_seen = 0;
    std::vector<EvalReport> evals;
    torch::Tensor rng;
    torch::serialize::InputArchive model, optimizer;
    /// 2: AdamW's state by parameter position (save_checkpoint); 1: LibTorch's own optimizer
    /// archive, keyed by the parameters' addresses (checkpoints written before).
    int format = 2;
};

/// Writes `archive` to `path` through `path`.tmp and a rename (fsynced first), so `path` is the
/// old file or the new one, never half; a failure throws CheckpointError naming `path`: "cannot
/// write the <what>: <reason><on_failure>".
void write_archive_atomically(const std::string& path, torch::serialize::OutputArchive& archive,
                              const std::string& what, const std::string& on_failure = "");

/// Writes the config, where training stands, the CPU RNG (dropout's), the model and the
/// optimizer to `path`, atomically (temporary file, then rename).
void save_checkpoint(const std::string& path, const PretrainConfig& config, BertForMaskedLM& model,
                     torch::optim::AdamW& optimizer, int64_t step, int64_t tokens_seen,
                     const std::vector<EvalReport>& evals);

/// Reads a checkpoint after checking its zip CRCs and format tag. Throws CheckpointError naming
/// `path` when it is missing, corrupt, truncated, not a checkpoint, or lacks an entry.
RawCheckpoint read_checkpoint(const std::string& path, torch::Device device);

/// Loads the checkpoint's weights into `model`; throws CheckpointError when they do not fit.
void load_model_weights(const std::string& path, BertForMaskedLM& model,
                        torch::serialize::InputArchive& archive);

/// Restores a resume: the weights, the optimizer state and the CPU RNG state of `raw`. Throws
/// CheckpointError naming `path` when the weights or the optimizer state do not fit.
void restore_checkpoint(const std::string& path, RawCheckpoint& raw, BertForMaskedLM& model,
                        torch::optim::AdamW& optimizer);

/// Copies the checkpoint `from` to `to` through a temporary file, so `to` is complete or absent.
void copy_checkpoint(const std::string& from, const std::string& to);

}  // namespace engine::detail
