// HF BERT folders (transformers' modeling_bert names), both ways. Import: config.json into a
// ModelConfig, the weights from model.safetensors, pytorch_model.bin or their sharded form
// (*.index.json + shards; read by analysis/safetensors and analysis/torch_pickle), and vocab.txt,
// so the microscope can look at published BERT weights: BertForMaskedLM, and the encoder of a
// BertModel or BertForSequenceClassification (MLM head then freshly initialised). Export: any
// engine model as config.json + model.safetensors + vocab.txt; a variant that transformers' own
// BertForMaskedLM cannot compute gets model_type "tupe", a "tupe_workbench" block and the
// project's python/tupe_hf/ code (auto_map), which transformers runs with trust_remote_code.
// Every error is an engine::CheckpointError naming the file.
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <type_traits>
#include <unordered_map>
#include <variant>

#include "analysis/analysis_index.h"
#include "analysis/attention_analysis.h"
#include "analysis/hf_index.h"
#include "analysis/safetensors.h"
#include "analysis/torch_pickle.h"
#include "engine/errors.h"
#include "engine/position_scheme.h"
#include "engine/text_util.h"
#include "hf_internal.h"
#include "hf_remote_code.h"
#include "tensor_util.h"

namespace analysis {

namespace fs = std::filesystem;
using detail::shape_string;

namespace {

std::string read_text(const std::string& path) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw engine::CheckpointError(path, "no such file");
    std::ifstream in(path, std::ios::binary);
    std::ostringstream os;
    os << in.rdbuf();
    if (!in) throw engine::CheckpointError(path, "read failed");
    return os.str();
}

/// Old TF-converted checkpoints call LayerNorm parameters gamma/beta.
std::string canonical_hf_name(std::string name) {
    auto ends_with = [&](const std::string& suffix) {
        return name.size() >= suffix.size() &&
               name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (name.find("LayerNorm.") != std::string::npos) {
        if (ends_with(".gamma")) return name.substr(0, name.size() - 6) + ".weight";
        if (ends_with(".beta")) return name.substr(0, name.size() - 5) + ".bias";
    }
    return name;
}

bool starts_with(const std::string& s, const std::string& prefix) {
    return s.compare(0, prefix.size(), prefix) == 0;
}

/// HF tensors the engine has no place for and that carry nothing it needs.
bool ignored_hf_name(const std::string& name) {
    return starts_with(name, "bert.pooler.") || starts_with(name, "cls.seq_relationship.") ||
           name == "bert.embeddings.position_ids" || name == "cls.predictions.decoder.bias" ||
           name == "cls.predictions.decoder.weight";
}

constexpr const char* kTupeModelType = "tupe";
constexpr const char* kHfAbsolute = "absolute";
constexpr const char* kWorkbenchKey = "tupe_workbench";

/// HF's position_embedding_type for `c` when transformers' BertForMaskedLM computes what the
/// engine computes ("absolute": BERT-A; transformers 4's "relative_key(_query)", Shaw with
/// HF's unclipped per-layer tables, is read but no longer written), or "" when it cannot.
/// BertForMaskedLM is post-LN with LayerNorm, biases and a GELU FFN over full attention: the modern
/// backbone (RMSNorm, no biases, GeGLU/SwiGLU, local layers) is model_type "tupe". HF's
/// "modernbert" has the backbone but other parameter names (fused Wqkv, Wi) and only RoPE, so it is
/// not written.
std::string hf_position_type(const engine::ModelConfig& c) {
    // randomized_positions_max changes only training, but BertConfig has no place for it: such
    // a model is written as model_type "tupe", so that the importer gives its config back.
    if (c.untie_cls || c.attention_scale_factor != 1.0 || c.pre_layernorm ||
        c.position_offset != 0 || c.scale_input_positions || c.randomized_positions_max != 0)
        return "";
    if (c.norm != "layernorm" || !c.bias || c.ffn != "gelu" || c.local_window > 0) return "";
    // One scheme alone, one transformers has (its row's hf_position_type), with HF's tables:
    // one per layer, unclipped (relative_distance_clip = max_position_embeddings - 1).
    const std::vector<engine::Scheme> active = engine::active_schemes(c);
    if (active.size() != 1) return "";
    const engine::SchemeRow& row = engine::scheme_row(active[0]);
    if (!row.hf_position_type) return "";
    if (row.per_layer_group && c.shared_pos_term) return "";
    const bool clipped = std::find(row.fields.begin(), row.fields.end(),
                                   std::string("max_relative_distance")) != row.fields.end() &&
                         engine::relative_distance_clip(c) != c.max_position_embeddings - 1;
    if (clipped) return "";
    // transformers 5 (python/requirements.in) dropped BERT's relative_key(_query): the importer
    // still reads such folders from transformers 4, but an export is model_type "bert" only
    // where today's BertForMaskedLM loads it; Shaw ships python/tupe_hf like every scheme.
    return std::string(row.hf_position_type) == kHfAbsolute ? row.hf_position_type : "";
}

bool hf_representable(const engine::ModelConfig& c) { return !hf_position_type(c).empty(); }

/// A per-layer table HF keeps in each layer's attention (the rows' hf_layer_parameter: Shaw's
/// bert.position_bias.distance_embedding.N is HF's
/// bert.encoder.layer.N.attention.self.distance_embedding).
std::string to_hf_name(const std::string& name) {
    for (const engine::SchemeRow& row : engine::scheme_table()) {
        if (!row.hf_layer_parameter) continue;
        const std::string prefix =
            std::string("bert.position_bias.") + row.hf_layer_parameter + ".";
        if (!starts_with(name, prefix)) continue;
        const std::string rest = name.substr(prefix.size());  // "N.weight"
        const auto dot = rest.find('.');
        return "bert.encoder.layer." + rest.substr(0, dot) + ".attention.self." +
               row.hf_layer_parameter + rest.substr(dot);
    }
    return name;
}

/// transformers' BertConfig keys that are ModelConfig fields of the same name and meaning:
/// hf_config_for writes them, read_hf_bert_config reads them (the required ones must be
/// there; an absent or null other keeps ModelConfig's default, which is BertConfig's), and
/// every other model.* field of the config table (engine::visit_model_fields) is a key of the
/// "tupe_workbench" block.
struct HfStandardKey {
    const char* name;
    bool required;
};
constexpr HfStandardKey kHfStandardKeys[] = {
    {"vocab_size", true},           {"hidden_size", true},
    {"num_hidden_layers", true},    {"num_attention_heads", true},
    {"intermediate_size", true},    {"max_position_embeddings", true},
    {"type_vocab_size", false},     {"layer_norm_eps", false},
    {"hidden_dropout_prob", false}, {"attention_probs_dropout_prob", false},
    {"initializer_range", false},   {"pad_token_id", false}};

const HfStandardKey* hf_standard_key(const std::string& name) {
    for (const auto& key : kHfStandardKeys)
        if (name == key.name) return &key;
    return nullptr;
}

bool hf_standard_field(const std::string& name) { return hf_standard_key(name) != nullptr; }

/// The "tupe_workbench" block: every model.* field that is not hf_standard_field, typed.
nlohmann::json hf_workbench_block(const engine::ModelConfig& config) {
    nlohmann::json block = nlohmann::json::parse(model_config_json(config));
    for (const auto& key : kHfStandardKeys) block.erase(key.name);
    return block;
}

/// Reads the block hf_workbench_block writes (preset, size, absolute_position,
/// relative_position or the older "rel_pos", rel_pos_bins, max_rel_pos, max_relative_distance,
/// rope_fraction, rope_base, position_offset, untie_cls, shared_pos_term,
/// attention_scale_factor, pre_layernorm, ...) into c; every key is optional except
/// absolute_position, unknown keys are refused.
void read_workbench_block(const std::string& path, const nlohmann::json& block,
                          engine::ModelConfig& c) {
    const std::string where = std::string("\"") + kWorkbenchKey + "\"";
    if (!block.is_object()) throw engine::CheckpointError(path, where + " must be an object");
    auto fail = [&](const std::string& key, const std::string& what) {
        throw engine::CheckpointError(
            path, where + "." + key + " " + what + ", got " + block[key].dump());
    };
    // Each key's type, as the config table has it.
    auto check = [&](const std::string& key, const nlohmann::json& value, auto* type) {
        using T = std::decay_t<decltype(*type)>;
        if constexpr (std::is_same_v<T, std::string>) {
            if (!value.is_string()) fail(key, "must be a string");
        } else if constexpr (std::is_same_v<T, bool>) {
            if (!value.is_boolean()) fail(key, "must be true or false");
        } else if constexpr (std::is_same_v<T, int64_t>) {
            if (!value.is_number_integer()) fail(key, "must be an integer");
        } else {
            if (!value.is_number()) fail(key, "must be a number");
        }
    };
    engine::ModelConfig scratch;
    for (const auto& [key, value] : block.items()) {
        if (key == "rel_pos") {  // before the zoo
            check(key, value, static_cast<bool*>(nullptr));
            continue;
        }
        bool known = false;
        if (!hf_standard_field(key))
            engine::visit_model_fields(scratch, [&](const char* name, engine::ModelFieldRef field) {
                if (key != name) return;
                known = true;
                std::visit([&](auto* type) { check(key, value, type); }, field);
            });
        if (!known) throw engine::CheckpointError(path, where + ": unknown key '" + key + "'");
    }
    if (!block.contains("absolute_position"))
        throw engine::CheckpointError(path, where + ": missing key 'absolute_position'");
    if (block.value("rel_pos", false)) engine::set_legacy_rel_pos(c, true);  // before the zoo
    engine::visit_model_fields(c, [&](const char* name, engine::ModelFieldRef field) {
        if (hf_standard_field(name) || !block.contains(name)) return;
        std::visit([&](auto* value) { *value = block[name].get<std::decay_t<decltype(*value)>>(); },
                   field);
    });
    try {
        engine::describe_position(c);
    } catch (const std::invalid_argument& e) {
        throw engine::CheckpointError(path, where + "." + e.what());
    }
}

/// The standard keys of `j` into `c` (kHfStandardKeys), typed as the config table has them.
void read_hf_standard_keys(const std::string& path, const nlohmann::json& j,
                           engine::ModelConfig& c) {
    engine::visit_model_fields(c, [&](const char* name, engine::ModelFieldRef field) {
        const HfStandardKey* key = hf_standard_key(name);
        if (!key) return;
        if (!j.contains(name) || (!key->required && j[name].is_null())) {
            if (key->required)
                throw engine::CheckpointError(path, std::string("missing key '") + name + "'");
            return;
        }
        const nlohmann::json& value = j[name];
        std::visit(
            [&](auto* out) {
                using T = std::decay_t<decltype(*out)>;
                if constexpr (std::is_same_v<T, int64_t>) {
                    if (!value.is_number_integer())
                        throw engine::CheckpointError(path, std::string("key '") + name +
                                                                "' must be an integer, got " +
                                                                value.dump());
                    *out = value.get<int64_t>();
                } else if constexpr (std::is_same_v<T, double>) {
                    if (!value.is_number())
                        throw engine::CheckpointError(path, std::string("key '") + name +
                                                                "' must be a number, got " +
                                                                value.dump());
                    *out = value.get<double>();
                }
            },
            field);
    });
}

/// position_embedding_type (HF's default "absolute" when absent) as the scheme whose row
/// names it: BERT-A's table, or Shaw's per-layer tables as modeling_bert computes them (no
/// absolute positions at the input).
void read_hf_position_type(const std::string& path, const nlohmann::json& j,
                           engine::ModelConfig& c) {
    const char* key = "position_embedding_type";
    if (j.contains(key) && !j[key].is_string())
        throw engine::CheckpointError(path, "key 'position_embedding_type' must be a string");
    const std::string type = j.contains(key)
                                 ? j[key].get<std::string>()
                                 : engine::scheme_row(engine::Scheme::kInput).hf_position_type;
    std::vector<std::string> supported;
    for (const engine::SchemeRow& row : engine::scheme_table()) {
        if (!row.hf_position_type) continue;
        supported.emplace_back(row.hf_position_type);
        if (type != row.hf_position_type) continue;
        const bool absolute = row.axis == engine::SchemeAxis::kAbsolute;
        c.absolute_position = absolute ? row.name : engine::scheme_row(engine::Scheme::kNone).name;
        c.relative_position = absolute ? engine::scheme_row(engine::Scheme::kNone).name : row.name;
        c.shared_pos_term = !row.per_layer_group;
        // The first preset of that scheme (shaw, shaw-kq): the importer's variant name.
        for (const auto& preset : engine::model_presets()) {
            if (engine::active_schemes(engine::make_model_config(preset, "tiny")) ==
                engine::active_schemes(c)) {
                c.preset = preset;
                break;
            }
        }
        return;
    }
    throw engine::CheckpointError(path, "key 'position_embedding_type' is \"" + type +
                                            "\"; supported: " + engine::join(supported));
}

void write_text_file(const fs::path& path, const std::string& text) {
    const fs::path tmp = path.string() + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f << text;
        f.flush();
        if (!f) throw engine::CheckpointError(path.string(), "cannot write");
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw engine::CheckpointError(path.string(), "cannot write: " + ec.message());
}

}  // namespace

engine::ModelConfig read_hf_bert_config(const std::string& path) {
    const std::string bytes = read_text(path);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(bytes.begin(), bytes.end());
    } catch (const nlohmann::json::exception& e) {
        throw engine::CheckpointError(path, std::string("malformed JSON: ") + e.what());
    }
    if (!j.is_object()) throw engine::CheckpointError(path, "not a JSON object");

    auto require_string = [&](const char* key, const char* allowed) {
        if (!j.contains(key)) return;
        if (!j[key].is_string() || j[key].get<std::string>() != allowed) {
            throw engine::CheckpointError(
                path, std::string("key '") + key + "' is " + j[key].dump() +
                          "; the engine's BERT-A supports only \"" + allowed + "\"");
        }
    };

    engine::ModelConfig c = engine::make_model_config("bert-a", "tiny");
    c.size = "hf";
    read_hf_standard_keys(path, j, c);
    // HF "gelu" is the erf form, as the engine's BertIntermediate; gelu_new (tanh) is not.
    require_string("hidden_act", "gelu");
    if (j.contains("is_decoder") && j["is_decoder"].is_boolean() && j["is_decoder"].get<bool>())
        throw engine::CheckpointError(path, "is_decoder = true: only encoders are supported");
    const bool tupe_family = j.contains("model_type") && j["model_type"] == kTupeModelType;
    if (!tupe_family) {
        require_string("model_type", "bert");
        read_hf_position_type(path, j, c);
    }
    // The workbench's own block (written by export_hf_bert): the variant's positional fields.
    // Required for model_type "tupe"; for "bert" it may only restate BERT-A.
    if (j.contains(kWorkbenchKey)) {
        read_workbench_block(path, j[kWorkbenchKey], c);
    } else if (tupe_family) {
        throw engine::CheckpointError(path, std::string("model_type \"") + kTupeModelType +
                                                "\" needs the \"" + kWorkbenchKey + "\" block");
    }
    if (!tupe_family && !hf_representable(c))
        throw engine::CheckpointError(path, std::string("model_type \"bert\" but the \"") +
                                                kWorkbenchKey + "\" block describes " + c.preset +
                                                " (" + engine::describe_position(c).summary +
                                                "); expected model_type \"" + kTupeModelType +
                                                "\"");
    try {
        c.validate();
    } catch (const std::exception& e) {
        throw engine::CheckpointError(path,
                                      std::string("config does not fit the engine: ") + e.what());
    }
    return c;
}

namespace {

/// A folder's weights and the file that errors about them name (the index for sharded ones).
struct HfWeights {
    NamedTensors tensors;
    std::string file;
};

/// transformers' sharded layout: index.json {"metadata": {...}, "weight_map": {tensor: shard}}
/// beside the shards; each shard is read once, in the order the weight map first names it,
/// with `read_shard`, and every tensor of the weight map must be in the shard it names.
HfWeights read_sharded(const fs::path& index, NamedTensors (*read_shard)(const std::string&)) {
    const std::string path = index.string();
    const HfWeightMap map = parse_hf_weight_map(read_text(path), path);
    const std::vector<std::string>& shards = map.shards;
    const auto& wanted = map.tensors;  // shard -> tensors
    HfWeights out{{}, path};
    for (const auto& shard : shards) {
        const fs::path shard_path = index.parent_path() / shard;
        std::error_code ec;
        if (!fs::is_regular_file(shard_path, ec))
            throw engine::CheckpointError(
                path, "shard '" + shard + "' (holding '" + wanted.at(shard).front() + "' and " +
                          std::to_string(wanted.at(shard).size() - 1) + " more) not found");
        NamedTensors part = read_shard(shard_path.string());
        std::set<std::string> present;
        for (const auto& item : part) present.insert(item.first);
        for (const auto& tensor : wanted.at(shard))
            if (!present.count(tensor))
                throw engine::CheckpointError(shard_path.string(),
                                              "no tensor '" + tensor + "', which " +
                                                  index.filename().string() + " places here");
        for (auto& item : part) out.tensors.push_back(std::move(item));
    }
    return out;
}

constexpr const char* kStIndex = "model.safetensors.index.json";
constexpr const char* kBinIndex = "pytorch_model.bin.index.json";

HfWeights read_hf_weights(const std::string& dir) {
    const fs::path d(dir);
    std::error_code ec;
    if (fs::exists(d / "model.safetensors", ec))
        return {read_safetensors((d / "model.safetensors").string()),
                (d / "model.safetensors").string()};
    if (fs::exists(d / "pytorch_model.bin", ec))
        return {read_torch_state_dict((d / "pytorch_model.bin").string()),
                (d / "pytorch_model.bin").string()};
    if (fs::exists(d / kStIndex, ec)) return read_sharded(d / kStIndex, read_safetensors);
    if (fs::exists(d / kBinIndex, ec)) return read_sharded(d / kBinIndex, read_torch_state_dict);
    throw engine::CheckpointError(
        dir, std::string("neither model.safetensors, pytorch_model.bin, ") + kStIndex + " nor " +
                 kBinIndex + " found");
}

/// transformers' BertForSequenceClassification head, which analysis has no use for.
bool classifier_name(const std::string& name) {
    return name == "classifier.weight" || name == "classifier.bias";
}

}  // namespace

NamedTensors read_hf_state_dict(const std::string& dir) { return read_hf_weights(dir).tensors; }

engine::BertForMaskedLM import_hf_bert(const std::string& dir, std::vector<std::string>* notes,
                                       bool* has_mlm_head) {
    const fs::path d(dir);
    const engine::ModelConfig config = read_hf_bert_config((d / "config.json").string());
    HfWeights weights = read_hf_weights(dir);
    const std::string& weights_file = weights.file;

    // BertForMaskedLM / BertForSequenceClassification save the encoder under "bert."; a bare
    // BertModel saves it unprefixed (embeddings.*, encoder.*, pooler.*).
    bool has_bert_prefix = false, has_bare_encoder = false;
    for (const auto& item : weights.tensors) {
        const std::string name = canonical_hf_name(item.first);
        has_bert_prefix = has_bert_prefix || starts_with(name, "bert.");
        has_bare_encoder = has_bare_encoder || name == "embeddings.word_embeddings.weight";
    }
    if (!has_bert_prefix && !has_bare_encoder) {
        throw engine::CheckpointError(
            weights_file,
            "neither 'bert.*' nor 'embeddings.word_embeddings.weight': not a BertForMaskedLM, "
            "BertForSequenceClassification or BertModel checkpoint");
    }
    std::unordered_map<std::string, torch::Tensor> by_name;
    bool has_head = false, has_classifier = false;
    for (auto& [raw, tensor] : weights.tensors) {
        std::string name = canonical_hf_name(raw);
        if (!has_bert_prefix && !starts_with(name, "cls.") && !classifier_name(name))
            name = "bert." + name;
        has_head = has_head || starts_with(name, "cls.predictions.");
        has_classifier = has_classifier || classifier_name(name);
        if (!by_name.emplace(name, tensor).second)
            throw engine::CheckpointError(weights_file, "tensor '" + name + "' appears twice");
    }
    auto note = [&](const std::string& text) {
        if (notes) notes->push_back(weights_file + ": " + text);
    };
    if (!has_bert_prefix) note("a bare BertModel (no 'bert.' prefix): encoder imported");
    if (has_classifier) note("classifier.* (sequence classification head) ignored");
    if (has_mlm_head) *has_mlm_head = has_head;
    if (!has_head)
        note(
            "no MLM head (cls.predictions.*): the head is freshly initialised, its decoder tied "
            "to the imported word embeddings; MLM outputs are not the checkpoint's");

    engine::BertForMaskedLM model(config);
    torch::NoGradGuard no_grad;
    std::set<std::string> used;
    for (auto& item : model->named_parameters(/*recurse=*/true)) {
        const std::string name = to_hf_name(item.key());
        auto found = by_name.find(name);
        if (found == by_name.end() && !has_head && starts_with(name, "cls.")) continue;
        if (found == by_name.end()) {
            throw engine::CheckpointError(
                weights_file, "missing tensor '" + name + "' (config.json says " +
                                  std::to_string(config.num_hidden_layers) + " layers)");
        }
        auto& param = item.value();
        const auto& src = found->second;
        if (!src.is_floating_point() || src.sizes() != param.sizes()) {
            throw engine::CheckpointError(
                weights_file, "tensor '" + name + "' is " + shape_string(src.sizes()) + " " +
                                  c10::toString(src.scalar_type()) + ", the model (from " +
                                  "config.json) expects " + shape_string(param.sizes()) + " float");
        }
        param.copy_(src.to(param.scalar_type()));
        used.insert(name);
    }
    const bool no_input_table = model->bert->embeddings->position_embeddings.is_empty();
    for (const auto& [name, tensor] : by_name) {
        if (used.count(name)) continue;
        // HF keeps an (unused) absolute table beside relative_key attention.
        if (no_input_table && name == "bert.embeddings.position_embeddings.weight") continue;
        if (!ignored_hf_name(name) && !classifier_name(name)) {
            throw engine::CheckpointError(
                weights_file,
                "unexpected tensor '" + name + "' (does config.json fit this checkpoint?)");
        }
    }
    // The engine ties the decoder to the word embeddings, as HF does; an untied decoder would be
    // silently replaced, so refuse it.
    auto decoder = by_name.find("cls.predictions.decoder.weight");
    if (decoder != by_name.end()) {
        const auto& words = model->bert->embeddings->word_embeddings->weight;
        if (decoder->second.sizes() != words.sizes() ||
            !torch::equal(decoder->second.to(words.scalar_type()), words)) {
            throw engine::CheckpointError(weights_file,
                                          "cls.predictions.decoder.weight differs from the word "
                                          "embeddings; untied decoders are not supported");
        }
    }
    model->eval();
    return model;
}

engine::Vocab import_hf_vocab(const std::string& dir, const engine::ModelConfig& config) {
    const std::string path = (fs::path(dir) / "vocab.txt").string();
    engine::Vocab vocab = engine::Vocab::load(path);
    if (vocab.size() > config.vocab_size) {
        throw engine::CheckpointError(path, std::to_string(vocab.size()) +
                                                " tokens, more than the model's vocab_size = " +
                                                std::to_string(config.vocab_size));
    }
    return vocab;
}

namespace {

/// transformers' BertEmbeddings always has a token_type_embeddings table (and BertTokenizer
/// gives a pair's second segment type 1), so a model without one is exported with two zero
/// rows: the same function for any token types.
constexpr int64_t kZeroTypeRows = 2;

int64_t exported_type_vocab_size(const engine::ModelConfig& c) {
    return c.type_vocab_size > 0 ? c.type_vocab_size : kZeroTypeRows;
}

}  // namespace

nlohmann::json detail::hf_config_json(const engine::ModelConfig& c) {
    nlohmann::json j = {
        {"architectures", {hf_representable(c) ? "BertForMaskedLM" : "TupeForMaskedLM"}},
        {"model_type", hf_representable(c) ? "bert" : kTupeModelType},
        {"hidden_act", "gelu"},
    };
    engine::ModelConfig copy = c;
    engine::visit_model_fields(copy, [&](const char* name, engine::ModelFieldRef field) {
        if (hf_standard_field(name)) std::visit([&](auto* value) { j[name] = *value; }, field);
    });
    j["type_vocab_size"] = exported_type_vocab_size(c);
    if (hf_representable(c)) {
        j["position_embedding_type"] = hf_position_type(c);
    } else {
        // transformers' remote code (trust_remote_code=True): python/tupe_hf/, which
        // export_hf_bert writes beside this file.
        j["auto_map"] = {
            {"AutoConfig", "configuration_tupe.TupeConfig"},
            {"AutoModel", "modeling_tupe.TupeModel"},
            {"AutoModelForMaskedLM", "modeling_tupe.TupeForMaskedLM"},
            {"AutoModelForSequenceClassification", "modeling_tupe.TupeForSequenceClassification"}};
    }
    j[kWorkbenchKey] = hf_workbench_block(c);
    return j;
}

std::string hf_config_for(const engine::ModelConfig& c) {
    return detail::hf_config_json(c).dump(2) + "\n";
}

bool detail::hf_bert_model_type(const engine::ModelConfig& config) {
    return hf_representable(config);
}

NamedTensors detail::hf_named_parameters(torch::nn::Module& module, const std::string& prefix) {
    NamedTensors tensors;
    for (const auto& item : module.named_parameters(/*recurse=*/true))
        tensors.emplace_back(to_hf_name(prefix + item.key()),
                             item.value().detach().to(torch::kCPU, torch::kFloat));
    return tensors;
}

void detail::write_hf_folder(const engine::ModelConfig& config, NamedTensors tensors,
                             const nlohmann::json& config_json, const std::string& vocab_path,
                             bool lower_case, const std::string& dir,
                             std::vector<std::string>* notes) {
    // Checked before anything is written: the vocabulary must fit the embedding table.
    const engine::Vocab vocab = engine::Vocab::load(vocab_path);
    if (vocab.size() > config.vocab_size)
        throw engine::CheckpointError(
            vocab_path,
            std::to_string(vocab.size()) +
                " tokens, more than the model's vocab_size = " + std::to_string(config.vocab_size));
    const fs::path d(dir);
    std::error_code ec;
    fs::create_directories(d, ec);
    if (ec) throw engine::CheckpointError(dir, "cannot create the directory: " + ec.message());

    if (hf_representable(config) && !engine::describe_position(config).learned_input) {
        // transformers' BertEmbeddings builds its absolute table for every position type and
        // adds it only for "absolute": zeros, so from_pretrained finds every tensor.
        tensors.emplace_back("bert.embeddings.position_embeddings.weight",
                             torch::zeros({config.max_position_embeddings, config.hidden_size}));
    }
    if (config.type_vocab_size == 0) {
        tensors.emplace_back("bert.embeddings.token_type_embeddings.weight",
                             torch::zeros({kZeroTypeRows, config.hidden_size}));
        if (notes)
            notes->push_back(
                "type_vocab_size 0 exported as type_vocab_size " + std::to_string(kZeroTypeRows) +
                " with all-zero token_type_embeddings (HF needs the table; zeros add nothing)");
    }
    write_safetensors((d / "model.safetensors").string(), tensors,
                      {{"format", "pt"}, {"producer", "tupe export"}});
    write_text_file(d / "config.json", config_json.dump(2) + "\n");
    if (!hf_representable(config)) {
        // The modeling and configuration code config.json's auto_map names (python/tupe_hf/).
        for (const auto& file : detail::tupe_hf_files())
            write_text_file(d / file.name,
                            std::string(reinterpret_cast<const char*>(file.data), file.size));
    }
    std::string tokens;
    for (const auto& t : vocab.tokens()) tokens += t + "\n";
    write_text_file(d / "vocab.txt", tokens);
    const nlohmann::json tokenizer = {{"do_lower_case", lower_case},
                                      {"model_max_length", config.max_position_embeddings},
                                      {"tokenizer_class", "BertTokenizer"}};
    write_text_file(d / "tokenizer_config.json", tokenizer.dump(2) + "\n");
}

void export_hf_bert(engine::BertForMaskedLM& model, const std::string& vocab_path, bool lower_case,
                    const std::string& dir, std::vector<std::string>* notes) {
    // Parameters only, under their HF names; the decoder is tied to the word embeddings and,
    // as in transformers' own safetensors files, not stored twice.
    const engine::ModelConfig& config = model->config();
    detail::write_hf_folder(config, detail::hf_named_parameters(*model),
                            detail::hf_config_json(config), vocab_path, lower_case, dir, notes);
}

bool read_hf_lower_case(const std::string& dir, bool fallback) {
    const fs::path path = fs::path(dir) / "tokenizer_config.json";
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return fallback;
    const std::string bytes = read_text(path.string());
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(bytes.begin(), bytes.end());
    } catch (const nlohmann::json::exception& e) {
        throw engine::CheckpointError(path.string(), std::string("malformed JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("do_lower_case")) return fallback;
    if (!j["do_lower_case"].is_boolean())
        throw engine::CheckpointError(
            path.string(), "do_lower_case must be true or false, got " + j["do_lower_case"].dump());
    return j["do_lower_case"].get<bool>();
}

}  // namespace analysis
