// `tupe info`, `tupe export`, `tupe inspect`, `tupe fill-mask`: look at a checkpoint from the
// command line; export writes an HF folder (analysis::export_hf_bert) or one torch.load-readable
// file; fill-mask reads a checkpoint or an HF folder (analysis::import_hf_bert).
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "analysis/analysis_index.h"
#include "analysis/attention_analysis.h"
#include "analysis/fill_mask.h"
#include "analysis/inspect.h"
#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/errors.h"
#include "engine/trainer.h"
#include "model_loader.h"

namespace cli {

namespace fs = std::filesystem;

namespace {

std::string one_checkpoint(const Args& args) {
    if (args.positionals().size() != 1) throw UsageError("expected one CHECKPOINT");
    return args.positionals()[0];
}

}  // namespace

int cmd_info(const Argv& argv) {
    Args args(argv, command_spec("info"));
    const std::string path = one_checkpoint(args);
    auto ckpt = engine::load_checkpoint(path);
    const auto& m = ckpt.config.model;
    engine::CorpusFloor floor;
    const bool has_floor =
        engine::read_floor(engine::floor_path(fs::path(path).parent_path().string()), floor);
    auto groups = engine::parameter_groups(*ckpt.model);
    // bert-a's only positional parameters are its (max_len, C) input table.
    const int64_t overhead = groups["positional"] - m.max_position_embeddings * m.hidden_size;
    if (args.get("format") == "json") {
        // Every model.* field, walked from the config table (index.json's "config" too).
        nlohmann::json j = nlohmann::json::parse(analysis::model_config_json(m));
        j["checkpoint"] = path;
        j["positions"] = engine::describe_position(m).summary;
        j["scheme_fields"] = engine::describe_position(m).fields;
        j["scheme_sources"] = engine::describe_position(m).sources;
        j["backbone"] = engine::describe_backbone(m);
        j["step"] = ckpt.step;
        j["steps"] = ckpt.config.train.steps;
        j["validation"] = nlohmann::json::array();
        for (const auto& e : ckpt.evals)
            j["validation"].push_back(
                {{"step", e.step}, {"loss", e.loss}, {"accuracy", e.accuracy}});
        if (has_floor) {
            j["floor"] = {{"unigram_nats", floor.unigram_nats},
                          {"bigram_nats", floor.bigram_nats},
                          {"validation_tokens", floor.validation_tokens}};
            if (floor.context_free_nats > 0)
                j["floor"]["context_free_nats"] = floor.context_free_nats;
            if (!ckpt.evals.empty())
                j["floor"]["warning"] = engine::floor_warning(ckpt.evals.back().loss, floor);
        } else {
            j["floor"] = nullptr;
        }
        j["parameters"] = groups;
        j["positional_over_bert_a"] = overhead;
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    std::cout << "checkpoint   " << path << "\n"
              << "variant      " << m.preset << " (size " << m.size << ")\n"
              << "positions    " << engine::describe_position(m).summary << "\n"
              << "             absolute=" << m.absolute_position
              << " relative=" << m.relative_position
              << " untie_cls=" << (m.untie_cls ? "on" : "off")
              << " shared_pos_term=" << (m.shared_pos_term ? "on" : "off") << " scale=1/sqrt("
              << m.attention_scale_factor << "d)" << (m.pre_layernorm ? " pre-LN" : " post-LN")
              << "\n";
    // The other fields the scheme's rows read (engine::SchemeRow::fields), at their values.
    std::string fields;
    for (const auto& f : engine::describe_position(m).fields)
        if (f != "untie_cls" && f != "shared_pos_term")
            fields += " " + f + "=" + engine::get_config_value(ckpt.config, "model." + f);
    if (!fields.empty()) std::cout << "            " << fields << "\n";
    std::string sources;
    for (const auto& source : engine::describe_position(m).sources)
        sources += (sources.empty() ? "" : "; ") + source;
    if (!sources.empty()) std::cout << "sources      " << sources << "\n";
    std::cout << "backbone     " << engine::describe_backbone(m) << "\n"
              << "shape        layers=" << m.num_hidden_layers << " hidden=" << m.hidden_size
              << " heads=" << m.num_attention_heads << " ffn=" << m.intermediate_size
              << " max_len=" << m.max_position_embeddings << " vocab=" << m.vocab_size << "\n"
              << "progress     step " << ckpt.step << " of " << ckpt.config.train.steps << "\n";
    if (!ckpt.evals.empty()) {
        const auto& e = ckpt.evals.back();
        std::cout << "validation   loss " << e.loss << ", accuracy " << e.accuracy << " at step "
                  << e.step << "\n";
    }
    if (has_floor) {
        std::cout << "floor        unigram " << floor.unigram_nats << " nats, ";
        if (floor.context_free_nats > 0)
            std::cout << "context-free " << floor.context_free_nats << " nats, ";
        std::cout << "bigram " << floor.bigram_nats << " nats (validation MLM targets, "
                  << floor.validation_tokens << " tokens)\n";
        if (!ckpt.evals.empty()) {
            const std::string w = engine::floor_warning(ckpt.evals.back().loss, floor);
            if (!w.empty()) std::cout << w << "\n";
        }
    }
    std::cout << "\nparameters\n";
    for (const auto& [group, n] : engine::parameter_groups(*ckpt.model))
        if (group != "total")
            std::cout << "  " << group << std::string(12 - group.size(), ' ')
                      << format_count(static_cast<double>(n)) << "\n";
    std::cout << "  total       " << format_count(static_cast<double>(groups["total"])) << "\n";
    std::cout << "  over bert-a " << (overhead >= 0 ? "+" : "-")
              << format_count(static_cast<double>(overhead >= 0 ? overhead : -overhead)) << " ("
              << (overhead >= 0 ? "+" : "")
              << std::to_string(100.0 * static_cast<double>(overhead) /
                                static_cast<double>(groups["total"] - overhead))
                     .substr(0, 5)
              << "%: positional parameters against bert-a's position table of the same shape)\n";
    return 0;
}

namespace {

/// The vocabulary of a pretraining checkpoint: --vocab, else the copy the run directory keeps
/// beside the checkpoint, else the config's data.vocab.
std::string checkpoint_vocab(const Args& args, const std::string& checkpoint,
                             const engine::PretrainConfig& config) {
    if (args.has("vocab")) return args.get("vocab");
    const std::string beside = (fs::path(checkpoint).parent_path() / "vocab.txt").string();
    return fs::exists(beside) ? beside : config.data.vocab;
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// One torch.save-style file (zip, a dict of HF-named tensors) that Python's torch.load reads.
void export_torch_file(engine::BertForMaskedLM& model, const std::string& out) {
    c10::Dict<std::string, torch::Tensor> dict;
    for (const auto& [name, tensor] : engine::named_weights(model))
        dict.insert(name, tensor.detach().cpu().contiguous());
    const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
    if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path());
    const std::string tmp = out + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!f) throw engine::InputError(out, "cannot write export");
    }
    fs::rename(tmp, out);
    std::cout << "wrote " << out << " (" << dict.size() << " tensors, HF parameter names)\n";
}

}  // namespace

// --out DIR: an HF folder (config.json, model.safetensors, vocab.txt, tokenizer_config.json, and
// for model_type "tupe" the python/tupe_hf/ code its auto_map names) that transformers and
// `tupe analyze DIR` read back; --out FILE.pt or FILE.bin: one torch.load-readable file of
// HF-named tensors. CHECKPOINT may also be an HF folder (analysis::import_hf_bert): a model
// transformers saved goes out again under the same names.
int cmd_export(const Argv& argv) {
    Args args(argv, command_spec("export"));
    const std::string path = one_checkpoint(args), out = args.required("out");
    std::error_code ec;
    const bool hf_in = fs::is_directory(path, ec);
    std::vector<std::string> notes;
    if (hf_in ? analysis::hf_folder_is_classifier(path) : engine::is_finetuned_checkpoint(path)) {
        // A fine-tuned run (or a transformers sequence classifier): the encoder with its pooler
        // and task head, for AutoModelForSequenceClassification.
        if (ends_with(out, ".pt") || ends_with(out, ".bin"))
            throw engine::InputError(out,
                                     "a fine-tuned classifier exports to an HF folder only "
                                     "(give --out DIR)");
        LoadedClassifier c = load_classifier(path, args.get("vocab"));
        analysis::export_hf_classifier(c.model, c.head, c.vocab_path, c.tokenizer->lower_case(),
                                       out, &notes);
        for (const auto& note : c.notes) std::cerr << "tupe export: note: " << note << "\n";
        for (const auto& note : notes) std::cerr << "tupe export: note: " << note << "\n";
        const bool bert =
            analysis::hf_config_for(c.model->config()).find("\"model_type\": \"bert\"") !=
            std::string::npos;
        std::string labels;
        for (const auto& l : c.head.labels) labels += (labels.empty() ? "" : ", ") + l;
        std::cout << "wrote " << out << ": config.json ("
                  << (bert ? "model_type bert, loadable by transformers' "
                             "BertForSequenceClassification"
                           : "model_type tupe, loadable by transformers' "
                             "AutoModelForSequenceClassification with trust_remote_code=True "
                             "through python/tupe_hf/ (auto_map)")
                  << "; " << c.head.labels.size() << " labels: " << labels
                  << "), model.safetensors, vocab.txt, tokenizer_config.json"
                  << (bert ? "" : ", *.py") << " (" << c.what << ")\n";
        return 0;
    }
    engine::BertForMaskedLM model{nullptr};
    std::string vocab, what;
    bool lower_case = true;
    if (hf_in) {
        model = analysis::import_hf_bert(path, &notes);
        vocab = args.has("vocab") ? args.get("vocab") : (fs::path(path) / "vocab.txt").string();
        lower_case = analysis::read_hf_lower_case(path, true);
        what = "imported from " + path;
    } else {
        auto ckpt = engine::load_checkpoint(path);
        model = ckpt.model;
        vocab = checkpoint_vocab(args, path, ckpt.config);
        lower_case = ckpt.config.data.lower_case;
        what = ckpt.config.model.preset + ", step " + std::to_string(ckpt.step);
    }
    if (ends_with(out, ".pt") || ends_with(out, ".bin")) {
        export_torch_file(model, out);
        return 0;
    }
    analysis::export_hf_bert(model, vocab, lower_case, out, &notes);
    for (const auto& note : notes) std::cerr << "tupe export: note: " << note << "\n";
    const auto& m = model->bert->config();
    const bool bert =
        analysis::hf_config_for(m).find("\"model_type\": \"bert\"") != std::string::npos;
    std::cout << "wrote " << out << ": config.json ("
              << (bert ? "model_type bert, loadable by transformers' BertForMaskedLM"
                       : "model_type tupe, loadable by transformers' AutoModelForMaskedLM with "
                         "trust_remote_code=True through python/tupe_hf/ (auto_map)")
              << "), model.safetensors, vocab.txt, tokenizer_config.json" << (bert ? "" : ", *.py")
              << " (" << what << ")\n";
    return 0;
}

int cmd_inspect(const Argv& argv) {
    Args args(argv, command_spec("inspect"));
    const std::string path = one_checkpoint(args), out = args.required("out");
    if (args.has("bertviz")) {
        const std::string ext = fs::path(args.get("bertviz")).extension().string();
        if (ext != ".json" && ext != ".html" && ext != ".htm")
            throw UsageError("--bertviz takes FILE.json or FILE.html, got '" + args.get("bertviz") +
                             "'");
    }
    LoadedModel m = load_model(path, args.get("vocab"), /*cased=*/false);
    auto result =
        analysis::inspect_text(m.model, *m.tokenizer, args.required("text"), args.get("text-b"));
    analysis::write_inspection(result, out);
    std::cout << "wrote " << out << ": " << result.tokens.size() << " tokens, "
              << result.logits.size() << " layers of logits and probabilities (heads x T x T)\n";
    if (args.has("bertviz")) {
        // bertviz's layout (FILE.json, or FILE.html embedding it): probabilities only.
        const std::string file = args.get("bertviz");
        analysis::write_bertviz(result, path, m.model->config().preset, file);
        std::cout << "wrote " << file << ": bertviz head_view/model_view attention ("
                  << result.probs.size() << " layers x "
                  << (result.probs.empty() ? 0 : result.probs[0].size(0)) << " heads x "
                  << result.tokens.size() << " x " << result.tokens.size() << ")\n";
    }
    return 0;
}

int cmd_fill_mask(const Argv& argv) {
    Args args(argv, command_spec("fill-mask"));
    const std::string path = one_checkpoint(args);
    const std::string text = args.required("text");
    const int64_t top_k = args.get_int("top-k");
    std::error_code ec;
    if (!fs::exists(path, ec)) throw engine::InputError(path, "no such checkpoint or HF folder");
    engine::BertForMaskedLM model{nullptr};
    std::unique_ptr<engine::WordPieceTokenizer> tokenizer;
    if (fs::is_directory(path, ec)) {
        std::vector<std::string> notes;
        model = analysis::import_hf_bert(path, &notes);
        // import_hf_bert initialises a missing head afresh (and says so): its predictions would
        // be noise, so a folder without cls.predictions.* is refused here.
        for (const auto& note : notes)
            if (note.find("no MLM head") != std::string::npos)
                throw engine::InputError(path,
                                         "has no MLM head (cls.predictions.*): fill-mask needs a "
                                         "BertForMaskedLM or a tupe export");
        engine::Vocab vocab = args.has("vocab")
                                  ? engine::Vocab::load(args.get("vocab"))
                                  : analysis::import_hf_vocab(path, model->bert->config());
        tokenizer = std::make_unique<engine::WordPieceTokenizer>(
            std::move(vocab), analysis::read_hf_lower_case(path, true));
    } else {
        auto ckpt = engine::load_checkpoint(path);
        model = ckpt.model;
        const std::string vocab = checkpoint_vocab(args, path, ckpt.config);
        tokenizer = std::make_unique<engine::WordPieceTokenizer>(engine::Vocab::load(vocab),
                                                                 ckpt.config.data.lower_case);
    }
    if (tokenizer->vocab().size() > model->bert->config().vocab_size)
        throw engine::InputError(args.has("vocab") ? args.get("vocab") : path,
                                 std::to_string(tokenizer->vocab().size()) +
                                     " tokens, more than the model's vocab_size = " +
                                     std::to_string(model->bert->config().vocab_size));
    const auto result = analysis::fill_mask(model, *tokenizer, text, top_k);
    if (args.get("format") == "json") {
        std::cout << analysis::fill_mask_json(result);
        return 0;
    }
    for (const auto& m : result.masks) {
        std::cout << "[MASK] at position " << m.position << "\n";
        for (size_t r = 0; r < m.top.size(); ++r) {
            char line[160];
            std::snprintf(line, sizeof line, "  %2zu  %-20s %6lld  %10.4f\n", r + 1,
                          m.top[r].token.c_str(), static_cast<long long>(m.top[r].id),
                          m.top[r].logprob);
            std::cout << line;
        }
    }
    return 0;
}

int cmd_classify(const Argv& argv) {
    Args args(argv, command_spec("classify"));
    const std::string path = one_checkpoint(args);
    LoadedClassifier c = load_classifier(path, args.get("vocab"));
    const analysis::Classification r =
        analysis::classify_text(c.model, *c.tokenizer, args.required("text"), args.get("text-b"));
    size_t best = 0;
    for (size_t i = 1; i < r.logits.size(); ++i)
        if (r.logits[i] > r.logits[best]) best = i;
    if (args.get("format") == "json") {
        nlohmann::json j = {{"task", c.head.task}, {"tokens", r.tokens}};
        if (c.head.regression) {
            j["score"] = r.logits.at(0);
        } else {
            nlohmann::json labels = nlohmann::json::array();
            for (size_t i = 0; i < r.logits.size(); ++i)
                labels.push_back({{"label", c.head.labels[i]},
                                  {"logit", r.logits[i]},
                                  {"probability", r.probabilities[i]}});
            j["labels"] = labels;
            j["predicted"] = c.head.labels[best];
        }
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    std::cout << c.what << "\n";
    for (const auto& note : c.notes) std::cout << "note: " << note << "\n";
    std::string tokens;
    for (const auto& t : r.tokens) tokens += (tokens.empty() ? "" : " ") + t;
    std::cout << "tokens: " << tokens << "\n";
    if (c.head.regression) {
        char line[96];
        std::snprintf(line, sizeof line, "score %.4f\n", r.logits.at(0));
        std::cout << line;
        return 0;
    }
    char line[200];
    std::snprintf(line, sizeof line, "  %-24s %10s %12s\n", "label", "logit", "probability");
    std::cout << line;
    for (size_t i = 0; i < r.logits.size(); ++i) {
        std::snprintf(line, sizeof line, "%s %-24s %10.4f %12.4f\n", i == best ? "*" : " ",
                      c.head.labels[i].c_str(), r.logits[i], r.probabilities[i]);
        std::cout << line;
    }
    std::cout << "predicted: " << c.head.labels[best] << "\n";
    return 0;
}

}  // namespace cli
