// MLM pretraining loop and checkpoints (see trainer.h). Resume is exact because everything a
// step depends on is either in the checkpoint (weights, AdamW moments, torch RNG for dropout,
// step) or a pure function of (seed, step): the data order and the masks. Data-parallel runs
// split each step's global batch into one contiguous share per rank; rank 0 alone writes.
#include "engine/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "engine/corpus.h"
#include "engine/distributed.h"
#include "engine/errors.h"
#include "engine/threads.h"
#include "engine/tokenizer.h"
#include "engine/train_step.h"
#include "optim_util.h"
#include "zip_integrity.h"

namespace engine {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "tupe-workbench/checkpoint/1";

// Keys that may change between a run and its resume without changing what it computes so far.
const std::set<std::string> kRunControlKeys = {"train.steps",
                                               "train.eval_interval",
                                               "train.eval_batches",
                                               "train.checkpoint_interval",
                                               "train.log_interval",
                                               "train.device",
                                               "train.threads",
                                               "data.cache_dir",
                                               "data.corpus",
                                               "data.vocab",
                                               "out_dir"};

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string evals_to_text(const std::vector<EvalReport>& evals) {
    std::ostringstream os;
    os.precision(9);
    for (const auto& e : evals)
        os << e.step << ' ' << e.loss << ' ' << e.accuracy << ' ' << e.masked_tokens << '\n';
    return os.str();
}

std::vector<EvalReport> evals_from_text(const std::string& text) {
    std::vector<EvalReport> out;
    std::istringstream is(text);
    EvalReport e;
    while (is >> e.step >> e.loss >> e.accuracy >> e.masked_tokens) out.push_back(e);
    return out;
}

double lr_at(const TrainConfig& t, int64_t step) {
    return detail::linear_warmup_decay(t.lr, step, t.warmup_steps, t.steps);
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

void save_checkpoint(const std::string& path, const PretrainConfig& config, BertForMaskedLM& model,
                     torch::optim::AdamW& optimizer, int64_t step, int64_t tokens_seen,
                     const std::vector<EvalReport>& evals) {
    torch::serialize::OutputArchive archive;
    archive.write("format", c10::IValue(std::string(kFormat)));
    archive.write("config", c10::IValue(config_to_text(config)));
    archive.write("step", c10::IValue(step));
    archive.write("tokens_seen", c10::IValue(tokens_seen));
    archive.write("evals", c10::IValue(evals_to_text(evals)));
    archive.write("rng", at::detail::getDefaultCPUGenerator().get_state());  // dropout's RNG
    torch::serialize::OutputArchive model_archive, optimizer_archive;
    model->save(model_archive);
    optimizer.save(optimizer_archive);
    archive.write("model", model_archive);
    archive.write("optimizer", optimizer_archive);
    // Atomic: a reader (or a resume after kill -9) sees the old file or the new one, never half.
    const std::string tmp = path + ".tmp";
    archive.save_to(tmp);
    fs::rename(tmp, path);
}

struct RawCheckpoint {
    PretrainConfig config;
    int64_t step = 0, tokens_seen = 0;
    std::vector<EvalReport> evals;
    torch::Tensor rng;
    torch::serialize::InputArchive model, optimizer;
};

RawCheckpoint read_checkpoint(const std::string& path, torch::Device device) {
    if (!fs::exists(path)) throw CheckpointError(path, "no such checkpoint file");
    // LibTorch does not check the zip's CRCs, and a corrupted entry can crash its parser.
    detail::verify_zip_integrity(path);
    RawCheckpoint raw;
    torch::serialize::InputArchive archive;
    try {
        archive.load_from(path, device);
    } catch (const c10::Error& e) {
        throw CheckpointError(path, "cannot read checkpoint (truncated or not a checkpoint): " +
                                        first_line(e.what_without_backtrace()));
    }
    c10::IValue value;
    if (!archive.try_read("format", value) || !value.isString() || value.toStringRef() != kFormat)
        throw CheckpointError(
            path, "not a TUPE Workbench checkpoint (no '" + std::string(kFormat) + "' format tag)");
    try {
        archive.read("config", value);
        raw.config = parse_config_text(value.toStringRef());
        archive.read("step", value);
        raw.step = value.toInt();
        archive.read("tokens_seen", value);
        raw.tokens_seen = value.toInt();
        archive.read("evals", value);
        raw.evals = evals_from_text(value.toStringRef());
        archive.read("rng", raw.rng);
        archive.read("model", raw.model);
        archive.read("optimizer", raw.optimizer);
    } catch (const c10::Error& e) {
        throw CheckpointError(path,
                              "incomplete checkpoint: " + first_line(e.what_without_backtrace()));
    } catch (const std::invalid_argument& e) {
        throw CheckpointError(path, std::string("bad config in checkpoint: ") + e.what());
    }
    return raw;
}

void load_model_weights(const std::string& path, BertForMaskedLM& model,
                        torch::serialize::InputArchive& archive) {
    try {
        model->load(archive);
    } catch (const c10::Error& e) {
        throw CheckpointError(path, "weights do not fit the model of its config (" +
                                        model->config().preset +
                                        "): " + first_line(e.what_without_backtrace()));
    }
}

BertForMaskedLM build_model(const PretrainConfig& config, torch::Device device) {
    torch::manual_seed(config.train.seed);
    BertForMaskedLM model(config.model);
    model->to(device);
    return model;
}

}  // namespace

std::string checkpoint_path(const std::string& out_dir) {
    return (fs::path(out_dir) / "checkpoint.pt").string();
}
std::string snapshot_path(const std::string& out_dir, int64_t step) {
    return (fs::path(out_dir) / ("checkpoint-" + std::to_string(step) + ".pt")).string();
}
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
    using Clock = std::chrono::steady_clock;
    PretrainConfig config = input_config;
    const TrainConfig& t = config.train;
    auto say = [&](const std::string& m) {
        if (cb.on_message) cb.on_message(m);
    };

    if (t.batch_size <= 0 || t.grad_accum <= 0 || t.batch_size % t.grad_accum != 0)
        throw std::invalid_argument("train.batch_size (" + std::to_string(t.batch_size) +
                                    ") must be a positive multiple of train.grad_accum (" +
                                    std::to_string(t.grad_accum) + ")");
    if (t.steps <= 0) throw std::invalid_argument("train.steps must be > 0");
    // Data parallel: rank r takes samples [r * B/W, (r + 1) * B/W) of each global batch of B,
    // as grad_accum micro-batches; the union over ranks is exactly the one-process batch.
    const int64_t world = dist ? dist->world_size() : 1;
    const int64_t rank = dist ? dist->rank() : 0;
    const bool writer = rank == 0;  // checkpoints, metrics, run files, evaluation
    if (t.batch_size % (world * t.grad_accum) != 0)
        throw std::invalid_argument("train.batch_size (" + std::to_string(t.batch_size) +
                                    ") must be a multiple of ranks (" + std::to_string(world) +
                                    ") x train.grad_accum (" + std::to_string(t.grad_accum) + ")");
    apply_thread_count(t.threads);
    const torch::Device device = resolve_device(t.device);

    // Data: vocab, tokenizer, cached corpus, blocks.
    WordPieceTokenizer tokenizer(Vocab::load(config.data.vocab), config.data.lower_case);
    const Vocab& vocab = tokenizer.vocab();
    config.model.vocab_size = vocab.size();
    config.model.pad_token_id = vocab.pad_id();
    if (config.data.max_seq_len > config.model.max_position_embeddings)
        throw std::invalid_argument("data.max_seq_len (" + std::to_string(config.data.max_seq_len) +
                                    ") exceeds model.max_position_embeddings (" +
                                    std::to_string(config.model.max_position_embeddings) + ")");
    config.model.validate();
    // Model and optimizer, possibly restored.
    if (writer) fs::create_directories(config.out_dir);
    const std::string ckpt = checkpoint_path(config.out_dir);
    BertForMaskedLM model = build_model(config, device);
    auto optimizer = make_optimizer(model, t);
    TrainResult result;
    int64_t step = 0, tokens_seen = 0;
    if (fs::exists(ckpt)) {
        RawCheckpoint raw = read_checkpoint(ckpt, device);
        for (const auto& key : config_keys()) {
            if (kRunControlKeys.count(key)) continue;
            const auto mine = get_config_value(config, key),
                       theirs = get_config_value(raw.config, key);
            if (mine != theirs)
                throw CheckpointError(ckpt, "holds a run with " + key + " = " + theirs +
                                                " but this config says " + mine +
                                                "; use another out_dir or delete it");
        }
        load_model_weights(ckpt, model, raw.model);
        try {
            optimizer.load(raw.optimizer);
        } catch (const c10::Error& e) {
            throw CheckpointError(
                ckpt, "optimizer state does not fit: " + first_line(e.what_without_backtrace()));
        }
        {
            auto generator = at::detail::getDefaultCPUGenerator();
            std::lock_guard<std::mutex> lock(generator.mutex());
            generator.set_state(raw.rng);
        }
        step = raw.step;
        tokens_seen = raw.tokens_seen;
        result.evals = raw.evals;
        result.resumed_from = step;
        say("resumed from " + ckpt + " at step " + std::to_string(step));
    }
    if (dist) {
        // Every rank must resume from the same checkpoint (out_dir on a shared filesystem).
        auto first = torch::tensor({step}, torch::kLong).to(dist->device());
        dist->broadcast({first});
        const int64_t rank0_step = first.cpu().item<int64_t>();
        if (rank0_step != step)
            throw DistributedError(
                "rank " + std::to_string(rank) + ": " + ckpt +
                (step ? " is at step " + std::to_string(step) : std::string(" does not exist")) +
                " but rank 0 starts at step " + std::to_string(rank0_step) +
                "; out_dir must be one directory shared by all ranks");
        // One set of weights everywhere (rank 0's), then per-rank dropout streams below.
        auto tensors = model->parameters();
        for (const auto& b : model->buffers()) tensors.push_back(b);
        dist->broadcast(tensors);
    }
    // The run directory is self-contained (vocabulary and resolved config beside the
    // checkpoint, so `tupe inspect` works after the data folder moves). Written only after the
    // checkpoint check, so a refused run changes nothing in the directory.
    if (writer) {
        vocab.save((fs::path(config.out_dir) / "vocab.txt").string());
        std::ofstream cfg(fs::path(config.out_dir) / "config.txt");
        cfg << config_to_text(config);
    }
    // The corpus comes after the checkpoint check: a mismatch fails before minutes of work.
    say("tokenizing " + config.data.corpus + " (cached in " + config.data.cache_dir + ")");
    // Rank 0 builds the token cache; the others wait and read it (no two writers).
    if (dist && !writer) dist->barrier();
    const TokenizedCorpus corpus =
        load_or_build_corpus(config.data.corpus, tokenizer, config.data.cache_dir);
    if (dist && writer) dist->barrier();
    const BlockDataset data = make_blocks(corpus, vocab, config.data);
    if (data.train.empty()) throw InputError(config.data.corpus, "no training blocks");
    say("corpus: " + std::to_string(corpus.ids.size()) + " tokens, " +
        std::to_string(data.train.size()) + " training and " +
        std::to_string(data.validation.size()) +
        " validation blocks of <= " + std::to_string(config.data.max_seq_len) + " tokens");
    result.floor = corpus_floor(data, vocab);
    if (writer && result.floor.validation_tokens > 0) {
        write_floor(floor_path(config.out_dir), result.floor);
        char line[160];
        std::snprintf(line, sizeof line,
                      "floor: unigram %.3f nats, bigram %.3f nats (validation MLM targets, %lld "
                      "tokens)",
                      result.floor.unigram_nats, result.floor.bigram_nats,
                      static_cast<long long>(result.floor.validation_tokens));
        say(line);
    }

    std::unique_ptr<MetricsLog> metrics;
    if (writer) metrics = std::make_unique<MetricsLog>(metrics_path(config.out_dir), step);
    std::unique_ptr<GradientReducer> reducer;
    if (dist) reducer = std::make_unique<GradientReducer>(*dist, model->parameters());
    result.checkpoint = fs::exists(ckpt) ? ckpt : "";

    const uint64_t n_train = data.train.size();
    const int64_t share = t.batch_size / world;  // this rank's samples per step
    const int64_t micro = share / t.grad_accum;
    std::map<uint64_t, std::vector<uint64_t>> orders;  // epoch -> permutation (two at most)
    auto block_at = [&](uint64_t sample, uint64_t& epoch) {
        epoch = sample / n_train;
        auto it = orders.find(epoch);
        if (it == orders.end()) {
            while (!orders.empty() && orders.begin()->first + 1 < epoch)
                orders.erase(orders.begin());
            it = orders.emplace(epoch, epoch_order(n_train, t.seed, epoch)).first;
        }
        return it->second[sample % n_train];
    };

    auto evaluate = [&]() {
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
        for (uint64_t start = 0; start < n_val; start += eval_batch) {
            if (t.eval_batches > 0 && batches >= t.eval_batches) break;
            std::vector<uint64_t> idx;
            for (uint64_t i = start; i < std::min<uint64_t>(n_val, start + eval_batch); ++i)
                idx.push_back(i);
            // Validation masks are fixed: a separate seed stream, epoch 0.
            auto b = to_tensors(
                make_mlm_batch(data.validation, idx, vocab, config.data, t.seed ^ 0x5eed5eedULL, 0),
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
    };

    const auto t0 = Clock::now();
    auto elapsed = [&]() { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    auto record_eval = [&]() {
        EvalReport r = evaluate();
        result.evals.push_back(r);
        metrics->add(r.step, "validation", "loss", r.loss, elapsed());
        metrics->add(r.step, "validation", "accuracy", r.accuracy, elapsed());
        if (cb.on_eval) cb.on_eval(r);
    };
    int64_t checkpoint_step = result.resumed_from > 0 ? step : -1;
    auto write_checkpoint = [&]() {
        checkpoint_step = step;
        result.checkpoint = ckpt;  // on every rank: the file rank 0 writes
        if (!writer) return;
        save_checkpoint(ckpt, config, model, optimizer, step, tokens_seen, result.evals);
        if (cb.on_checkpoint) cb.on_checkpoint(ckpt, step);
    };

    // Copy, then rename: a snapshot file is complete or absent. A run killed between its
    // checkpoint and the copy makes the copy when it resumes.
    auto keep_snapshot = [&]() {
        if (!writer) return;
        const std::string target = snapshot_path(config.out_dir, step);
        fs::copy_file(ckpt, target + ".tmp", fs::copy_options::overwrite_existing);
        fs::rename(target + ".tmp", target);
    };
    if (step > 0 && !fs::exists(snapshot_path(config.out_dir, step)) &&
        std::find(cb.snapshot_steps.begin(), cb.snapshot_steps.end(), step) !=
            cb.snapshot_steps.end())
        keep_snapshot();

    model->train();
    if (writer && step == 0 && !data.validation.empty()) record_eval();  // curve from step 0
    while (step < t.steps) {
        bool stop = cb.stop && cb.stop->load();
        const auto s0 = Clock::now();
        const double lr = lr_at(t, step);
        detail::set_lr(optimizer, lr);
        // Sample g of the run is block order(g / N)[g % N], masked with epoch g / N: every
        // batch is a pure function of (seed, step), which makes resume exact.
        std::vector<MlmTensors> micro_batches;
        for (int64_t m = 0; m < t.grad_accum; ++m) {
            std::vector<uint64_t> idx, epochs;
            const uint64_t first =
                static_cast<uint64_t>(step * t.batch_size + rank * share + m * micro);
            for (int64_t i = 0; i < micro; ++i) {
                uint64_t epoch = 0;
                idx.push_back(block_at(first + static_cast<uint64_t>(i), epoch));
                epochs.push_back(epoch);
            }
            micro_batches.push_back(to_tensors(
                make_mlm_batch(data.train, idx, epochs, vocab, config.data, t.seed), device));
        }
        MlmStepOptions step_options;
        step_options.dtype = t.dtype;
        step_options.clip_norm = t.clip_norm;
        if (dist) {
            // One small all-reduce: the global masked count (each rank's loss is weighted
            // against it, so the summed gradients are the mean over the global batch) and
            // the stop flag (all ranks stop after the same step).
            int64_t masked = 0;
            for (const auto& b : micro_batches) masked += b.masked_tokens;
            const auto sums = dist->all_reduce_sum({static_cast<double>(masked), stop ? 1.0 : 0.0});
            stop = sums[1] > 0;
            step_options.loss_denominator = std::llround(sums[0]);
            step_options.after_backward = [&]() { reducer->finish_step(); };
            reducer->begin_step(static_cast<int64_t>(micro_batches.size()));
            // Dropout: an own stream per rank and step (exact on resume without per-rank
            // RNG state in the checkpoint).
            torch::manual_seed(t.seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(step + 1) +
                               static_cast<uint64_t>(rank));
        }
        if (stop) {
            result.stopped = true;
            break;
        }
        const MlmStepResult sr = mlm_train_step(model, optimizer, micro_batches, step_options);
        if (!sr.finite) {
            const std::string message =
                (dist ? "rank " + std::to_string(rank) + ": " : std::string()) + "step " +
                std::to_string(step + 1) + ": MLM loss is " + std::to_string(sr.loss) +
                (result.checkpoint.empty() ? std::string("; no checkpoint was written yet")
                                           : "; last good checkpoint kept at " + ckpt) +
                " (try a lower train.lr or train.clip_norm)";
            if (reducer) reducer->report_non_finite(message);
            throw TrainingDiverged(message);
        }
        double step_loss = sr.loss;
        const double grad_norm = sr.grad_norm;
        int64_t step_tokens = sr.real_tokens;
        if (dist) {  // the global batch's mean loss and token count, for logs
            const auto sums = dist->all_reduce_sum({sr.loss, static_cast<double>(sr.real_tokens)});
            step_loss = sums[0];
            step_tokens = std::llround(sums[1]);
        }
        ++step;
        tokens_seen += step_tokens;

        StepReport rep;
        rep.step = step;
        rep.total_steps = t.steps;
        rep.loss = step_loss;
        rep.lr = lr;
        rep.grad_norm = grad_norm;
        rep.seconds = std::chrono::duration<double>(Clock::now() - s0).count();
        rep.tokens_per_second =
            rep.seconds > 0 ? static_cast<double>(step_tokens) / rep.seconds : 0;
        rep.tokens_seen = tokens_seen;
        rep.elapsed = elapsed();
        if (metrics && t.log_interval > 0 && (step % t.log_interval == 0 || step == t.steps)) {
            metrics->add(step, "train", "loss", step_loss, rep.elapsed);
            metrics->add(step, "train", "lr", lr, rep.elapsed);
        }
        if (cb.on_step) cb.on_step(rep);
        const bool last = step == t.steps;
        if (writer && !data.validation.empty() &&
            (last || (t.eval_interval > 0 && step % t.eval_interval == 0)))
            record_eval();
        const bool snapshot = std::find(cb.snapshot_steps.begin(), cb.snapshot_steps.end(), step) !=
                              cb.snapshot_steps.end();
        if (last || snapshot || (t.checkpoint_interval > 0 && step % t.checkpoint_interval == 0))
            write_checkpoint();
        if (snapshot) keep_snapshot();
    }
    if (result.stopped && checkpoint_step != step) write_checkpoint();
    // Nobody reports success before rank 0's last checkpoint is on disk.
    if (dist) dist->barrier();
    result.final_step = step;
    return result;
}

LoadedCheckpoint load_checkpoint(const std::string& path, torch::Device device) {
    RawCheckpoint raw = read_checkpoint(path, device);
    LoadedCheckpoint out;
    out.config = raw.config;
    try {
        out.model = BertForMaskedLM(raw.config.model);
    } catch (const std::exception& e) {
        throw CheckpointError(path, std::string("invalid model config: ") + e.what());
    }
    out.model->to(device);
    load_model_weights(path, out.model, raw.model);
    out.model->eval();
    out.step = raw.step;
    out.evals = raw.evals;
    return out;
}

std::vector<std::pair<std::string, torch::Tensor>> named_weights(BertForMaskedLM& model) {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& item : model->named_parameters()) out.emplace_back(item.key(), item.value());
    for (const auto& item : model->named_buffers()) out.emplace_back(item.key(), item.value());
    return out;
}

}  // namespace engine
