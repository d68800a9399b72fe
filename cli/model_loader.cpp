// The model loader of the reading commands (model_loader.h): checkpoint, HF folder or init:.
#include "model_loader.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "analysis/attention_analysis.h"
#include "analysis/extrapolate.h"
#include "cli_util.h"
#include "engine/errors.h"
#include "engine/trainer.h"

namespace cli {

namespace fs = std::filesystem;

namespace {

engine::Vocab load_vocab_checked(const std::string& path, int64_t model_vocab) {
    engine::Vocab vocab = engine::Vocab::load(path);
    if (vocab.size() != model_vocab)
        throw engine::InputError(path, "has " + std::to_string(vocab.size()) +
                                           " tokens but the model has " +
                                           std::to_string(model_vocab));
    return vocab;
}

}  // namespace

bool is_hf_folder(const std::string& path) {
    return fs::is_directory(path) && fs::is_regular_file(fs::path(path) / "config.json");
}

LoadedModel load_model(const std::string& spec, const std::string& vocab_flag, bool cased,
                       bool primary) {
    LoadedModel out;
    out.name = spec;
    if (spec.rfind("init:", 0) == 0) {
        const std::string rest = spec.substr(5);
        const auto colon = rest.find(':');
        const std::string preset = rest.substr(0, colon);
        const std::string size = colon == std::string::npos ? "base" : rest.substr(colon + 1);
        if (vocab_flag.empty()) throw UsageError(spec + " needs --vocab FILE");
        engine::Vocab vocab = engine::Vocab::load(vocab_flag);
        engine::ModelConfig config = engine::make_model_config(preset, size);
        config.vocab_size = vocab.size();
        torch::manual_seed(1);
        out.kind = "init";
        out.model = engine::BertForMaskedLM(config);
        out.model->eval();
        out.tokenizer = std::make_unique<engine::WordPieceTokenizer>(std::move(vocab), !cased);
        return out;
    }
    if (fs::is_directory(spec)) {
        if (!is_hf_folder(spec))
            throw engine::InputError(spec,
                                     "is a folder without config.json: not an HF model "
                                     "folder (give a run's checkpoint.pt instead)");
        out.kind = "hf";
        out.model = analysis::import_hf_bert(spec, &out.notes, &out.has_mlm_head);
        out.model->eval();
        engine::Vocab vocab = primary && !vocab_flag.empty()
                                  ? load_vocab_checked(vocab_flag, out.model->config().vocab_size)
                                  : analysis::import_hf_vocab(spec, out.model->config());
        // An exported folder says how it was tokenised (tokenizer_config.json); HF BERT
        // folders without one are uncased, as bert-base-uncased.
        const bool lower_case = analysis::read_hf_lower_case(spec, true) && !cased;
        out.tokenizer = std::make_unique<engine::WordPieceTokenizer>(std::move(vocab), lower_case);
        return out;
    }
    auto ckpt = engine::load_checkpoint(spec);
    // The run directory keeps a copy of its vocabulary beside the checkpoint.
    const std::string beside = (fs::path(spec).parent_path() / "vocab.txt").string();
    std::string vocab = primary && !vocab_flag.empty() ? vocab_flag
                        : fs::exists(beside)           ? beside
                        : !vocab_flag.empty()          ? vocab_flag
                                                       : ckpt.config.data.vocab;
    out.kind = "checkpoint";
    out.model = ckpt.model;
    out.step = ckpt.step;
    out.train_length = ckpt.config.data.max_seq_len;
    out.config = ckpt.config;
    out.tokenizer = std::make_unique<engine::WordPieceTokenizer>(
        load_vocab_checked(vocab, ckpt.config.model.vocab_size),
        ckpt.config.data.lower_case && !cased);
    return out;
}

LoadedClassifier load_classifier(const std::string& spec, const std::string& vocab_flag) {
    LoadedClassifier out;
    std::error_code ec;
    if (!fs::exists(spec, ec))
        throw engine::InputError(spec, "no such fine-tuned model or HF folder");
    bool lower_case = true;
    if (fs::is_directory(spec, ec)) {
        if (!is_hf_folder(spec))
            throw engine::InputError(spec,
                                     "is a folder without config.json: not an HF model folder");
        if (!analysis::hf_folder_is_classifier(spec))
            throw engine::InputError(spec,
                                     "config.json names no *ForSequenceClassification "
                                     "architecture: not a fine-tuned classifier (`tupe fill-mask` "
                                     "and `tupe inspect` read encoders)");
        analysis::HfClassifier hf = analysis::import_hf_classifier(spec, &out.notes);
        out.model = hf.model;
        out.head = hf.head;
        out.vocab_path = !vocab_flag.empty() ? vocab_flag : (fs::path(spec) / "vocab.txt").string();
        lower_case = analysis::read_hf_lower_case(spec, true);
        out.what = out.model->config().preset + " classifier from " + spec;
    } else {
        if (!engine::is_finetuned_checkpoint(spec))
            throw engine::InputError(spec,
                                     "is not a fine-tuned model (finetune/JOB/model.pt, written "
                                     "with finetune.save: best)" +
                                         std::string(engine::checkpoint_format(spec).empty()
                                                         ? ""
                                                         : ": it is a pretraining checkpoint"));
        engine::FinetunedCheckpoint ft = engine::load_finetuned(spec);
        out.model = ft.model;
        out.head = analysis::classifier_head_for(ft.task, ft.model->num_labels());
        // runs/VARIANT/finetune/JOB/model.pt: the variant's vocab.txt is two folders up.
        const fs::path job = fs::path(spec).parent_path();
        const fs::path beside = job / "vocab.txt",
                       run = job.parent_path().parent_path() / "vocab.txt";
        out.vocab_path = !vocab_flag.empty()      ? vocab_flag
                         : fs::exists(beside, ec) ? beside.string()
                         : fs::exists(run, ec)    ? run.string()
                                                  : ft.config.data.vocab;
        lower_case = ft.config.data.lower_case;
        out.what = ft.config.model.preset + " fine-tuned on " + out.head.task + ", epoch " +
                   std::to_string(ft.epoch);
    }
    engine::Vocab vocab = engine::Vocab::load(out.vocab_path);
    if (vocab.size() > out.model->config().vocab_size)
        throw engine::InputError(out.vocab_path,
                                 std::to_string(vocab.size()) +
                                     " tokens, more than the model's vocab_size = " +
                                     std::to_string(out.model->config().vocab_size));
    out.tokenizer = std::make_unique<engine::WordPieceTokenizer>(std::move(vocab), lower_case);
    return out;
}

void require_mlm_head(const LoadedModel& m, const std::string& what) {
    if (!m.has_mlm_head)
        throw engine::InputError(m.name, what +
                                             " needs an MLM head and this folder has none "
                                             "(cls.predictions.*: a BertModel or "
                                             "sentence-transformers encoder)");
}

std::vector<int64_t> scored_stream(const LoadedModel& m, const std::string& corpus,
                                   int64_t max_tokens, std::string& text) {
    if (!corpus.empty()) {
        text = corpus;
        return analysis::read_token_stream(corpus, *m.tokenizer, max_tokens);
    }
    if (!m.config)
        throw engine::InputError(m.name,
                                 "has no training corpus to hold text out of: give "
                                 "--corpus FILE");
    text = m.config->data.corpus + " (held-out documents)";
    return validation_stream(*m.config, *m.tokenizer);
}

int64_t default_window_length(const LoadedModel& m) {
    const int64_t table = m.model->config().max_position_embeddings;
    return std::min<int64_t>(m.train_length > 0 ? m.train_length : 128, table);
}

}  // namespace cli
