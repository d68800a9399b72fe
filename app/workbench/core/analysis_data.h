// Reading what `tupe analyze` writes (analysis/analyze.h: write_analysis) for the map views:
// .npy arrays through analysis::read_npy_array (analysis/npy_format.h, torch-free) and
// index.json through analysis::parse_index_json (analysis/analysis_index.h), which says what
// each file holds (kind, layer, head, shape, statistics, taxonomy label). Plain data, Qt strings.
#pragma once

#include <QString>
#include <QStringList>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace app {

/// A C-order array of any supported .npy dtype, converted to double: analysis::NpyArray's
/// shape and values, the shape as long long (the views' and tests' type).
struct NpyArray {
    std::vector<long long> shape;
    std::vector<double> values;
    long long size() const { return static_cast<long long>(values.size()); }
};

/// Reads a .npy file (format 1.0-3.0, little-endian f4/f8/i4/i8/u1/b1, C order) with
/// analysis::read_npy_array and all its checks. Throws std::runtime_error "PATH: reason" (an
/// engine::InputError) for anything else.
NpyArray readNpy(const QString& path);

/// One file listed in index.json.
struct AnalysisEntry {
    QString file;  ///< relative to the directory, e.g. "tupe/total_h0.csv"
    QString what;  ///< kind: "word_word", "tupe_total", "from_cls", "tupe_theta", ...
    QString description;
    int layer = -1;  ///< -1: not one layer
    int head = -1;   ///< -1: not one head
    std::vector<long long> shape;
    QString label;                         ///< taxonomy pattern of a TUPE head
    std::map<QString, double> statistics;  ///< null values are NaN
};

/// A `tupe analyze` output directory.
struct AnalysisData {
    QString dir;
    QString model, variant;
    int layers = 0, heads = 0;
    QStringList tokens;  ///< the first sentence's wordpieces ([CLS] ... [SEP])
    QStringList notes, skipped;
    std::vector<AnalysisEntry> entries;

    /// The per-head matrix entry of `what` at (layer, head), the .npy beside a listed .csv;
    /// layer -1 also matches entries shared by all layers. nullptr when there is none.
    const AnalysisEntry* find(const QString& what, int layer, int head) const;
    /// Kinds that have per-head entries, in file order.
    QStringList perHeadKinds() const;
    /// Distinct layers (-1 = shared) of the per-head entries of `what`.
    std::vector<int> layersOf(const QString& what) const;
    /// The matrix of an entry (its .npy), rows x cols.
    NpyArray matrix(const AnalysisEntry& entry) const;
    /// Any array by its relative path without extension, e.g. "cls/from_cls".
    NpyArray array(const QString& relativeNoExt) const;
};

/// Reads dir/index.json and dir/input/tokens.txt. Throws std::runtime_error "PATH: reason"
/// naming the file.
AnalysisData loadAnalysis(const QString& dir);

}  // namespace app
