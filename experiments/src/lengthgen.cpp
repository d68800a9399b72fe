// One run of a length-generalisation study (experiments/lengthgen.h).
#include "experiments/lengthgen.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>

#include "analysis/chomsky_tasks.h"
#include "engine/bert.h"
#include "engine/finetune.h"
#include "engine/tokenizer.h"

namespace experiments {

namespace {

std::vector<engine::LabeledText> to_labeled(const std::vector<analysis::TaskExample>& examples) {
    std::vector<engine::LabeledText> out;
    out.reserve(examples.size());
    for (const auto& e : examples) {
        engine::LabeledText t;
        t.text_a = e.text;
        t.label = e.label;
        out.push_back(std::move(t));
    }
    return out;
}

// Accuracy (percent) on each set with randomized positions at test time too, Ruoss et al.'s
// evaluation: their released code draws the sorted random subset in every forward pass,
// evaluation included (models/positional_encodings.py draws from hk.next_rng_key() with no
// training switch). BertModel draws only in training mode (bert.cpp), so the model runs in
// training mode with every dropout at 0 and gradients off; its dropout rates and eval mode are
// put back before returning. Every set holds inputs of one length: no padding.
std::vector<double> accuracy_at_random_positions(
    engine::BertForSequenceClassification& model, const engine::WordPieceTokenizer& tokenizer,
    const std::vector<std::vector<engine::LabeledText>>& sets, int64_t max_len, int64_t batch) {
    torch::NoGradGuard no_grad;
    std::vector<std::pair<torch::nn::DropoutImpl*, double>> rates;
    for (const auto& m : model->modules(/*include_self=*/false))
        if (auto* d = m->as<torch::nn::DropoutImpl>()) {
            rates.emplace_back(d, d->options.p());
            d->options.p(0.0);
        }
    model->train();
    std::vector<double> out;
    for (const auto& set : sets) {
        int64_t correct = 0;
        for (size_t i = 0; i < set.size(); i += static_cast<size_t>(batch)) {
            const size_t end = std::min(set.size(), i + static_cast<size_t>(batch));
            std::vector<int64_t> ids;
            int64_t T = 0;
            for (size_t k = i; k < end; ++k) {
                const auto enc = tokenizer.encode(set[k].text_a, {}, max_len);
                T = static_cast<int64_t>(enc.input_ids.size());
                ids.insert(ids.end(), enc.input_ids.begin(), enc.input_ids.end());
            }
            const auto input = torch::tensor(ids, torch::kLong).view({-1, T});  // (B, T)
            const auto predicted = model->forward(input).argmax(-1);            // (B, L) -> (B)
            for (size_t k = i; k < end; ++k)
                correct += predicted[static_cast<int64_t>(k - i)].item<int64_t>() == set[k].label;
        }
        out.push_back(100.0 * static_cast<double>(correct) / static_cast<double>(set.size()));
    }
    model->eval();
    for (auto& [d, p] : rates) d->options.p(p);
    return out;
}

}  // namespace

LengthgenResult run_lengthgen_job(const LengthgenStudy& study, const LengthgenJob& job,
                                  const LengthgenCallbacks& callbacks) {
    const auto start = std::chrono::steady_clock::now();
    const auto& task = analysis::chomsky_task(job.task);
    const auto train = to_labeled(analysis::generate_task_examples(
        task, study.train_min_length, study.train_max_length, study.train_examples,
        analysis::task_stream_seed(job.seed, 1, 0)));
    std::vector<std::vector<engine::LabeledText>> tests;
    for (int64_t L : study.test_lengths)
        tests.push_back(to_labeled(analysis::generate_task_examples(
            task, L, L, study.test_examples, analysis::task_stream_seed(job.seed, 2, L))));

    // The task vocabulary, cased: every symbol is one token of its own.
    const engine::WordPieceTokenizer tokenizer(engine::Vocab::from_tokens(lengthgen_vocab()),
                                               /*lower_case=*/false);
    const engine::ModelConfig model_config =
        lengthgen_model_config(study, job.preset, job.randomized);
    torch::manual_seed(job.seed);  // The encoder's init; finetune seeds the heads itself.
    engine::BertForMaskedLM fresh(model_config);

    engine::FinetuneConfig fc;
    fc.num_labels = task.num_classes;
    fc.lr = study.lr;
    fc.epochs = 1;
    fc.batch_size = study.batch_size;
    fc.warmup_ratio = study.warmup_ratio;
    fc.weight_decay = study.weight_decay;
    fc.classifier_dropout = study.dropout;
    fc.max_seq_len =
        std::max(*std::max_element(study.test_lengths.begin(), study.test_lengths.end()),
                 study.train_max_length) +
        2;
    fc.seed = job.seed;
    fc.device = "cpu";
    fc.threads = study.threads;

    engine::FinetuneCallbacks cb;
    cb.on_step = callbacks.on_step;
    cb.stop = callbacks.stop;
    std::vector<double> random_positions_accuracy;
    if (job.randomized)
        cb.on_epoch_model = [&](const engine::EpochResult&,
                                engine::BertForSequenceClassification& model) {
            random_positions_accuracy = accuracy_at_random_positions(
                model, tokenizer, tests, fc.max_seq_len, study.batch_size);
        };
    const auto run = engine::finetune(fresh, tokenizer, train, tests, fc, cb);
    if (run.stopped || run.epochs.empty())
        throw std::runtime_error("lengthgen: " + job.key() + " stopped before it finished");

    LengthgenResult r;
    r.job = job;
    r.lengths = study.test_lengths;
    r.train_loss = run.epochs.back().train_loss;
    r.accuracy_random_positions = random_positions_accuracy;
    const auto& predictions = run.epochs.back().predictions;
    for (size_t k = 0; k < tests.size(); ++k) {
        int64_t correct = 0;
        std::map<int64_t, int64_t> counts;
        for (size_t i = 0; i < tests[k].size(); ++i) {
            correct += static_cast<int64_t>(predictions[k][i]) == tests[k][i].label;
            ++counts[tests[k][i].label];
        }
        int64_t majority = 0;
        for (const auto& [label, n] : counts) majority = std::max(majority, n);
        const double n = static_cast<double>(tests[k].size());
        r.accuracy.push_back(100.0 * static_cast<double>(correct) / n);
        r.majority.push_back(100.0 * static_cast<double>(majority) / n);
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
}

}  // namespace experiments
