// The index of a sharded Hugging Face checkpoint (transformers' model.safetensors.index.json and
// pytorch_model.bin.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}}), parsed
// without reading the shards; analysis/hf_import.cpp reads the shards it names. No torch and no
// JSON library in this header.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

namespace analysis {

/// An index's weight map, grouped by shard.
struct HfWeightMap {
    /// The shard files, each once, in the order the weight map first names them.
    std::vector<std::string> shards;
    /// shard -> the tensors the weight map places in it, in the weight map's order.
    std::unordered_map<std::string, std::vector<std::string>> tensors;
};

/// Parses an index's text (`path` only names it in errors). Throws engine::CheckpointError(path,
/// ...) for malformed JSON, a missing, empty or non-object "weight_map", a shard that is not a
/// string, and a shard that is not a file inside the folder (empty, absolute, or with a "..").
HfWeightMap parse_hf_weight_map(const std::string& text, const std::string& path);

}  // namespace analysis
