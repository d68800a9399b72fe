// The sharded Hugging Face checkpoint index (see hf_index.h).
#include "analysis/hf_index.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/errors.h"

namespace analysis {

namespace fs = std::filesystem;

HfWeightMap parse_hf_weight_map(const std::string& text, const std::string& path) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {
        throw engine::CheckpointError(path, std::string("malformed JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() ||
        j["weight_map"].empty())
        throw engine::CheckpointError(path, "no \"weight_map\" object of tensor -> shard file");
    HfWeightMap out;
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
        if (!shard.is_string())
            throw engine::CheckpointError(
                path, "weight_map['" + tensor + "'] must be a file name, got " + shard.dump());
        const std::string file = shard.get<std::string>();
        bool outside = file.empty() || fs::path(file).is_absolute();
        for (const auto& part : fs::path(file)) outside = outside || part == "..";
        if (outside)
            throw engine::CheckpointError(path, "weight_map['" + tensor + "'] = \"" + file +
                                                    "\" is not a file in the folder");
        auto [it, fresh] = out.tensors.try_emplace(file);
        if (fresh) out.shards.push_back(file);
        it->second.push_back(tensor);
    }
    return out;
}

}  // namespace analysis
