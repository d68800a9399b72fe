// The GLUE task registry (analysis/tasks.h): one entry per task, everything else derived.
// Columns, labels and sizes as in shared/GLUE_FORMAT.md, checked against that document by
// tests/core/test_tasks.cpp.
#include "analysis/tasks.h"

#include <algorithm>
#include <stdexcept>

namespace analysis {

namespace {

constexpr int kLast = -1;  // the label is the last column

std::string lower(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
}

/// Lower case with '-' read as '_': "MNLI-mm" -> "mnli_mm", "SST-2" -> "sst_2".
std::string folded(const std::string& s) {
    std::string out = lower(s);
    std::replace(out.begin(), out.end(), '-', '_');
    return out;
}

/// One task. `dev` lists its dev splits; a single split named "dev" is reported under the key.
struct Entry {
    const char* name;
    const char* key;
    bool header;
    int text_a, text_b, label;
    std::vector<std::string> labels;
    MetricKind metric;
    const char* jsonl_a;
    const char* jsonl_b;
    int default_epochs;
    long train_size;
    std::vector<DevSplit> dev;
    int paper_position;
};

TaskInfo make(Entry e, bool synthetic) {
    TaskInfo t;
    t.name = e.name;
    t.key = e.key;
    t.header = e.header;
    t.text_a = e.text_a;
    t.text_b = e.text_b;
    t.label = e.label;
    t.labels = e.labels;
    t.regression = e.metric == MetricKind::kPearsonSpearman;
    t.skip_short_rows = t.key == "qqp";  // GLUE_FORMAT.md: rows without 6 fields are dropped
    t.dev = e.dev;
    for (auto& d : t.dev) {
        if (d.column.empty()) d.column = t.key;
        t.dev_splits.push_back(d.file);
    }
    t.train_size = e.train_size;
    t.default_epochs = e.default_epochs;
    t.synthetic = synthetic;
    t.metric = e.metric;
    t.jsonl_a = e.jsonl_a;
    t.jsonl_b = e.jsonl_b;
    t.paper_position = e.paper_position;
    return t;
}

/// A task with one dev split, "dev", reported under its key with table header `label`.
std::vector<DevSplit> one_dev(const char* label, long size = -1) {
    return {DevSplit{"dev", "", label, {}, size}};
}

}  // namespace

const char* metric_kind_name(MetricKind kind) {
    switch (kind) {
        case MetricKind::kF1Accuracy: return "f1_accuracy";
        case MetricKind::kMcc: return "mcc";
        case MetricKind::kPearsonSpearman: return "pearson_spearman";
        default: return "accuracy";
    }
}

const char* selection_metric_key(MetricKind kind) {
    return kind == MetricKind::kMcc               ? "mcc"
           : kind == MetricKind::kPearsonSpearman ? "pearson"
                                                  : "accuracy";
}

const std::vector<TaskInfo>& glue_tasks() {
    using M = MetricKind;
    // name, key, header, text a / b / label columns, labels, metric, HF JSON-lines text fields,
    // default epochs, train size, dev splits (file, column, table header, aliases, size),
    // position in the paper's Table 1. Columns, labels and sizes: GLUE_FORMAT.md.
    // Built on first use (no namespace-scope vectors: the registry is read during other
    // files' static initialisation).
    static const std::vector<TaskInfo> tasks = [] {
        const std::vector<std::string> kBinary = {"0", "1"};
        const std::vector<std::string> kNli2 = {"entailment", "not_entailment"};
        const std::vector<std::string> kNli3 = {"entailment", "neutral", "contradiction"};
        const std::vector<std::string> kScore;  // regression: a float, no label strings
        // MNLI's two dev sets, each its own result column.
        const std::vector<DevSplit> kMnliDev = {
            {"dev_matched", "mnli_m", "MNLI-m", {"mnli_matched"}, 9815},
            {"dev_mismatched", "mnli_mm", "MNLI-mm", {"mnli_mismatched"}, 9832}};
        const std::vector<Entry> glue = {
            {"CoLA", "cola", false, 3, -1, 1, kBinary, M::kMcc, "sentence", "", 10, 8551,
             one_dev("CoLA", 1043), 4},
            {"SST-2", "sst2", true, 0, -1, 1, kBinary, M::kAccuracy, "sentence", "", 10, 67349,
             one_dev("SST", 872), 3},
            {"MRPC", "mrpc", true, 3, 4, 0, kBinary, M::kF1Accuracy, "sentence1", "sentence2", 10,
             3668, one_dev("MRPC", 408), 5},
            {"STS-B", "stsb", true, 7, 8, kLast, kScore, M::kPearsonSpearman, "sentence1",
             "sentence2", 10, 5749, one_dev("STS", 1500), 7},
            {"QQP", "qqp", true, 3, 4, 5, kBinary, M::kF1Accuracy, "question1", "question2", 5,
             363846, one_dev("QQP", 40430), 2},
            {"MNLI", "mnli", true, 8, 9, kLast, kNli3, M::kAccuracy, "premise", "hypothesis", 5,
             392702, kMnliDev, 0},
            {"QNLI", "qnli", true, 1, 2, kLast, kNli2, M::kAccuracy, "question", "sentence", 5,
             104743, one_dev("QNLI", 5463), 1},
            {"RTE", "rte", true, 1, 2, kLast, kNli2, M::kAccuracy, "sentence1", "sentence2", 10,
             2490, one_dev("RTE", 277), 6},
            {"WNLI", "wnli", true, 1, 2, kLast, kBinary, M::kAccuracy, "sentence1", "sentence2", 10,
             635, one_dev("WNLI", 71), -1},
        };
        // Synthetic word-order tasks (experiments/synthetic_tasks.h) in their model task's
        // layout, labels and metric; generated, so no sizes and no place in Table 1.
        const auto synthetic_of = [&](const char* model, const char* name, const char* key,
                                      const char* label) {
            for (Entry e : glue)
                if (std::string(e.name) == model) {
                    e.name = name;
                    e.key = key;
                    e.train_size = -1;
                    e.dev = one_dev(label);
                    e.paper_position = -1;
                    return e;
                }
            throw std::logic_error(std::string("no task ") + model);
        };
        const std::vector<Entry> synthetic = {
            synthetic_of("CoLA", "SYN-CoLA", "syn-cola", "SYN-CoLA"),
            synthetic_of("MRPC", "SYN-MRPC", "syn-mrpc", "SYN-MRPC"),
            synthetic_of("STS-B", "SYN-STS-B", "syn-stsb", "SYN-STS"),
            synthetic_of("RTE", "SYN-RTE", "syn-rte", "SYN-RTE"),
        };
        // Zero-shot minimal pairs (experiments/synthetic_tasks.h, experiments/zero_shot.h):
        // index, sentence1, sentence2, label = the index (0/1) of the attested order; accuracy.
        const auto pairs_of = [&](const char* name, const char* key, const char* label) {
            Entry e{name,         key,         true,        1, 2,  kLast,          kBinary,
                    M::kAccuracy, "sentence1", "sentence2", 1, -1, one_dev(label), -1};
            return e;
        };
        const std::vector<Entry> zero_shot = {
            pairs_of("SYN-BSHIFT", "syn-bshift", "SYN-BSHIFT"),
            pairs_of("SYN-MOVE", "syn-move", "SYN-MOVE"),
            pairs_of("SYN-SPAN", "syn-span", "SYN-SPAN"),
            pairs_of("SYN-REV", "syn-rev", "SYN-REV"),
        };
        std::vector<TaskInfo> out;
        for (const auto& e : glue) out.push_back(make(e, false));
        for (const auto& e : synthetic) out.push_back(make(e, true));
        for (const auto& e : zero_shot) {
            out.push_back(make(e, true));
            out.back().zero_shot = true;
        }
        return out;
    }();
    return tasks;
}

const TaskInfo& find_task(const std::string& name) {
    const std::string wanted = lower(name);
    std::string valid;
    for (const auto& task : glue_tasks()) {
        if (lower(task.name) == wanted || task.key == wanted) return task;
        valid += (valid.empty() ? "" : ", ") + task.name + " (" + task.key + ")";
    }
    throw std::invalid_argument("unknown task \"" + name + "\"; valid: " + valid);
}

long expected_split_size(const TaskInfo& task, const std::string& split) {
    if (split == "train") return task.train_size;
    for (const auto& d : task.dev)
        if (d.file == split) return d.size;
    return -1;
}

std::string reported_column(const TaskInfo& task, const std::string& dev_split) {
    for (const auto& d : task.dev)
        if (d.file == dev_split) return d.column;
    throw std::invalid_argument("task " + task.name + " has no dev split '" + dev_split + "'");
}

TaskColumn resolve_task_column(const std::string& name) {
    const std::string wanted = folded(name);
    for (const auto& task : glue_tasks()) {
        for (const auto& d : task.dev) {
            bool match = folded(d.column) == wanted;
            for (const auto& a : d.aliases) match = match || folded(a) == wanted;
            // A task of one dev split is also named by its key or folder name.
            if (task.dev.size() == 1)
                match = match || folded(task.key) == wanted || folded(task.name) == wanted;
            if (match) return {&task, &d};
        }
        if (folded(task.key) == wanted || folded(task.name) == wanted) return {&task, nullptr};
    }
    return {};
}

const std::vector<std::string>& paper_columns() {
    static const std::vector<std::string> columns = [] {
        std::vector<const TaskInfo*> in_paper;
        for (const auto& t : glue_tasks())
            if (t.paper_position >= 0) in_paper.push_back(&t);
        std::sort(in_paper.begin(), in_paper.end(), [](const TaskInfo* a, const TaskInfo* b) {
            return a->paper_position < b->paper_position;
        });
        std::vector<std::string> out;
        for (const auto* t : in_paper)
            for (const auto& d : t->dev) out.push_back(d.column);
        return out;
    }();
    return columns;
}

const std::vector<std::string>& paper_task_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> out;
        for (const auto& column : paper_columns()) {
            const std::string& key = resolve_task_column(column).task->key;
            if (std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
        }
        return out;
    }();
    return keys;
}

const std::vector<std::string>& synthetic_task_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> out;
        for (const auto& t : glue_tasks())
            if (t.synthetic) out.push_back(t.key);
        return out;
    }();
    return keys;
}

const std::vector<std::string>& report_columns() {
    static const std::vector<std::string> columns = [] {
        std::vector<std::string> out = paper_columns();
        for (const auto& t : glue_tasks())
            if (t.synthetic)
                for (const auto& d : t.dev) out.push_back(d.column);
        for (const auto& t : glue_tasks())
            if (!t.synthetic && t.paper_position < 0)
                for (const auto& d : t.dev) out.push_back(d.column);
        return out;
    }();
    return columns;
}

}  // namespace analysis
