// MLM pretraining loop (see trainer.h). Resume is exact because everything a step depends on
// is either in the checkpoint (weights, AdamW moments, torch RNG for dropout, step; the file
// format is checkpoint.cpp) or a pure function of (seed, step): the data order and the masks.
// Data-parallel runs split each step's global batch into one contiguous share per rank; rank 0
// alone writes.
#include "engine/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "checkpoint_internal.h"
#include "engine/corpus.h"
#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/precision.h"
#include "engine/tensorboard.h"
#include "engine/threads.h"
#include "engine/tokenizer.h"
#include "engine/train_step.h"
#include "optim_util.h"

namespace engine {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Keys that may change between a run and its resume without changing what it computes so far.
const std::set<std::string> kRunControlKeys = {
    "train.steps",        "train.eval_interval", "train.eval_batches", "train.checkpoint_interval",
    "train.log_interval", "train.device",        "train.threads",      "train.tensorboard",
    "data.cache_dir",     "data.corpus",         "data.vocab",         "out_dir"};

double lr_at(const TrainConfig& t, int64_t step) {
    return detail::scheduled_lr(t.schedule, t.lr, step, t.warmup_steps, t.steps, t.decay_fraction);
}

torch::optim::AdamW make_optimizer(BertForMaskedLM& model, const TrainConfig& t) {
    return detail::make_adamw(*model,
                              {t.lr, t.adam_beta1, t.adam_beta2, t.adam_eps, t.weight_decay});
}

// Appends metric rows; on resume rows after the checkpoint's step are dropped first, so a run
// killed between checkpoints leaves no duplicated or orphaned points.
class MetricsLog {
  public:
    MetricsLog(const std::string& path, int64_t keep_until_step) : path_(path) {
        std::vector<std::string> kept;
        if (keep_until_step > 0) {
            std::ifstream in(path);
            std::string line;
            while (std::getline(in, line)) {
                if (line.rfind("step\t", 0) == 0) continue;
                try {
                    if (std::stoll(line.substr(0, line.find('\t'))) <= keep_until_step)
                        kept.push_back(line);
                } catch (const std::exception&) {
                }
            }
        }
        std::ofstream out(path, std::ios::trunc);
        out << "step\tsplit\tmetric\tvalue\telapsed\n";
        for (const auto& l : kept) out << l << '\n';
        if (!out) throw InputError(path, "cannot write metrics file");
    }
    void add(int64_t step, const char* split, const char* metric, double value, double elapsed) {
        std::ofstream out(path_, std::ios::app);
        out.precision(9);
        out << step << '\t' << split << '\t' << metric << '\t' << value << '\t' << elapsed << '\n';
    }

  private:
    std::string path_;
};

BertForMaskedLM build_model(const PretrainConfig& config, torch::Device device) {
    torch::manual_seed(config.train.seed);
    BertForMaskedLM model(config.model);
    model->to(device);
    return model;
}

void say(const TrainCallbacks& cb, const std::string& message) {
    if (cb.on_message) cb.on_message(message);
}

// metrics.tsv's rows again as TensorBoard events (engine/tensorboard.h), in a new events file
// per process. A fresh run removes the events files of an earlier run in out_dir (as
// MetricsLog empties metrics.tsv); a resumed run starts its file with a SessionLog START at the
// first step after the checkpoint, so TensorBoard drops what a killed run wrote after it.
// metrics.tsv stays the record: a failing events file is reported once through on_message and
// dropped, and training goes on.
class EventLog {
  public:
    EventLog(const std::string& out_dir, int64_t start_step, const TrainCallbacks& cb) : cb_(cb) {
        if (start_step == 0)
            for (const auto& f : tensorboard_event_files(out_dir)) {
                std::error_code ignored;  // a file left behind is purged by the START below
                fs::remove(f, ignored);
            }
        try {
            writer_ = std::make_unique<TensorBoardWriter>(out_dir);
            writer_->add_session_start(start_step == 0 ? 0 : start_step + 1, unix_wall_time());
            writer_->flush();
        } catch (const std::exception& e) {
            give_up(e);
        }
    }
    void add(int64_t step, const char* split, const char* metric, double value) {
        if (!writer_) return;
        try {
            writer_->add_scalar(std::string(split) + "/" + metric, step, value, unix_wall_time());
        } catch (const std::exception& e) {
            give_up(e);
        }
    }
    void flush() {
        if (!writer_) return;
        try {
            writer_->flush();
        } catch (const std::exception& e) {
            give_up(e);
        }
    }

  private:
    void give_up(const std::exception& e) {
        writer_.reset();
        say(cb_, std::string("tensorboard: ") + e.what() +
                     "; no more TensorBoard events for this run (metrics.tsv has every point)");
    }
    const TrainCallbacks& cb_;
    std::unique_ptr<TensorBoardWriter> writer_;
};

// This process's place in a data-parallel group (alone: world 1, rank 0).
struct Shard {
    int64_t world = 1;
    int64_t rank = 0;
    bool writer = true;  // checkpoints, metrics, run files, evaluation
};

// Checks that each step's global batch splits into ranks x train.grad_accum equal micro-batches.
Shard check_batch_split(const TrainConfig& t, DistributedContext* dist) {
    if (t.batch_size <= 0 || t.grad_accum <= 0 || t.batch_size % t.grad_accum != 0)
        throw std::invalid_argument("train.batch_size (" + std::to_string(t.batch_size) +
                                    ") must be a positive multiple of train.grad_accum (" +
                                    std::to_string(t.grad_accum) + ")");
    if (t.steps <= 0) throw std::invalid_argument("train.steps must be > 0");
    // Data parallel: rank r takes samples [r * B/W, (r + 1) * B/W) of each global batch of B,
    // as grad_accum micro-batches; the union over ranks is exactly the one-process batch.
    Shard shard;
    shard.world = dist ? dist->world_size() : 1;
    shard.rank = dist ? dist->rank() : 0;
    shard.writer = shard.rank == 0;
    if (t.batch_size % (shard.world * t.grad_accum) != 0)
        throw std::invalid_argument("train.batch_size (" + std::to_string(t.batch_size) +
                                    ") must be a multiple of ranks (" +
                                    std::to_string(shard.world) + ") x train.grad_accum (" +
                                    std::to_string(t.grad_accum) + ")");
    return shard;
}

// The run's tokenizer. Fits the model config to its vocabulary (size, [PAD] id) and checks the
// model against the data.
WordPieceTokenizer open_tokenizer(PretrainConfig& config) {
    WordPieceTokenizer tokenizer(Vocab::load(config.data.vocab), config.data.lower_case);
    const Vocab& vocab = tokenizer.vocab();
    config.model.vocab_size = vocab.size();
    config.model.pad_token_id = vocab.pad_id();
    if (config.data.max_seq_len > config.model.max_position_embeddings)
        throw std::invalid_argument("data.max_seq_len (" + std::to_string(config.data.max_seq_len) +
                                    ") exceeds model.max_position_embeddings (" +
                                    std::to_string(config.model.max_position_embeddings) + ")");
    config.model.validate();
    return tokenizer;
}

// Where training stands: restored from a checkpoint, or zero for a fresh run.
struct Progress {
    int64_t step = 0;
    int64_t tokens_seen = 0;
};

// Throws when the checkpoint's run differs from this config in anything but run control.
void check_same_run(const std::string& ckpt, const PretrainConfig& config,
                    const PretrainConfig& checkpointed) {
    for (const auto& key : config_keys()) {
        if (kRunControlKeys.count(key)) continue;
        const auto mine = get_config_value(config, key),
                   theirs = get_config_value(checkpointed, key);
        if (mine != theirs)
            throw CheckpointError(ckpt, "holds a run with " + key + " = " + theirs +
                                            " but this config says " + mine +
                                            "; use another out_dir or delete it");
    }
}

// Resumes from `ckpt` when it exists (weights, optimizer, RNG, validation history), else starts
// at step 0.
Progress resume_or_start(const std::string& ckpt, const PretrainConfig& config,
                         torch::Device device, BertForMaskedLM& model,
                         torch::optim::AdamW& optimizer, TrainResult& result,
                         const TrainCallbacks& cb) {
    Progress at;
    if (!fs::exists(ckpt)) return at;
    detail::RawCheckpoint raw = detail::read_checkpoint(ckpt, device);
    check_same_run(ckpt, config, raw.config);
    detail::restore_checkpoint(ckpt, raw, model, optimizer);
    at.step = raw.step;
    at.tokens_seen = raw.tokens_seen;
    result.evals = raw.evals;
    result.resumed_from = at.step;
    say(cb, "resumed from " + ckpt + " at step " + std::to_string(at.step));
    return at;
}

// train.dtype "auto" becomes fp32 or bf16 (engine/precision.h) before anything depends on it:
// the run files and the checkpoint record what ran. All ranks take bf16 only if every rank
// measured it as fast.
void resolve_precision(TrainConfig& t, const torch::Device& device, DistributedContext* dist,
                       const TrainCallbacks& cb) {
    const bool automatic = t.dtype == "auto";
    PrecisionChoice choice = choose_precision(t.dtype, device, "train.dtype");
    if (automatic && dist) {
        const double fast = choice.dtype == "bf16" ? 1.0 : 0.0;
        const double agreed = dist->all_reduce_sum({fast})[0];
        if (agreed < static_cast<double>(dist->world_size()) && choice.dtype == "bf16") {
            choice.dtype = "fp32";
            choice.reason += "; another rank measured bf16 as slow";
        }
    }
    if (automatic) say(cb, "train.dtype auto -> " + choice.dtype + ": " + choice.reason);
    t.dtype = choice.dtype;
}

// Every rank must resume from the same checkpoint (out_dir on a shared filesystem).
void agree_on_start(DistributedContext& dist, int64_t rank, const std::string& ckpt, int64_t step,
                    BertForMaskedLM& model) {
    auto first = torch::tensor({step}, torch::kLong).to(dist.device());
    dist.broadcast({first});
    const int64_t rank0_step = first.cpu().item<int64_t>();
    if (rank0_step != step)
        throw DistributedError(
            "rank " + std::to_string(rank) + ": " + ckpt +
            (step ? " is at step " + std::to_string(step) : std::string(" does not exist")) +
            " but rank 0 starts at step " + std::to_string(rank0_step) +
            "; out_dir must be one directory shared by all ranks");
    // One set of weights everywhere (rank 0's), then per-rank dropout streams in the step loop.
    auto tensors = model->parameters();
    for (const auto& b : model->buffers()) tensors.push_back(b);
    dist.broadcast(tensors);
}

// The run directory is self-contained (vocabulary and resolved config beside the checkpoint,
// so `tupe inspect` works after the data folder moves). config.yaml is the resolved config in
// the schema of `tupe pretrain --config`, so the run can be trained again from it; config.txt
// is its flat text form, as stored in the checkpoint.
void write_run_files(const PretrainConfig& config, const Vocab& vocab) {
    vocab.save((fs::path(config.out_dir) / "vocab.txt").string());
    std::ofstream cfg(fs::path(config.out_dir) / "config.txt");
    cfg << config_to_text(config);
    std::ofstream yaml(fs::path(config.out_dir) / "config.yaml");
    yaml << config_to_yaml(config);
    if (!yaml)
        throw InputError((fs::path(config.out_dir) / "config.yaml").string(), "cannot write");
}

// The corpus tokenized (or read from its cache) and packed into train/validation blocks.
BlockDataset load_blocks(const PretrainConfig& config, const WordPieceTokenizer& tokenizer,
                         DistributedContext* dist, bool writer, const TrainCallbacks& cb) {
    say(cb, "tokenizing " + config.data.corpus + " (cached in " + config.data.cache_dir + ")");
    // Rank 0 builds the token cache; the others wait and read it (no two writers).
    if (dist && !writer) dist->barrier();
    const TokenizedCorpus corpus =
        load_or_build_corpus(config.data.corpus, tokenizer, config.data.cache_dir);
    if (dist && writer) dist->barrier();
    if (!corpus.warning.empty()) say(cb, corpus.warning);
    BlockDataset data = make_blocks(corpus, tokenizer.vocab(), config.data);
    if (data.train.empty()) throw InputError(config.data.corpus, "no training blocks");
    say(cb, "corpus: " + std::to_string(corpus.ids.size()) + " tokens, " +
                std::to_string(data.train.size()) + " training and " +
                std::to_string(data.validation.size()) +
                " validation blocks of <= " + std::to_string(config.data.max_seq_len) + " tokens");
    return data;
}

// The validation targets' floor; the writer keeps it as out_dir/floor.txt and reports it.
CorpusFloor measure_floor(const PretrainConfig& config, const BlockDataset& data,
                          const Vocab& vocab, bool writer, const TrainCallbacks& cb) {
    const CorpusFloor floor = corpus_floor(data, vocab);
    if (writer && floor.validation_tokens > 0) {
        write_floor(floor_path(config.out_dir), floor);
        char line[200];
        std::snprintf(line, sizeof line,
                      "floor: unigram %.3f nats, context-free %.3f, bigram %.3f (validation MLM "
                      "targets, %lld tokens)",
                      floor.unigram_nats, floor.context_free_nats, floor.bigram_nats,
                      static_cast<long long>(floor.validation_tokens));
        say(cb, line);
    }
    return floor;
}

// Sample g of the run is block order(g / N)[g % N] of the N training blocks, where order(e) is
// epoch_order(N, seed, e). Keeps the permutations of two epochs at most.
class SampleOrder {
  public:
    SampleOrder(uint64_t num_blocks, uint64_t seed) : n_(num_blocks), seed_(seed) {}

    // The block of global sample `sample`; sets `epoch` to its epoch.
    uint64_t block_at(uint64_t sample, uint64_t& epoch) {
        epoch = sample / n_;
        auto it = orders_.find(epoch);
        if (it == orders_.end()) {
            while (!orders_.empty() && orders_.begin()->first + 1 < epoch)
                orders_.erase(orders_.begin());
            it = orders_.emplace(epoch, epoch_order(n_, seed_, epoch)).first;
        }
        return it->second[sample % n_];
    }

  private:
    uint64_t n_, seed_;
    std::map<uint64_t, std::vector<uint64_t>> orders_;  // epoch -> permutation
};

// Validation MLM loss and accuracy at `step`, over fixed masks; leaves the model in train mode.
EvalReport evaluate(BertForMaskedLM& model, const BlockDataset& data, const Vocab& vocab,
                    const PretrainConfig& config, torch::Device device, int64_t step) {
    const TrainConfig& t = config.train;
    torch::NoGradGuard no_grad;
    model->eval();
    EvalReport r;
    r.step = step;
    double loss_sum = 0;
    int64_t correct = 0;
    const uint64_t n_val = data.validation.size();
    int64_t batches = 0;
    // Batches of the one-process micro-batch size, however many ranks train: the
    // validation numbers do not depend on the number of ranks.
    const uint64_t eval_batch = static_cast<uint64_t>(t.batch_size / t.grad_accum);
    DataConfig eval_data = config.data;  // data.eval_mask_prob: validation's own rate
    if (eval_data.eval_mask_prob > 0) eval_data.mask_prob = eval_data.eval_mask_prob;
    for (uint64_t start = 0; start < n_val; start += eval_batch) {
        if (t.eval_batches > 0 && batches >= t.eval_batches) break;
        std::vector<uint64_t> idx;
        for (uint64_t i = start; i < std::min<uint64_t>(n_val, start + eval_batch); ++i)
            idx.push_back(i);
        // Validation masks are fixed: a separate seed stream, epoch 0.
        auto b = to_tensors(
            make_mlm_batch(data.validation, idx, vocab, eval_data, t.seed ^ 0x5eed5eedULL, 0),
            device);
        detail::AutocastGuard autocast(t.dtype, device);
        auto out = model->forward(b.input_ids, b.attention_mask, b.labels, true);
        loss_sum += out.loss.item<double>() * static_cast<double>(out.num_masked);
        r.masked_tokens += out.num_masked;
        correct += out.num_correct;
        ++batches;
    }
    model->train();
    r.loss = r.masked_tokens ? loss_sum / static_cast<double>(r.masked_tokens) : 0.0;
    r.accuracy = r.masked_tokens ? static_cast<double>(correct) / r.masked_tokens : 0.0;
    return r;
}

// The steps from where training stands to train.steps (or the stop flag), with the
// evaluations, metrics rows, checkpoints and snapshots they trigger.
class StepLoop {
  public:
    StepLoop(const PretrainConfig& config, const TrainCallbacks& cb, DistributedContext* dist,
             const Shard& shard, torch::Device device, const std::string& ckpt,
             BertForMaskedLM& model, torch::optim::AdamW& optimizer, const Vocab& vocab,
             const BlockDataset& data, const Progress& start, TrainResult& result)
        : config_(config),
          t_(config.train),
          cb_(cb),
          dist_(dist),
          shard_(shard),
          device_(device),
          ckpt_(ckpt),
          model_(model),
          optimizer_(optimizer),
          vocab_(vocab),
          data_(data),
          result_(result),
          step_(start.step),
          tokens_seen_(start.tokens_seen),
          share_(t_.batch_size / shard.world),
          micro_(share_ / t_.grad_accum),
          order_(data.train.size(), t_.seed) {
        if (shard_.writer)
            metrics_ = std::make_unique<MetricsLog>(metrics_path(config_.out_dir), step_);
        if (shard_.writer && t_.tensorboard)
            events_ = std::make_unique<EventLog>(config_.out_dir, step_, cb_);
        if (dist_) reducer_ = std::make_unique<GradientReducer>(*dist_, model_->parameters());
        result_.checkpoint = fs::exists(ckpt_) ? ckpt_ : "";
        t0_ = Clock::now();
        checkpoint_step_ = result_.resumed_from > 0 ? step_ : -1;
    }

    void run() {
        // A run killed between its checkpoint and the snapshot copy makes the copy on resume.
        if (step_ > 0 && !fs::exists(snapshot_path(config_.out_dir, step_)) &&
            is_snapshot_step(step_))
            keep_snapshot();
        model_->train();
        if (shard_.writer && step_ == 0 && !data_.validation.empty())
            record_eval();                        // curve from step 0
        if (step_ == 0 && is_snapshot_step(0)) {  // the initialised model, kept as a control
            write_checkpoint();
            keep_snapshot();
        }
        while (step_ < t_.steps) {
            bool stop = cb_.stop && cb_.stop->load();
            const auto s0 = Clock::now();
            const double lr = lr_at(t_, step_);
            detail::set_lr(optimizer_, lr);
            const std::vector<MlmTensors> micro_batches = next_batches();
            const MlmStepOptions options = step_options(micro_batches, stop);
            if (stop) {
                result_.stopped = true;
                break;
            }
            const MlmStepResult sr = mlm_train_step(model_, optimizer_, micro_batches, options);
            if (!sr.finite) diverged(sr);
            count_step(sr, lr, s0);
            evaluate_and_checkpoint();
        }
        if (result_.stopped && checkpoint_step_ != step_) write_checkpoint();
    }

    int64_t step() const { return step_; }

  private:
    double elapsed() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

    bool is_snapshot_step(int64_t step) const {
        return std::find(cb_.snapshot_steps.begin(), cb_.snapshot_steps.end(), step) !=
               cb_.snapshot_steps.end();
    }

    // This rank's micro-batches of the step. Sample g is masked with its epoch g / N: every
    // batch is a pure function of (seed, step), which makes resume exact.
    std::vector<MlmTensors> next_batches() {
        std::vector<MlmTensors> micro_batches;
        for (int64_t m = 0; m < t_.grad_accum; ++m) {
            std::vector<uint64_t> idx, epochs;
            const uint64_t first =
                static_cast<uint64_t>(step_ * t_.batch_size + shard_.rank * share_ + m * micro_);
            for (int64_t i = 0; i < micro_; ++i) {
                uint64_t epoch = 0;
                idx.push_back(order_.block_at(first + static_cast<uint64_t>(i), epoch));
                epochs.push_back(epoch);
            }
            micro_batches.push_back(to_tensors(
                make_mlm_batch(data_.train, idx, epochs, vocab_, config_.data, t_.seed), device_));
        }
        return micro_batches;
    }

    // The options of this step. With ranks it also agrees on the stop flag and prepares the
    // gradient all-reduce and this rank's dropout stream.
    MlmStepOptions step_options(const std::vector<MlmTensors>& micro_batches, bool& stop) {
        MlmStepOptions options;
        options.dtype = t_.dtype;
        options.clip_norm = t_.clip_norm;
        if (dist_) {
            // One small all-reduce: the global masked count (each rank's loss is weighted
            // against it, so the summed gradients are the mean over the global batch) and
            // the stop flag (all ranks stop after the same step).
            int64_t masked = 0;
            for (const auto& b : micro_batches) masked += b.masked_tokens;
            const auto sums =
                dist_->all_reduce_sum({static_cast<double>(masked), stop ? 1.0 : 0.0});
            stop = sums[1] > 0;
            options.loss_denominator = std::llround(sums[0]);
            options.after_backward = [this]() { reducer_->finish_step(); };
            reducer_->begin_step(static_cast<int64_t>(micro_batches.size()));
            // Dropout: an own stream per rank and step (exact on resume without per-rank
            // RNG state in the checkpoint).
            torch::manual_seed(t_.seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(step_ + 1) +
                               static_cast<uint64_t>(shard_.rank));
        }
        return options;
    }

    // A non-finite loss: every rank fails, and the last good checkpoint is left as it is.
    [[noreturn]] void diverged(const MlmStepResult& sr) {
        const std::string message =
            (dist_ ? "rank " + std::to_string(shard_.rank) + ": " : std::string()) + "step " +
            std::to_string(step_ + 1) + ": MLM loss is " + std::to_string(sr.loss) +
            (result_.checkpoint.empty() ? std::string("; no checkpoint was written yet")
                                        : "; last good checkpoint kept at " + ckpt_) +
            " (try a lower train.lr or train.clip_norm)";
        if (reducer_) reducer_->report_non_finite(message);
        throw TrainingDiverged(message);
    }

    // Counts the step done (the global batch's loss and tokens with ranks), logs it to
    // metrics.tsv at the log interval and reports it to on_step.
    void count_step(const MlmStepResult& sr, double lr, Clock::time_point s0) {
        double step_loss = sr.loss;
        const double grad_norm = sr.grad_norm;
        int64_t step_tokens = sr.real_tokens;
        if (dist_) {  // the global batch's mean loss and token count, for logs
            const auto sums = dist_->all_reduce_sum({sr.loss, static_cast<double>(sr.real_tokens)});
            step_loss = sums[0];
            step_tokens = std::llround(sums[1]);
        }
        ++step_;
        tokens_seen_ += step_tokens;

        StepReport rep;
        rep.step = step_;
        rep.total_steps = t_.steps;
        rep.loss = step_loss;
        rep.lr = lr;
        rep.grad_norm = grad_norm;
        rep.seconds = std::chrono::duration<double>(Clock::now() - s0).count();
        rep.tokens_per_second =
            rep.seconds > 0 ? static_cast<double>(step_tokens) / rep.seconds : 0;
        rep.tokens_seen = tokens_seen_;
        rep.elapsed = elapsed();
        if (metrics_ && t_.log_interval > 0 &&
            (step_ % t_.log_interval == 0 || step_ == t_.steps)) {
            record(step_, "train", "loss", step_loss, rep.elapsed);
            record(step_, "train", "lr", lr, rep.elapsed);
            if (events_) events_->flush();
        }
        if (cb_.on_step) cb_.on_step(rep);
    }

    // The evaluation, checkpoint and snapshot due after a step (all three after the last).
    void evaluate_and_checkpoint() {
        const bool last = step_ == t_.steps;
        if (shard_.writer && !data_.validation.empty() &&
            (last || (t_.eval_interval > 0 && step_ % t_.eval_interval == 0)))
            record_eval();
        const bool snapshot = is_snapshot_step(step_);
        if (last || snapshot || (t_.checkpoint_interval > 0 && step_ % t_.checkpoint_interval == 0))
            write_checkpoint();
        if (snapshot) keep_snapshot();
    }

    void record_eval() {
        EvalReport r = evaluate(model_, data_, vocab_, config_, device_, step_);
        result_.evals.push_back(r);
        record(r.step, "validation", "loss", r.loss, elapsed());
        record(r.step, "validation", "accuracy", r.accuracy, elapsed());
        if (events_) events_->flush();
        if (cb_.on_eval) cb_.on_eval(r);
    }

    // One metric row: metrics.tsv and, when on, the TensorBoard events (tag "split/metric").
    void record(int64_t step, const char* split, const char* metric, double value, double seconds) {
        metrics_->add(step, split, metric, value, seconds);
        if (events_) events_->add(step, split, metric, value);
    }

    void write_checkpoint() {
        checkpoint_step_ = step_;
        result_.checkpoint = ckpt_;  // on every rank: the file rank 0 writes
        if (!shard_.writer) return;
        detail::save_checkpoint(ckpt_, config_, model_, optimizer_, step_, tokens_seen_,
                                result_.evals);
        if (cb_.on_checkpoint) cb_.on_checkpoint(ckpt_, step_);
    }

    // Copy, then rename: a snapshot file is complete or absent.
    void keep_snapshot() {
        if (!shard_.writer) return;
        detail::copy_checkpoint(ckpt_, snapshot_path(config_.out_dir, step_));
    }

    const PretrainConfig& config_;
    const TrainConfig& t_;
    const TrainCallbacks& cb_;
    DistributedContext* dist_;
    const Shard shard_;
    const torch::Device device_;
    const std::string ckpt_;
    BertForMaskedLM& model_;
    torch::optim::AdamW& optimizer_;
    const Vocab& vocab_;
    const BlockDataset& data_;
    TrainResult& result_;
    int64_t step_, tokens_seen_;
    const int64_t share_;  // this rank's samples per step
    const int64_t micro_;  // samples per micro-batch
    SampleOrder order_;
    std::unique_ptr<MetricsLog> metrics_;
    std::unique_ptr<EventLog> events_;  // null: train.tensorboard off, or the writer failed
    std::unique_ptr<GradientReducer> reducer_;
    Clock::time_point t0_;
    int64_t checkpoint_step_ = -1;
};

}  // namespace

std::string metrics_path(const std::string& out_dir) {
    return (fs::path(out_dir) / "metrics.tsv").string();
}

torch::Device resolve_device(const std::string& name) {
    if (name == "auto") return torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
    torch::Device device(torch::kCPU);
    try {
        device = torch::Device(name);
    } catch (const c10::Error&) {
        throw std::invalid_argument("train.device: unknown device '" + name +
                                    "' (expected cpu, cuda, cuda:N or auto)");
    }
    if (device.is_cuda() && !torch::cuda::is_available())
        throw std::invalid_argument("train.device: '" + name +
                                    "' requested but this LibTorch has no usable CUDA device");
    return device;
}

TrainResult pretrain(const PretrainConfig& input_config, const TrainCallbacks& cb,
                     DistributedContext* dist) {
    PretrainConfig config = input_config;
    config.train.validate();
    const Shard shard = check_batch_split(config.train, dist);
    apply_thread_count(config.train.threads);
    const torch::Device device = resolve_device(config.train.device);
    resolve_precision(config.train, device, dist, cb);
    const WordPieceTokenizer tokenizer = open_tokenizer(config);

    // Model and optimizer, possibly restored.
    if (shard.writer) fs::create_directories(config.out_dir);
    const std::string ckpt = checkpoint_path(config.out_dir);
    BertForMaskedLM model = build_model(config, device);
    auto optimizer = make_optimizer(model, config.train);
    TrainResult result;
    const Progress start = resume_or_start(ckpt, config, device, model, optimizer, result, cb);
    if (dist) agree_on_start(*dist, shard.rank, ckpt, start.step, model);
    // Written only after the checkpoint check, so a refused run changes nothing in the directory.
    if (shard.writer) write_run_files(config, tokenizer.vocab());

    // The corpus comes after the checkpoint check: a mismatch fails before minutes of work.
    const BlockDataset data = load_blocks(config, tokenizer, dist, shard.writer, cb);
    result.floor = measure_floor(config, data, tokenizer.vocab(), shard.writer, cb);

    StepLoop loop(config, cb, dist, shard, device, ckpt, model, optimizer, tokenizer.vocab(), data,
                  start, result);
    loop.run();
    // Nobody reports success before rank 0's last checkpoint is on disk.
    if (dist) dist->barrier();
    result.final_step = loop.step();
    return result;
}

}  // namespace engine
