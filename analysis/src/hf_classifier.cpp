// A fine-tuned sequence classifier as an HF folder, both ways, and one text through it (see
// analysis/hf_classifier.h). The encoder's files are export_hf_bert's (hf_internal.h); this
// adds HF BertForSequenceClassification's pooler (bert.pooler.dense) and classifier, and the
// label names transformers' pipelines and config.id2label give back.
#include "analysis/hf_classifier.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/attention_analysis.h"
#include "analysis/safetensors.h"
#include "analysis/tasks.h"
#include "engine/errors.h"
#include "hf_internal.h"
#include "tensor_util.h"

namespace analysis {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPoolerWeight = "bert.pooler.dense.weight";
constexpr const char* kPoolerBias = "bert.pooler.dense.bias";
constexpr const char* kClassifierWeight = "classifier.weight";
constexpr const char* kClassifierBias = "classifier.bias";

/// dir/config.json as JSON; throws CheckpointError naming it.
nlohmann::json read_config_json(const std::string& dir) {
    const std::string path = (fs::path(dir) / "config.json").string();
    std::ifstream in(path, std::ios::binary);
    if (!in) throw engine::CheckpointError(path, "no such file");
    std::ostringstream os;
    os << in.rdbuf();
    try {
        return nlohmann::json::parse(os.str());
    } catch (const nlohmann::json::exception& e) {
        throw engine::CheckpointError(path, std::string("malformed JSON: ") + e.what());
    }
}

std::vector<std::string> default_labels(int64_t n) {
    std::vector<std::string> labels;
    for (int64_t i = 0; i < n; ++i) labels.push_back("LABEL_" + std::to_string(i));
    return labels;
}

}  // namespace

ClassifierHead classifier_head_for(const std::string& task_key, int64_t num_labels) {
    ClassifierHead head;
    head.regression = num_labels == 1;
    try {
        const TaskInfo& task = find_task(task_key);
        head.task = task.name;
        if (!task.regression && static_cast<int64_t>(task.labels.size()) == num_labels)
            head.labels = task.labels;
    } catch (const std::invalid_argument&) {
        head.task = task_key;  // a task outside the registry keeps its key
    }
    if (head.labels.empty())
        head.labels =
            head.regression ? std::vector<std::string>{"score"} : default_labels(num_labels);
    return head;
}

std::string hf_classifier_config_for(const engine::ModelConfig& config,
                                     const ClassifierHead& head) {
    nlohmann::json j = detail::hf_config_json(config);
    j["architectures"] = {detail::hf_bert_model_type(config) ? "BertForSequenceClassification"
                                                             : "TupeForSequenceClassification"};
    nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
    for (size_t i = 0; i < head.labels.size(); ++i) {
        id2label[std::to_string(i)] = head.labels[i];
        label2id[head.labels[i]] = static_cast<int64_t>(i);
    }
    j["id2label"] = id2label;
    j["label2id"] = label2id;
    j["problem_type"] = head.regression ? "regression" : "single_label_classification";
    if (!head.task.empty()) j["finetuning_task"] = head.task;
    return j.dump(2) + "\n";
}

void export_hf_classifier(engine::BertForSequenceClassification& model, const ClassifierHead& head,
                          const std::string& vocab_path, bool lower_case, const std::string& dir,
                          std::vector<std::string>* notes) {
    const engine::ModelConfig& config = model->config();
    if (static_cast<int64_t>(head.labels.size()) != model->num_labels())
        throw engine::InputError(dir, std::to_string(head.labels.size()) + " label names for " +
                                          std::to_string(model->num_labels()) + " logits");
    NamedTensors tensors = detail::hf_named_parameters(*model->bert, "bert.");
    auto add = [&](const char* name, const torch::Tensor& t) {
        tensors.emplace_back(name, t.detach().to(torch::kCPU, torch::kFloat));
    };
    add(kPoolerWeight, model->pooler->dense->weight);
    add(kPoolerBias, model->pooler->dense->bias);
    add(kClassifierWeight, model->classifier->weight);
    add(kClassifierBias, model->classifier->bias);
    detail::write_hf_folder(config, std::move(tensors),
                            nlohmann::json::parse(hf_classifier_config_for(config, head)),
                            vocab_path, lower_case, dir, notes);
}

bool hf_folder_is_classifier(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(dir) / "config.json", ec)) return false;
    const nlohmann::json j = read_config_json(dir);
    if (!j.is_object() || !j.contains("architectures") || !j["architectures"].is_array())
        return false;
    for (const auto& a : j["architectures"])
        if (a.is_string() &&
            a.get<std::string>().find("ForSequenceClassification") != std::string::npos)
            return true;
    return false;
}

HfClassifier import_hf_classifier(const std::string& dir, std::vector<std::string>* notes) {
    // The encoder as the microscope reads it; its notes about the heads it ignores or
    // initialises (the classifier, a missing MLM head) do not apply here.
    std::vector<std::string> encoder_notes;
    engine::BertForMaskedLM encoder = import_hf_bert(dir, &encoder_notes);
    if (notes)
        for (const auto& note : encoder_notes)
            if (note.find("classifier.*") == std::string::npos &&
                note.find("no MLM head") == std::string::npos)
                notes->push_back(note);

    const NamedTensors weights = read_hf_state_dict(dir);
    std::map<std::string, torch::Tensor> heads;
    for (const auto& [name, tensor] : weights)
        if (name == kPoolerWeight || name == kPoolerBias || name == kClassifierWeight ||
            name == kClassifierBias)
            heads[name] = tensor;
    const std::string where = (fs::path(dir) / "model.safetensors").string();
    for (const char* name : {kClassifierWeight, kClassifierBias, kPoolerWeight, kPoolerBias})
        if (!heads.count(name))
            throw engine::CheckpointError(
                where, std::string("no tensor '") + name +
                           "': not a sequence classifier (BertForSequenceClassification)");
    const torch::Tensor& cw = heads[kClassifierWeight];
    const int64_t hidden = encoder->config().hidden_size;
    if (cw.dim() != 2 || cw.size(1) != hidden || cw.size(0) < 1)
        throw engine::CheckpointError(
            where, std::string(kClassifierWeight) + " is " + detail::shape_string(cw.sizes()) +
                       ", expected (num_labels, " + std::to_string(hidden) + ")");
    const int64_t num_labels = cw.size(0);

    HfClassifier out;
    out.model = engine::BertForSequenceClassification(encoder->config(), num_labels, 0.0);
    out.model->load_pretrained(encoder);
    torch::NoGradGuard no_grad;
    auto copy = [&](torch::Tensor& dst, const char* name) {
        const torch::Tensor& src = heads[name];
        if (src.sizes() != dst.sizes() || !src.is_floating_point())
            throw engine::CheckpointError(where, std::string("tensor '") + name + "' is " +
                                                     detail::shape_string(src.sizes()) +
                                                     ", the model expects " +
                                                     detail::shape_string(dst.sizes()) + " float");
        dst.copy_(src.to(dst.scalar_type()));
    };
    copy(out.model->pooler->dense->weight, kPoolerWeight);
    copy(out.model->pooler->dense->bias, kPoolerBias);
    copy(out.model->classifier->weight, kClassifierWeight);
    copy(out.model->classifier->bias, kClassifierBias);
    out.model->eval();

    // Names and kind from config.json: id2label {"0": name, ...}, problem_type, finetuning_task.
    const nlohmann::json j = read_config_json(dir);
    out.head.labels = default_labels(num_labels);
    if (j.contains("id2label") && j["id2label"].is_object() &&
        static_cast<int64_t>(j["id2label"].size()) == num_labels) {
        for (int64_t i = 0; i < num_labels; ++i) {
            const auto it = j["id2label"].find(std::to_string(i));
            if (it != j["id2label"].end() && it->is_string())
                out.head.labels[static_cast<size_t>(i)] = it->get<std::string>();
        }
    }
    const bool says_regression = j.contains("problem_type") && j["problem_type"] == "regression";
    out.head.regression = says_regression || num_labels == 1;
    if (j.contains("finetuning_task") && j["finetuning_task"].is_string())
        out.head.task = j["finetuning_task"].get<std::string>();
    return out;
}

Classification classify_text(engine::BertForSequenceClassification& model,
                             const engine::WordPieceTokenizer& tokenizer, const std::string& text_a,
                             const std::string& text_b) {
    const int64_t max_len = model->config().max_position_embeddings;
    const engine::Encoding e = tokenizer.encode(text_a, text_b, max_len, !text_b.empty());
    const auto device = model->classifier->weight.device();
    const int64_t T = static_cast<int64_t>(e.input_ids.size());
    // (T) -> (1, T)
    const auto ids = torch::tensor(e.input_ids, torch::kLong).view({1, T}).to(device);
    const auto types = torch::tensor(e.token_type_ids, torch::kLong).view({1, T}).to(device);
    const auto mask = torch::ones({1, T}, torch::kLong).to(device);
    torch::NoGradGuard no_grad;
    const bool was_training = model->is_training();
    model->eval();
    const torch::Tensor logits =
        model->forward(ids, mask, types).to(torch::kCPU, torch::kDouble).view({-1});  // (L)
    if (was_training) model->train();
    Classification out;
    out.tokens = e.tokens;
    out.logits.assign(logits.data_ptr<double>(), logits.data_ptr<double>() + logits.numel());
    if (model->num_labels() > 1) {
        const torch::Tensor p = torch::softmax(logits, 0);
        out.probabilities.assign(p.data_ptr<double>(), p.data_ptr<double>() + p.numel());
    }
    return out;
}

}  // namespace analysis
