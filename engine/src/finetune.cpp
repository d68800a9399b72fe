// GLUE-style fine-tuning (see finetune.h): the sequence-classification model, length-bucketed
// batching and the training loop. The optimiser, schedule and autocast are those of
// pretraining (optim_util.h), so both loops treat weight decay and warm-up the same way.
#include "engine/finetune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "engine/corpus.h"
#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/precision.h"
#include "engine/threads.h"
#include "engine/trainer.h"
#include "optim_util.h"

namespace engine {

namespace F = torch::nn::functional;

namespace {

// Batches per length-sorted chunk: enough to group similar lengths, few enough that the
// batches of an epoch still mix (as fairseq's and AllenNLP's bucket iterators).
constexpr size_t kBucketBatches = 50;
// Seed stream for the batch order, distinct from the example permutation's.
constexpr uint64_t kBatchOrderStream = 0x62617463685f6f72ULL;  // "batch_or"

// AdamW for fine-tuning as in fairseq's RoBERTa GLUE recipe (the TUPE reference is a fairseq
// fork): betas (0.9, 0.98), eps 1e-6.
constexpr double kAdamBeta1 = 0.9, kAdamBeta2 = 0.98, kAdamEps = 1e-6;

// Model fields that may differ between the pretrained and the fine-tuned encoder without
// changing what the copied weights compute (names and dropout).
const std::vector<std::string> kFreeModelKeys = {
    "model.preset", "model.size", "model.hidden_dropout_prob", "model.attention_probs_dropout_prob",
    "model.initializer_range"};

struct Encoded {
    std::vector<int64_t> ids, types;
};

struct Batch {
    torch::Tensor input_ids, attention_mask, token_type_ids;  // (B, T) each
    torch::Tensor labels;                                     // (B) long, or (B) float targets
};

std::vector<Encoded> encode_all(const WordPieceTokenizer& tokenizer,
                                const std::vector<LabeledText>& examples, int64_t max_len) {
    std::vector<Encoded> out;
    out.reserve(examples.size());
    for (const auto& ex : examples) {
        Encoding e = tokenizer.encode(ex.text_a, ex.text_b, max_len, !ex.text_b.empty());
        out.push_back({std::move(e.input_ids), std::move(e.token_type_ids)});
    }
    return out;
}

// Pads the chosen examples to the longest of them (not to max_seq_len).
Batch make_batch(const std::vector<Encoded>& data, const std::vector<size_t>& idx,
                 const std::vector<LabeledText>* examples, bool regression, int64_t pad_id,
                 torch::Device device) {
    const size_t B = idx.size();
    size_t T = 0;
    for (size_t i : idx) T = std::max(T, data[i].ids.size());
    std::vector<int64_t> ids(B * T, pad_id), mask(B * T, 0), types(B * T, 0);
    for (size_t b = 0; b < B; ++b) {
        const Encoded& e = data[idx[b]];
        std::copy(e.ids.begin(), e.ids.end(), ids.begin() + b * T);
        std::copy(e.types.begin(), e.types.end(), types.begin() + b * T);
        std::fill_n(mask.begin() + b * T, e.ids.size(), 1);
    }
    // (B*T) -> (B, T), row-major as filled above.
    const std::vector<int64_t> shape = {static_cast<int64_t>(B), static_cast<int64_t>(T)};
    Batch out;
    out.input_ids = torch::tensor(ids, torch::kLong).view(shape).to(device);
    out.attention_mask = torch::tensor(mask, torch::kLong).view(shape).to(device);
    out.token_type_ids = torch::tensor(types, torch::kLong).view(shape).to(device);
    if (examples) {
        if (regression) {
            std::vector<float> t;
            for (size_t i : idx) t.push_back((*examples)[i].target);
            out.labels = torch::tensor(t, torch::kFloat).to(device);
        } else {
            std::vector<int64_t> l;
            for (size_t i : idx) l.push_back((*examples)[i].label);
            out.labels = torch::tensor(l, torch::kLong).to(device);
        }
    }
    return out;
}

// Logits (B, L) in fp32 (autocast may produce bf16/fp16) -> scalar loss: the mean over the
// batch, or with data parallelism this shard's sum over the global batch size `denominator`
// (the ranks' losses then add up to the global batch's mean, and so do their gradients).
torch::Tensor task_loss(const torch::Tensor& logits, const torch::Tensor& labels, bool regression,
                        int64_t denominator = 0) {
    auto x = logits.to(torch::kFloat);
    if (denominator <= 0) {
        if (regression) return F::mse_loss(x.view({-1}), labels);  // (B, 1) -> (B)
        return F::cross_entropy(x, labels);
    }
    const auto sum =
        regression
            ? F::mse_loss(x.view({-1}), labels, F::MSELossFuncOptions(torch::kSum))
            : F::cross_entropy(x, labels, F::CrossEntropyFuncOptions().reduction(torch::kSum));
    return sum / static_cast<double>(denominator);
}

// Rank `rank`'s contiguous share of `n` items: [begin, end), sizes differing by at most one.
std::pair<size_t, size_t> shard_of(size_t n, int rank, int world) {
    return {n * static_cast<size_t>(rank) / static_cast<size_t>(world),
            n * static_cast<size_t>(rank + 1) / static_cast<size_t>(world)};
}

// Predictions for one dev set, in its order: argmax label (as double) or the regressed value.
// With `dist`, rank r predicts batches r, r + world, ... and the ranks sum their vectors.
std::vector<double> predict(BertForSequenceClassification& model, const std::vector<Encoded>& data,
                            int64_t batch_size, int64_t pad_id, const FinetuneConfig& config,
                            torch::Device device, DistributedContext* dist) {
    torch::NoGradGuard no_grad;
    const bool regression = config.num_labels == 1;
    // Sorted by length so that each batch pads little; results go back to their indices.
    std::vector<size_t> order(data.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return data[a].ids.size() < data[b].ids.size(); });
    std::vector<double> out(data.size(), 0.0);
    const size_t stride = static_cast<size_t>(batch_size) * (dist ? dist->world_size() : 1);
    const size_t first = static_cast<size_t>(batch_size) * (dist ? dist->rank() : 0);
    for (size_t begin = first; begin < order.size(); begin += stride) {
        const std::vector<size_t> idx(
            order.begin() + begin,
            order.begin() + std::min(order.size(), begin + static_cast<size_t>(batch_size)));
        Batch b = make_batch(data, idx, nullptr, regression, pad_id, device);
        torch::Tensor logits;
        {
            detail::AutocastGuard autocast(config.dtype, device, "finetune.dtype");
            logits = model->forward(b.input_ids, b.attention_mask, b.token_type_ids);
        }
        // (B, L) -> (B): the value itself for regression, the best class otherwise.
        auto values =
            regression ? logits.to(torch::kFloat).view({-1}) : logits.argmax(-1).to(torch::kFloat);
        values = values.to(torch::kDouble).cpu().contiguous();
        const double* p = values.data_ptr<double>();
        for (size_t k = 0; k < idx.size(); ++k) out[idx[k]] = p[k];
    }
    if (dist && !out.empty()) {
        auto all = torch::from_blob(out.data(), {static_cast<int64_t>(out.size())}, torch::kDouble)
                       .to(dist->device());
        dist->all_reduce_sum_(all);
        all = all.cpu().contiguous();
        std::copy(all.data_ptr<double>(), all.data_ptr<double>() + out.size(), out.begin());
    }
    return out;
}

void validate(const FinetuneConfig& c, const ModelConfig& model, const WordPieceTokenizer& tok,
              const std::vector<LabeledText>& train) {
    auto fail = [](const std::string& m) { throw std::invalid_argument("finetune." + m); };
    if (c.num_labels < 1)
        fail("num_labels must be >= 1 (1 = regression), got " + std::to_string(c.num_labels));
    if (c.epochs < 1) fail("epochs must be >= 1, got " + std::to_string(c.epochs));
    if (c.batch_size < 1) fail("batch_size must be >= 1, got " + std::to_string(c.batch_size));
    if (!(c.lr > 0) || !std::isfinite(c.lr)) fail("lr must be a positive number");
    if (!(c.warmup_ratio >= 0 && c.warmup_ratio <= 1)) fail("warmup_ratio must be in [0, 1]");
    if (!(c.weight_decay >= 0)) fail("weight_decay must be >= 0");
    if (!(c.classifier_dropout >= 0 && c.classifier_dropout < 1))
        fail("classifier_dropout must be in [0, 1)");
    if (!(c.clip_norm >= 0)) fail("clip_norm must be >= 0 (0 = off)");
    if (c.max_seq_len < 3 || c.max_seq_len > model.max_position_embeddings)
        fail("max_seq_len (" + std::to_string(c.max_seq_len) +
             ") must be in [3, model.max_position_embeddings = " +
             std::to_string(model.max_position_embeddings) + "]");
    if (tok.vocab().size() > model.vocab_size)
        throw std::invalid_argument("the tokenizer's vocabulary (" +
                                    std::to_string(tok.vocab().size()) +
                                    " tokens) is larger than the model's vocab_size (" +
                                    std::to_string(model.vocab_size) + ")");
    if (train.empty()) throw std::invalid_argument("fine-tuning needs at least one train example");
    for (size_t i = 0; i < train.size(); ++i) {
        if (c.num_labels == 1) {
            if (!std::isfinite(train[i].target))
                throw std::invalid_argument("train example " + std::to_string(i) +
                                            ": regression target is not finite");
        } else if (train[i].label < 0 || train[i].label >= c.num_labels) {
            throw std::invalid_argument("train example " + std::to_string(i) + ": label " +
                                        std::to_string(train[i].label) + " is outside [0, " +
                                        std::to_string(c.num_labels) + ")");
        }
    }
}

}  // namespace

// ---- model ------------------------------------------------------------------------------------

BertPoolerImpl::BertPoolerImpl(const ModelConfig& c) {
    dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.hidden_size));
}

torch::Tensor BertPoolerImpl::forward(const torch::Tensor& hidden_states) {
    // (B, T, C) -> (B, C): the [CLS] state (position 0).
    return torch::tanh(dense(hidden_states.select(1, 0)));
}

BertForSequenceClassificationImpl::BertForSequenceClassificationImpl(const ModelConfig& config,
                                                                     int64_t num_labels,
                                                                     double classifier_dropout)
    : num_labels_(num_labels) {
    TORCH_CHECK(num_labels >= 1, "num_labels must be >= 1 (1 = regression), got ", num_labels);
    bert = register_module("bert", BertModel(config));
    pooler = register_module("pooler", BertPooler(bert->config()));
    dropout = register_module("dropout", torch::nn::Dropout(classifier_dropout));
    classifier =
        register_module("classifier", torch::nn::Linear(bert->config().hidden_size, num_labels));
    // N(0, initializer_range), zero biases: HF's _init_weights for the new heads.
    init_bert_weights(*pooler, bert->config());
    init_bert_weights(*classifier, bert->config());
}

torch::Tensor BertForSequenceClassificationImpl::forward(const torch::Tensor& input_ids,
                                                         const torch::Tensor& attention_mask,
                                                         const torch::Tensor& token_type_ids) {
    auto h = bert->forward(input_ids, attention_mask, token_type_ids).last_hidden_state;
    return classifier(dropout(pooler(h)));  // (B, T, C) -> (B, C) -> (B, L)
}

void BertForSequenceClassificationImpl::load_pretrained(BertForMaskedLM& pretrained) {
    // Same encoder structure and the same positional behaviour (untie_cls, scale factor, ...
    // change the computation without changing the parameters).
    PretrainConfig mine, theirs;
    mine.model = config();
    theirs.model = pretrained->config();
    for (const auto& key : config_keys()) {
        if (key.rfind("model.", 0) != 0 ||
            std::find(kFreeModelKeys.begin(), kFreeModelKeys.end(), key) != kFreeModelKeys.end())
            continue;
        const auto a = get_config_value(mine, key), b = get_config_value(theirs, key);
        TORCH_CHECK(a == b, "load_pretrained: the pretrained model has ", key, " = ", b,
                    " but this model has ", a);
    }
    torch::NoGradGuard no_grad;
    auto copy_all = [](torch::OrderedDict<std::string, torch::Tensor> dst,
                       const torch::OrderedDict<std::string, torch::Tensor>& src) {
        TORCH_CHECK(dst.size() == src.size(), "load_pretrained: the pretrained encoder has ",
                    src.size(), " tensors, this one ", dst.size());
        for (auto& item : dst) {
            const torch::Tensor* from = src.find(item.key());
            TORCH_CHECK(from != nullptr, "load_pretrained: no bert.", item.key(),
                        " in the pretrained model");
            TORCH_CHECK(from->sizes() == item.value().sizes(), "load_pretrained: bert.", item.key(),
                        " is ", from->sizes(), " in the pretrained model but ",
                        item.value().sizes(), " here");
            item.value().copy_(*from);  // copies across devices and dtypes; `from` is only read
        }
    };
    copy_all(bert->named_parameters(), pretrained->bert->named_parameters());
    copy_all(bert->named_buffers(), pretrained->bert->named_buffers());
}

// ---- batching ---------------------------------------------------------------------------------

std::vector<std::vector<size_t>> bucketed_batches(const std::vector<int64_t>& lengths,
                                                  int64_t batch_size, uint64_t seed,
                                                  uint64_t epoch) {
    TORCH_CHECK(batch_size >= 1, "batch_size must be >= 1, got ", batch_size);
    const size_t n = lengths.size(), bs = static_cast<size_t>(batch_size);
    // epoch_order (corpus.h) is the (seed, epoch) permutation pretraining uses as well.
    const std::vector<uint64_t> order = epoch_order(n, seed, epoch);
    const size_t chunk = bs * kBucketBatches;
    std::vector<std::vector<size_t>> batches;
    batches.reserve((n + bs - 1) / bs);
    std::vector<size_t> idx;
    for (size_t begin = 0; begin < n; begin += chunk) {
        idx.assign(order.begin() + begin, order.begin() + std::min(n, begin + chunk));
        // Stable: equal lengths keep their random order.
        std::stable_sort(idx.begin(), idx.end(),
                         [&](size_t a, size_t b) { return lengths[a] < lengths[b]; });
        for (size_t b = 0; b < idx.size(); b += bs)
            batches.emplace_back(idx.begin() + b, idx.begin() + std::min(idx.size(), b + bs));
    }
    // Shuffled so that an epoch does not run from short to long within each chunk.
    const std::vector<uint64_t> batch_order =
        epoch_order(batches.size(), seed ^ kBatchOrderStream, epoch);
    std::vector<std::vector<size_t>> out;
    out.reserve(batches.size());
    for (uint64_t k : batch_order) out.push_back(std::move(batches[k]));
    return out;
}

// ---- training ---------------------------------------------------------------------------------

namespace {

// Sends `m` to the message callback, if any.
void finetune_say(const FinetuneCallbacks& cb, const std::string& m) {
    if (cb.on_message) cb.on_message(m);
}

// The device finetune.device names; errors name that key.
torch::Device resolve_finetune_device(const std::string& name) {
    try {
        return resolve_device(name);
    } catch (const std::invalid_argument& e) {
        // resolve_device names pretraining's key; this run's key is finetune.device.
        std::string m = e.what();
        if (m.rfind("train.", 0) == 0) m = "finetune." + m.substr(6);
        throw std::invalid_argument(m);
    }
}

// The dtype to train in: finetune.dtype, with "auto" resolved (and agreed on by all ranks).
std::string resolve_finetune_dtype(const std::string& requested, torch::Device device,
                                   DistributedContext* dist, const FinetuneCallbacks& cb) {
    // "auto" -> fp32 or bf16 by the measured matmul rates (engine/precision.h).
    PrecisionChoice precision = choose_precision(requested, device, "finetune.dtype");
    if (requested == "auto" && dist && precision.dtype == "bf16" &&
        dist->all_reduce_sum({1.0})[0] < static_cast<double>(dist->world_size())) {
        precision.dtype = "fp32";
        precision.reason += "; another rank measured bf16 as slow";
    } else if (requested == "auto" && dist && precision.dtype != "bf16") {
        dist->all_reduce_sum({0.0});  // every rank takes part in the vote
    }
    if (requested == "auto")
        finetune_say(cb, "finetune.dtype auto -> " + precision.dtype + ": " + precision.reason);
    return precision.dtype;
}

// Token counts of the encoded examples, for length bucketing.
std::vector<int64_t> encoded_lengths(const std::vector<Encoded>& data) {
    std::vector<int64_t> lengths;
    lengths.reserve(data.size());
    for (const auto& e : data) lengths.push_back(static_cast<int64_t>(e.ids.size()));
    return lengths;
}

// With data parallelism: checks that every rank has the same data, gives every rank rank 0's
// weights and returns the gradient reducer. Without: nothing.
std::unique_ptr<GradientReducer> sync_finetune_ranks(BertForSequenceClassification& model,
                                                     size_t train_size, size_t dev_set_count,
                                                     DistributedContext* dist) {
    if (!dist) return nullptr;
    const int world = dist->world_size();
    // The same data everywhere (each rank reads its own copy of the task files), then one
    // set of weights: rank 0's.
    const std::vector<double> sizes = {static_cast<double>(train_size),
                                       static_cast<double>(dev_set_count)};
    if (dist->all_reduce_sum(sizes) != std::vector<double>{sizes[0] * world, sizes[1] * world})
        throw DistributedError("rank " + std::to_string(dist->rank()) + ": " +
                               std::to_string(train_size) + " train examples and " +
                               std::to_string(dev_set_count) +
                               " dev sets, but not every rank has the same; each rank must "
                               "read the same task files");
    auto tensors = model->parameters();
    for (const auto& b : model->buffers()) tensors.push_back(b);
    dist->broadcast(tensors);
    return std::make_unique<GradientReducer>(*dist, model->parameters());
}

// Step counts of the learning-rate schedule.
struct FinetuneSchedule {
    int64_t steps_per_epoch = 0, total_steps = 0, warmup_steps = 0;
};

// The schedule for `n` train examples.
FinetuneSchedule finetune_schedule(const FinetuneConfig& config, int64_t n) {
    FinetuneSchedule s;
    s.steps_per_epoch = (n + config.batch_size - 1) / config.batch_size;
    s.total_steps = s.steps_per_epoch * config.epochs;
    // Rounded up, as HF's TrainingArguments.get_warmup_steps.
    s.warmup_steps =
        static_cast<int64_t>(std::ceil(config.warmup_ratio * static_cast<double>(s.total_steps)));
    return s;
}

// The one-line summary announced before training.
std::string describe_finetune_run(const ModelConfig& model_config, const FinetuneConfig& config,
                                  int64_t n, size_t dev_set_count, const FinetuneSchedule& s,
                                  torch::Device device, DistributedContext* dist) {
    std::ostringstream os;
    os << "fine-tuning " << model_config.preset << ": " << n << " train examples, " << dev_set_count
       << " dev set(s), " << config.epochs << " epochs of " << s.steps_per_epoch << " steps, "
       << s.warmup_steps << " warm-up steps, on " << device.str();
    if (dist) os << ", " << dist->world_size() << " ranks (" << dist->backend_name() << ")";
    return os.str();
}

// What a training step needs, fixed for the whole run.
struct FinetuneStepContext {
    const FinetuneConfig& config;
    DistributedContext* dist;
    BertForSequenceClassification& model;
    torch::optim::AdamW& optimizer;
    GradientReducer* reducer;
    const std::vector<torch::Tensor>& params;
    const std::vector<Encoded>& train_enc;
    const std::vector<LabeledText>& train;
    int64_t pad_id;
    torch::Device device;
    FinetuneSchedule schedule;
};

// This process's examples of the global batch `idx`, seeding its dropout stream.
std::vector<size_t> finetune_shard(const FinetuneStepContext& s, const std::vector<size_t>& idx,
                                   int64_t step) {
    // This process's examples of the global batch: all of them, or a rank's shard
    // (possibly empty when the batch has fewer examples than there are ranks).
    std::vector<size_t> mine = idx;
    if (s.dist) {
        const int rank = s.dist->rank();
        const auto [begin, end] = shard_of(idx.size(), rank, s.dist->world_size());
        mine.assign(idx.begin() + static_cast<std::ptrdiff_t>(begin),
                    idx.begin() + static_cast<std::ptrdiff_t>(end));
        // Dropout: an own stream per rank and step.
        torch::manual_seed(s.config.seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(step + 1) +
                           static_cast<uint64_t>(rank));
    }
    return mine;
}

// Forward pass and loss of this process's examples `mine` of a global batch of
// `global_size`; undefined when `mine` is empty.
torch::Tensor finetune_loss(const FinetuneStepContext& s, const std::vector<size_t>& mine,
                            size_t global_size) {
    if (mine.empty()) return {};
    const bool regression = s.config.num_labels == 1;
    Batch b = make_batch(s.train_enc, mine, &s.train, regression, s.pad_id, s.device);
    torch::Tensor logits;
    {
        detail::AutocastGuard autocast(s.config.dtype, s.device, "finetune.dtype");
        logits = s.model->forward(b.input_ids, b.attention_mask, b.token_type_ids);
    }
    return task_loss(logits, b.labels, regression, s.dist ? static_cast<int64_t>(global_size) : 0);
}

// One optimiser step on the global batch `idx` (0-based `step` of `epoch`): its loss, or
// nothing when the run stops (`stop` here or, with data parallelism, on any rank).
std::optional<double> finetune_step(const FinetuneStepContext& s, const std::vector<size_t>& idx,
                                    bool stop, int64_t step, int64_t epoch) {
    if (stop && !s.dist) return std::nullopt;
    detail::set_lr(s.optimizer,
                   detail::linear_warmup_decay(s.config.lr, step, s.schedule.warmup_steps,
                                               s.schedule.total_steps));
    s.optimizer.zero_grad();
    const std::vector<size_t> mine = finetune_shard(s, idx, step);
    const torch::Tensor loss = finetune_loss(s, mine, idx.size());
    double value = loss.defined() ? loss.item<double>() : 0.0;
    bool finite = std::isfinite(value);
    if (s.dist) {
        // One small all-reduce: the global batch's loss, and whether any rank stops or
        // diverged (then all do the same, before any gradient is exchanged).
        const auto sums =
            s.dist->all_reduce_sum({finite ? value : 0.0, finite ? 0.0 : 1.0, stop ? 1.0 : 0.0});
        if (sums[2] > 0) return std::nullopt;
        if (sums[1] > 0 && finite) {
            finite = false;
            value = std::numeric_limits<double>::quiet_NaN();
        }
        if (finite) value = sums[0];
    }
    if (!finite)
        throw TrainingDiverged(
            (s.dist ? "rank " + std::to_string(s.dist->rank()) + ": " : std::string()) +
            "fine-tuning step " + std::to_string(step + 1) + " of " +
            std::to_string(s.schedule.total_steps) + " (epoch " + std::to_string(epoch + 1) +
            "): loss is " + std::to_string(value) + " (try a lower lr or clip_norm)");
    if (s.reducer) s.reducer->begin_step(1);
    if (loss.defined()) loss.backward();
    if (s.reducer) s.reducer->finish_step();
    if (s.config.clip_norm > 0) torch::nn::utils::clip_grad_norm_(s.params, s.config.clip_norm);
    s.optimizer.step();
    return value;
}

}  // namespace

FinetuneResult finetune(BertForMaskedLM& pretrained, const WordPieceTokenizer& tokenizer,
                        const std::vector<LabeledText>& train,
                        const std::vector<std::vector<LabeledText>>& dev_sets,
                        const FinetuneConfig& input_config, const FinetuneCallbacks& cb,
                        DistributedContext* dist) {
    FinetuneConfig config = input_config;  // with dtype "auto" resolved below
    using Clock = std::chrono::steady_clock;
    const ModelConfig& model_config = pretrained->config();
    validate(config, model_config, tokenizer, train);
    apply_thread_count(config.threads);
    const torch::Device device = resolve_finetune_device(config.device);
    config.dtype = resolve_finetune_dtype(config.dtype, device, dist, cb);
    const int64_t pad_id = tokenizer.vocab().pad_id();

    // Encoded once; every epoch only re-batches.
    const std::vector<Encoded> train_enc = encode_all(tokenizer, train, config.max_seq_len);
    std::vector<std::vector<Encoded>> dev_enc;
    for (const auto& dev : dev_sets)
        dev_enc.push_back(encode_all(tokenizer, dev, config.max_seq_len));
    const std::vector<int64_t> lengths = encoded_lengths(train_enc);

    // One seed fixes the heads' init and the dropout stream: runs are repeatable.
    torch::manual_seed(config.seed);
    BertForSequenceClassification model(model_config, config.num_labels, config.classifier_dropout);
    model->load_pretrained(pretrained);
    model->to(device);
    const std::unique_ptr<GradientReducer> reducer =
        sync_finetune_ranks(model, train.size(), dev_sets.size(), dist);
    auto optimizer = detail::make_adamw(
        *model, {config.lr, kAdamBeta1, kAdamBeta2, kAdamEps, config.weight_decay});
    const std::vector<torch::Tensor> params = model->parameters();

    const int64_t n = static_cast<int64_t>(train.size());
    const FinetuneSchedule schedule = finetune_schedule(config, n);
    finetune_say(cb, describe_finetune_run(model_config, config, n, dev_sets.size(), schedule,
                                           device, dist));

    const FinetuneStepContext step_context{config,        dist,   model,     optimizer,
                                           reducer.get(), params, train_enc, train,
                                           pad_id,        device, schedule};
    FinetuneResult result;
    int64_t step = 0;
    for (int64_t epoch = 0; epoch < config.epochs; ++epoch) {
        const auto t0 = Clock::now();
        model->train();
        double loss_sum = 0;
        for (const auto& idx : bucketed_batches(lengths, config.batch_size, config.seed,
                                                static_cast<uint64_t>(epoch))) {
            const bool stop = cb.stop && cb.stop->load();
            const std::optional<double> value = finetune_step(step_context, idx, stop, step, epoch);
            if (!value) {
                result.stopped = true;
                finetune_say(cb, "fine-tuning stopped at step " + std::to_string(step));
                return result;
            }
            ++step;
            loss_sum += *value * static_cast<double>(idx.size());
            if (cb.on_step) cb.on_step(step, schedule.total_steps, *value);
        }
        EpochResult r;
        r.epoch = epoch + 1;
        r.train_loss = loss_sum / static_cast<double>(n);
        model->eval();
        for (const auto& dev : dev_enc)
            r.predictions.push_back(
                predict(model, dev, config.batch_size, pad_id, config, device, dist));
        r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        result.epochs.push_back(r);
        if (cb.on_epoch) cb.on_epoch(result.epochs.back());
        if (cb.on_epoch_model) cb.on_epoch_model(result.epochs.back(), model);
    }
    return result;
}

std::vector<std::vector<double>> predict_sets(BertForSequenceClassification& model,
                                              const WordPieceTokenizer& tokenizer,
                                              const std::vector<std::vector<LabeledText>>& sets,
                                              const FinetuneConfig& input_config) {
    FinetuneConfig config = input_config;
    TORCH_CHECK(config.batch_size >= 1, "predict_sets: batch_size must be >= 1, got ",
                config.batch_size);
    TORCH_CHECK(config.num_labels == model->num_labels(), "predict_sets: config.num_labels ",
                config.num_labels, " but the model has ", model->num_labels());
    const auto params = model->parameters();
    const torch::Device device = params.empty() ? torch::Device(torch::kCPU) : params[0].device();
    config.dtype = choose_precision(config.dtype, device, "finetune.dtype").dtype;
    model->eval();
    std::vector<std::vector<double>> out;
    for (const auto& set : sets)
        out.push_back(predict(model, encode_all(tokenizer, set, config.max_seq_len),
                              config.batch_size, tokenizer.vocab().pad_id(), config, device,
                              nullptr));
    return out;
}

}  // namespace engine
