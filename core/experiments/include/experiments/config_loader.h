// Reads a pretraining config from YAML (plus `--set key=value` overrides) into the engine's
// typed engine::PretrainConfig. Defaults live in C++ (engine/config.h); the YAML file holds
// only overrides, and every mistake (unknown key, wrong type, bad preset, malformed YAML,
// inconsistent model) becomes a ConfigError with the file, line, column and key path.
#pragma once

#include <yaml-cpp/yaml.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/config.h"

namespace experiments {

/// A config that cannot be used. what() is one line, "FILE:LINE:COL: KEY: message"; the
/// line and column (1-based) are left out when unknown (0), the key when empty or when the
/// message already names it. For a `--set` override FILE is "--set key=value".
class ConfigError : public std::runtime_error {
  public:
    /// `key_in_message`: the message already names the key, so what() does not repeat it.
    ConfigError(const std::string& file, long line, long column, const std::string& key,
                const std::string& message, bool key_in_message = false);

    const std::string& file() const { return file_; }        ///< Path, or "--set key=value".
    long line() const { return line_; }                      ///< 1-based; 0 when unknown.
    long column() const { return column_; }                  ///< 1-based; 0 when unknown.
    const std::string& key() const { return key_; }          ///< "section.key"; may be empty.
    const std::string& message() const { return message_; }  ///< what() without location.

  private:
    std::string file_;
    long line_;
    long column_;
    std::string key_;
    std::string message_;
};

/// Loads `path` and applies `overrides` ("section.key=value", from the CLI's --set) on top.
///
/// Schema: top-level mappings `model:`, `data:`, `train:` and the scalar `out_dir:`; every
/// scalar under a section is "section.key" of engine::config_keys(). The base model is
/// engine::make_model_config(model.preset, model.size) (defaults "bert-a", "tiny"); all other
/// keys are then applied in file order, then the overrides in order. A model.preset or
/// model.size override rebuilds the base model first, and the file's other model keys are
/// re-applied on top of it. An override's value is taken verbatim (no YAML parsing).
/// Booleans are true/false (True/TRUE/False/FALSE accepted); numbers as the engine parses them.
///
/// Relative paths (data.corpus, data.vocab, data.cache_dir, out_dir) are kept exactly as
/// written, i.e. relative to the current directory of the process, not to the YAML file: the
/// shipped configs are run from the repository root, and the resolved config stored with a
/// run then shows the same paths the user typed.
///
/// Throws ConfigError for an unreadable file, malformed YAML, an unknown key (with the
/// nearest valid key when one is close, or our key for another toolkit's name: see
/// unknown_key_hint), a wrong type, an unknown preset or size, or a model
/// that fails engine::ModelConfig::validate().
engine::PretrainConfig load_pretrain_config(const std::string& path,
                                            const std::vector<std::string>& overrides = {});

/// As load_pretrain_config, from YAML text; `name_for_messages` stands in for the file name.
engine::PretrainConfig load_pretrain_config_from_string(
    const std::string& yaml_text, const std::string& name_for_messages,
    const std::vector<std::string>& overrides = {});

/// As load_pretrain_config, from an already parsed document whose top level may also hold
/// `foreign_keys` that the caller reads itself (an experiment file's `variants:`, `glue:`...).
engine::PretrainConfig load_pretrain_config_from_node(const YAML::Node& root,
                                                      const std::string& name_for_messages,
                                                      const std::vector<std::string>& overrides,
                                                      const std::vector<std::string>& foreign_keys);

/// A name another toolkit gives one of our settings (Hugging Face TrainingArguments and
/// BertConfig, fairseq's options), used only to explain an unknown key: an alias is never
/// accepted in a config. `key` is a real key of engine::config_keys() ("" when there is no
/// such setting here); `note` completes the sentence ("train.dtype: bf16", or why there is none).
struct KeyAlias {
    std::string name;    ///< "eval_steps"
    std::string origin;  ///< "HF", "fairseq" or "HF and fairseq"
    std::string key;     ///< "train.eval_interval"
    std::string note;    ///< appended to the key, or the whole hint when key is ""
};

/// Every alias, in a stable order; names are unique and lower-case.
const std::vector<KeyAlias>& key_aliases();

/// The hint for an unknown `key` ("section.name", "name" at the top level or in --set),
/// without the leading "unknown key": "; the HF name eval_steps is train.eval_interval here"
/// when its last part is an alias, ", did you mean 'train.lr'?" when that part is a field of
/// another section or `key` is a near typo of a valid key (nearest_key), otherwise "".
std::string unknown_key_hint(const std::string& key);

/// The candidate closest to `key` by edit distance (Levenshtein, with a swap of two
/// adjacent characters counted as one edit; case-insensitive), or "" when none is close:
/// at most max(1, length / 3) edits. Ties go to the earlier candidate.
std::string nearest_key(const std::string& key, const std::vector<std::string>& candidates);

}  // namespace experiments
