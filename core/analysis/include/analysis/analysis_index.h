// The schema of index.json, the table of contents `tupe analyze` writes beside its arrays
// (analysis/analyze.h: write_analysis_index) and the desktop app reads (app/workbench/core/
// analysis_data): the key names once, a plain struct, and its JSON text both ways
// (analysis_index.cpp, nlohmann_json). No torch and no JSON library in this header; the config
// is engine::ModelConfig (engine/config.h, torch-free).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/config.h"

namespace analysis {

/// The keys of index.json. Top level:
namespace index_keys {
inline constexpr char kModel[] = "model";
inline constexpr char kVariant[] = "variant";
inline constexpr char kSize[] = "size";
inline constexpr char kConfig[] = "config";
inline constexpr char kSentences[] = "sentences";
inline constexpr char kTokens[] = "tokens";
inline constexpr char kForwardPasses[] = "forward_passes";
inline constexpr char kSeconds[] = "seconds";
inline constexpr char kAxes[] = "axes";
inline constexpr char kNotes[] = "notes";
inline constexpr char kSkipped[] = "skipped";
inline constexpr char kFiles[] = "files";
// "config": the model's hyper-parameters, every model.* key of engine::config_keys() without
// "model." (written from engine::visit_model_fields); those of the first indexes by name:
inline constexpr char kAbsolutePosition[] = "absolute_position";
inline constexpr char kRelativePosition[] = "relative_position";
inline constexpr char kRelPos[] = "rel_pos";  ///< read only: index.json from before the zoo
inline constexpr char kUntieCls[] = "untie_cls";
inline constexpr char kSharedPosTerm[] = "shared_pos_term";
inline constexpr char kAttentionScaleFactor[] = "attention_scale_factor";
inline constexpr char kPreLayernorm[] = "pre_layernorm";
inline constexpr char kNumHiddenLayers[] = "num_hidden_layers";
inline constexpr char kNumAttentionHeads[] = "num_attention_heads";
inline constexpr char kHiddenSize[] = "hidden_size";
inline constexpr char kMaxPositionEmbeddings[] = "max_position_embeddings";
inline constexpr char kVocabSize[] = "vocab_size";
// "skipped" entries: what and reason; "files" entries: the rest.
inline constexpr char kWhat[] = "what";
inline constexpr char kReason[] = "reason";
inline constexpr char kFile[] = "file";
inline constexpr char kDescription[] = "description";
inline constexpr char kLayer[] = "layer";            ///< null when not one layer
inline constexpr char kHead[] = "head";              ///< null when not one head
inline constexpr char kShape[] = "shape";            ///< absent when empty
inline constexpr char kLabel[] = "label";            ///< absent when empty
inline constexpr char kStatistics[] = "statistics";  ///< absent when empty; NaN as null
}  // namespace index_keys

/// The model's config as index.json records it: every field of engine::ModelConfig, written
/// and read through engine::visit_model_fields (so no field is left out). A key an index.json
/// lacks (older indexes had only the eleven above) keeps its default: the engine's, except
/// absolute_position "" and num_hidden_layers, num_attention_heads, hidden_size,
/// max_position_embeddings, vocab_size 0, which read as "unknown" as they always have.
struct AnalysisIndexConfig : engine::ModelConfig {
    AnalysisIndexConfig() {
        absolute_position.clear();
        num_hidden_layers = num_attention_heads = hidden_size = 0;
        max_position_embeddings = vocab_size = 0;
    }
    AnalysisIndexConfig(const engine::ModelConfig& config)  // NOLINT: implicit on purpose
        : engine::ModelConfig(config) {}
};

/// A map that was not computed, and why.
struct AnalysisIndexSkipped {
    std::string what, reason;
};

/// One file of an analysis directory (the fields of analysis::IndexEntry, analyze.h).
struct AnalysisIndexFile {
    std::string file;            ///< relative to the directory, e.g. "terms/word_word_h0.csv"
    std::string what;            ///< kind: "word_word", "tupe_total", "from_cls", "figure", ...
    std::string description;     ///< one line for a human
    int64_t layer = -1;          ///< -1: not one layer (null in the JSON)
    int64_t head = -1;           ///< -1: not one head (null in the JSON)
    std::vector<int64_t> shape;  ///< of the array in the file; empty for figures and text
    std::vector<std::pair<std::string, double>> statistics;  ///< named values (NaN <-> null)
    std::string label;                                       ///< e.g. the head's taxonomy pattern
};

/// The whole of index.json.
struct AnalysisIndex {
    std::string model;    ///< e.g. the checkpoint path
    std::string variant;  ///< the preset, e.g. "tupe-a"
    std::string size;     ///< e.g. "tiny"
    AnalysisIndexConfig config;
    int64_t sentences = 0, tokens = 0, forward_passes = 0;
    double seconds = 0;  ///< read from older files only; not written (write_index_json)
    std::string axes;    ///< how to read the maps' axes
    std::vector<std::string> notes;
    std::vector<AnalysisIndexSkipped> skipped;
    std::vector<AnalysisIndexFile> files;
};

/// Every model.* field of `config` (engine::visit_model_fields) as one JSON object's text,
/// typed, a non-finite double as null: index.json's "config", `tupe info --format json` and
/// the HF export's "tupe_workbench" block walk the config table through it.
std::string model_config_json(const engine::ModelConfig& config);

/// index.json's text: every key above (objects with sorted keys, one-space indent, a final
/// newline), as `tupe analyze` has always written it.
std::string write_index_json(const AnalysisIndex& index);

/// Parses index.json's text. Absent keys keep their defaults (older and hand-written indexes
/// have fewer). Throws engine::InputError(path, ...) for text that is not a JSON object, a key
/// of the wrong type (naming it, e.g. "files[3].layer"). Entries may lack keys (a hand-made
/// index without "file"): the reader that needs a key checks it.
AnalysisIndex parse_index_json(const std::string& text, const std::string& path);

/// Reads and parses the file at `path`. Throws engine::InputError(path, ...) as
/// parse_index_json, and when the file cannot be read.
AnalysisIndex read_index_json(const std::string& path);

}  // namespace analysis
