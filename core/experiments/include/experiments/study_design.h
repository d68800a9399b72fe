// A factorial study as the workbench's study builder edits it: a base preset and size, the
// factors (config keys) with their levels, the full product or chosen cells, pretraining seeds
// and the study file's own settings; written as an experiment file that `tupe run` reads (a
// `grid:` for the full product, `variants:` for chosen cells, both named by their levels as
// experiment.cpp names a grid's variants) and read back from one, keeping what the form does
// not edit and saying so. docs/experiments.md, "The study file".
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace experiments {

/// One factor: a config key and its levels, each as it is written in YAML.
struct StudyFactor {
    std::string key;                  ///< "model.untie_cls", "model.preset", "train.lr"
    std::vector<std::string> levels;  ///< "true", "false"; "t5"; "2.0e-3"
};

/// What the study builder edits.
struct StudyDesign {
    std::string comment;  ///< the file's opening comment lines, without their "# "
    std::string name;
    std::string preset = "tupe-a";
    std::string size = "tiny";
    /// The model., data. and train. keys every variant gets besides preset and size, in
    /// order, as (key, value as written).
    std::vector<std::pair<std::string, std::string>> base;
    std::vector<StudyFactor> factors;
    bool full_factorial = true;
    /// Without the full product: the cells run, one level per factor in factor order.
    std::vector<std::vector<std::string>> cells;
    /// pretrain_seeds: every variant V runs as V@seedN; empty: once, at train.seed.
    std::vector<uint64_t> seeds;
    /// The study-field keys set (experiments/study_fields.h), as (key, YAML value text: "3",
    /// "[syn-bshift, syn-move]"); name, variants, grid and pretrain_seeds are fields above.
    std::vector<std::pair<std::string, std::string>> settings;
    bool analysis = false;       ///< the analysis: block is present (maybe with defaults only)
    bool extrapolation = false;  ///< the extrapolation: block is present
    /// Top-level entries the form does not edit, as YAML written back unchanged.
    std::string kept;
    /// One line per part of the file the form did not understand, and what became of it.
    std::vector<std::string> notes;

    /// The value of setting `key`, or "" when it is not set.
    std::string setting(const std::string& key) const;
    /// Sets (a non-empty value) or removes (empty) setting `key`, keeping the table's order.
    void set_setting(const std::string& key, const std::string& value);
};

/// `text` as one YAML scalar: plain when it reads back as the same text (letters, digits and
/// _ . + - / @ =), else double-quoted with escapes.
std::string yaml_scalar_text(const std::string& text);

/// A variant's name part for one factor level: the preset itself for model.preset, else the
/// key's last part and the value ("untie_cls=true"). A grid's and the builder's rule.
std::string level_name_part(const std::string& key, const std::string& value);

/// The variant name of `cell` (one level per factor): its parts joined by ','.
std::string cell_variant_name(const std::vector<StudyFactor>& factors,
                              const std::vector<std::string>& cell);

/// Every cell the design runs: the full product, the first factor varying slowest (a grid's
/// order), or the chosen cells; one empty cell when there is no factor.
std::vector<std::vector<std::string>> design_cells(const StudyDesign& design);

/// The experiment file: the opening comment, name, grid or variants, pretrain_seeds, model,
/// data, train, the top-level settings, glue, finetune, analysis, extrapolation, database,
/// runs_dir, then what was kept.
std::string write_study_design(const StudyDesign& design);

/// Reads an experiment file's text into a design. What the form cannot edit (variants with
/// names of their own or their own seeds, unknown keys, comments after the opening block) is
/// kept in `kept` or dropped, with a line in `notes` either way. Throws ConfigError
/// (config_loader.h) naming `name_for_messages` for malformed YAML or a top level that is not
/// a mapping.
StudyDesign read_study_design(const std::string& yaml_text, const std::string& name_for_messages);

/// A new study file with every key of both field tables at its documented default, commented
/// out with its documentation beside it, and the few keys a study needs set: `name`, two
/// variants (bert-a, tupe-a) and the default data (data/brown/). For an editor's "New".
std::string documented_defaults_yaml(const std::string& name);

}  // namespace experiments
