// What the HF folder's two writers share (hf_import.cpp: the encoder with its MLM head;
// hf_classifier.cpp: a fine-tuned sequence classifier): the config.json object, the parameters
// under their HF names and the folder itself. Internal to analysis (not installed).
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/safetensors.h"
#include "engine/config.h"

namespace analysis::detail {

/// config.json's object for `config` (hf_config_for is its text).
nlohmann::json hf_config_json(const engine::ModelConfig& config);

/// Whether transformers' own BERT classes compute `config` (model_type "bert"), else the
/// folder needs python/tupe_hf/ (model_type "tupe").
bool hf_bert_model_type(const engine::ModelConfig& config);

/// Every parameter of `module` as (HF name, float32 CPU tensor): `prefix` + the engine's name,
/// with the per-layer tables moved to HF's places.
NamedTensors hf_named_parameters(torch::nn::Module& module, const std::string& prefix = "");

/// Writes dir/model.safetensors (`tensors`, plus the zero tables transformers' BertEmbeddings
/// needs), dir/config.json (`config_json`), dir/vocab.txt, dir/tokenizer_config.json and, for
/// model_type "tupe", python/tupe_hf/'s files. The vocabulary is checked against
/// config.vocab_size before anything is written. Throws engine::CheckpointError naming the file.
void write_hf_folder(const engine::ModelConfig& config, NamedTensors tensors,
                     const nlohmann::json& config_json, const std::string& vocab_path,
                     bool lower_case, const std::string& dir, std::vector<std::string>* notes);

}  // namespace analysis::detail
