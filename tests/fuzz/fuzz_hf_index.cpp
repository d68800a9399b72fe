// libFuzzer target for the index of a sharded Hugging Face checkpoint
// (model.safetensors.index.json, pytorch_model.bin.index.json; analysis/hf_index.h). The input
// is the file's text: parse_hf_weight_map must return a weight map or throw
// engine::CheckpointError; a map it returns names each shard once, every tensor once, and only
// file names inside the folder. Crashes, sanitizer reports, hangs and broken promises are bugs.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>

#include "analysis/hf_index.h"
#include "engine/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    analysis::HfWeightMap map;
    try {
        map = analysis::parse_hf_weight_map(text, "model.safetensors.index.json");
    } catch (const engine::CheckpointError&) {
        return 0;
    }
    if (map.shards.empty() || map.shards.size() != map.tensors.size()) __builtin_trap();
    std::set<std::string> shards, tensors;
    for (const auto& shard : map.shards) {
        if (!shards.insert(shard).second || shard.empty()) __builtin_trap();
        const std::filesystem::path p(shard);
        if (p.is_absolute()) __builtin_trap();
        for (const auto& part : p)
            if (part == "..") __builtin_trap();
        const auto found = map.tensors.find(shard);
        if (found == map.tensors.end() || found->second.empty()) __builtin_trap();
        for (const auto& t : found->second)
            if (!tensors.insert(t).second) __builtin_trap();
    }
    return 0;
}
