// The pretraining checkpoint file (see trainer.h and checkpoint_internal.h): one
// torch::serialize archive holding the format tag, the resolved config as text, step, tokens
// seen, the validation history, the CPU RNG state and the model's and AdamW's own archives.
// Written atomically; read only after its zip CRCs check out (zip_integrity.h).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "checkpoint_internal.h"
#include "engine/errors.h"
#include "engine/finetune.h"
#include "engine/torch_compat.h"
#include "engine/trainer.h"
#include "zip_integrity.h"

namespace engine {

namespace fs = std::filesystem;

namespace {

// Format 2 writes AdamW's state by parameter position; format 1 (still read) held LibTorch's
// optimizer archive, whose entries are named by the parameters' addresses in the writing
// process, so two processes wrote different bytes for the same state.
constexpr const char* kFormat = "tupe-workbench/checkpoint/2";
constexpr const char* kFormat1 = "tupe-workbench/checkpoint/1";
// A fine-tuned model (save_finetuned): the encoder's config, the task and the HF-named weights.
constexpr const char* kFinetunedFormat = "tupe-finetuned-v1";

// AdamW's state, parameter by parameter in group order, with each group's options: the same
// training state gives the same archive in any process (a resumed run's checkpoints hash as an
// undisturbed run's), which LibTorch's address-keyed archive does not.
void save_adamw_state(torch::optim::AdamW& optimizer, torch::serialize::OutputArchive& archive) {
    int64_t index = 0;
    const auto& groups = optimizer.param_groups();
    archive.write("groups", c10::IValue(static_cast<int64_t>(groups.size())));
    for (size_t g = 0; g < groups.size(); ++g) {
        const auto& o = static_cast<const torch::optim::AdamWOptions&>(groups[g].options());
        const std::string group = "group" + std::to_string(g) + ".";
        archive.write(group + "params",
                      c10::IValue(static_cast<int64_t>(groups[g].params().size())));
        archive.write(group + "lr", c10::IValue(o.lr()));
        archive.write(group + "beta1", c10::IValue(std::get<0>(o.betas())));
        archive.write(group + "beta2", c10::IValue(std::get<1>(o.betas())));
        archive.write(group + "eps", c10::IValue(o.eps()));
        archive.write(group + "weight_decay", c10::IValue(o.weight_decay()));
        archive.write(group + "amsgrad", c10::IValue(o.amsgrad()));
        for (const auto& p : groups[g].params()) {
            const std::string key = "param" + std::to_string(index++) + ".";
            const auto it = optimizer.state().find(compat::optimizer_state_key(p));
            archive.write(key + "has_state", c10::IValue(it != optimizer.state().end()));
            if (it == optimizer.state().end()) continue;
            const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
            archive.write(key + "step", c10::IValue(s.step()));
            archive.write(key + "exp_avg", s.exp_avg());
            archive.write(key + "exp_avg_sq", s.exp_avg_sq());
            if (s.max_exp_avg_sq().defined())
                archive.write(key + "max_exp_avg_sq", s.max_exp_avg_sq());
        }
    }
}

// The inverse of save_adamw_state; throws std::invalid_argument when the groups or their sizes
// differ from the optimizer's.
void load_adamw_state(torch::optim::AdamW& optimizer, torch::serialize::InputArchive& archive) {
    c10::IValue value;
    archive.read("groups", value);
    auto& groups = optimizer.param_groups();
    if (value.toInt() != static_cast<int64_t>(groups.size()))
        throw std::invalid_argument("the checkpoint has " + std::to_string(value.toInt()) +
                                    " parameter groups, the optimizer " +
                                    std::to_string(groups.size()));
    int64_t index = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
        const std::string group = "group" + std::to_string(g) + ".";
        archive.read(group + "params", value);
        if (value.toInt() != static_cast<int64_t>(groups[g].params().size()))
            throw std::invalid_argument("group " + std::to_string(g) + " holds " +
                                        std::to_string(value.toInt()) + " parameters, not " +
                                        std::to_string(groups[g].params().size()));
        auto& o = static_cast<torch::optim::AdamWOptions&>(groups[g].options());
        c10::IValue b1, b2;
        archive.read(group + "lr", value);
        o.lr(value.toDouble());
        archive.read(group + "beta1", b1);
        archive.read(group + "beta2", b2);
        o.betas(std::make_tuple(b1.toDouble(), b2.toDouble()));
        archive.read(group + "eps", value);
        o.eps(value.toDouble());
        archive.read(group + "weight_decay", value);
        o.weight_decay(value.toDouble());
        archive.read(group + "amsgrad", value);
        o.amsgrad(value.toBool());
        for (const auto& p : groups[g].params()) {
            const std::string key = "param" + std::to_string(index++) + ".";
            archive.read(key + "has_state", value);
            if (!value.toBool()) continue;
            auto state = std::make_unique<torch::optim::AdamWParamState>();
            archive.read(key + "step", value);
            state->step(value.toInt());
            // A fresh tensor per read: reading into a defined tensor repoints its storage.
            torch::Tensor exp_avg, exp_avg_sq, max;
            archive.read(key + "exp_avg", exp_avg);
            archive.read(key + "exp_avg_sq", exp_avg_sq);
            if (!exp_avg.sizes().equals(p.sizes()) || !exp_avg_sq.sizes().equals(p.sizes()))
                throw std::invalid_argument("the moments of parameter " +
                                            std::to_string(index - 1) +
                                            " have another shape than the parameter");
            state->exp_avg(exp_avg.to(p.device()));
            state->exp_avg_sq(exp_avg_sq.to(p.device()));
            if (archive.try_read(key + "max_exp_avg_sq", max))
                state->max_exp_avg_sq(max.to(p.device()));
            optimizer.state()[compat::optimizer_state_key(p)] = std::move(state);
        }
    }
}

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

// A directory given where a checkpoint file is expected: say so, and name the newest *.pt in
// it (a run folder holds checkpoint.pt and its checkpoint-STEP.pt snapshots) to pass instead.
[[noreturn]] void refuse_directory(const std::string& path) {
    std::error_code ec;
    fs::path newest;
    fs::file_time_type newest_time{};
    for (const auto& entry : fs::directory_iterator(path, ec)) {
        std::error_code entry_ec;
        if (entry.path().extension() != ".pt" || !entry.is_regular_file(entry_ec)) continue;
        const auto time = entry.last_write_time(entry_ec);
        if (entry_ec) continue;
        if (newest.empty() || time > newest_time ||
            (time == newest_time && entry.path().filename() < newest.filename())) {
            newest = entry.path();
            newest_time = time;
        }
    }
    if (newest.empty())
        throw CheckpointError(path, "is a directory, not a checkpoint file (and holds no *.pt)");
    throw CheckpointError(
        path, "is a directory, not a checkpoint file; its newest checkpoint is " + newest.string());
}

}  // namespace

namespace detail {

void write_archive_atomically(const std::string& path, torch::serialize::OutputArchive& archive,
                              const std::string& what, const std::string& on_failure) {
    // Atomic: a reader (or a resume after kill -9) sees the old file or the new one, never half.
    // LibTorch's file writer finishes the zip in its destructor, where a full disk becomes
    // std::terminate; so the archive goes through our own sink, which never fails inside
    // LibTorch and reports the first write error afterwards, with the old file still in place.
    std::error_code ec;
    if (fs::path(path).has_parent_path()) {
        fs::create_directories(fs::path(path).parent_path(), ec);
        if (ec) throw CheckpointError(path, "cannot create its folder: " + ec.message());
    }
    const std::string tmp = path + ".tmp";
    std::FILE* file = std::fopen(tmp.c_str(), "wb");
    if (!file)
        throw CheckpointError(path,
                              "cannot write " + tmp + ": " + std::strerror(errno) + on_failure);
    int error = 0;
    archive.save_to([&](const void* data, size_t size) -> size_t {
        if (error == 0 && size > 0 && std::fwrite(data, 1, size, file) != size)
            error = errno != 0 ? errno : EIO;
        return size;
    });
    if (error == 0 && std::fflush(file) != 0) error = errno != 0 ? errno : EIO;
    if (error == 0 && ::fsync(::fileno(file)) != 0) error = errno;
    if (std::fclose(file) != 0 && error == 0) error = errno != 0 ? errno : EIO;
    if (error != 0) {
        fs::remove(tmp, ec);
        throw CheckpointError(
            path, "cannot write the " + what + ": " + std::strerror(error) + on_failure);
    }
    fs::rename(tmp, path, ec);
    if (ec) throw CheckpointError(path, "cannot move " + tmp + " into place: " + ec.message());
}

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
    save_adamw_state(optimizer, optimizer_archive);
    archive.write("model", model_archive);
    archive.write("optimizer", optimizer_archive);
    write_archive_atomically(path, archive, "checkpoint", "; the previous checkpoint is kept");
}

RawCheckpoint read_checkpoint(const std::string& path, torch::Device device) {
    if (!fs::exists(path)) throw CheckpointError(path, "no such checkpoint file");
    if (fs::is_directory(path)) refuse_directory(path);
    // LibTorch does not check the zip's CRCs, and a corrupted entry can crash its parser.
    verify_zip_integrity(path);
    RawCheckpoint raw;
    torch::serialize::InputArchive archive;
    try {
        archive.load_from(path, device);
    } catch (const c10::Error& e) {
        throw CheckpointError(path, "cannot read checkpoint (truncated or not a checkpoint): " +
                                        first_line(e.what_without_backtrace()));
    }
    c10::IValue value;
    if (archive.try_read("format", value) && value.isString() &&
        value.toStringRef() == kFinetunedFormat)
        throw CheckpointError(path,
                              "is a fine-tuned classifier, not a pretraining checkpoint: `tupe "
                              "classify` and `tupe export` read it");
    if (!archive.try_read("format", value) || !value.isString() ||
        (value.toStringRef() != kFormat && value.toStringRef() != kFormat1))
        throw CheckpointError(
            path, "not a TUPE Workbench checkpoint (no '" + std::string(kFormat) + "' format tag)");
    raw.format = value.toStringRef() == kFormat ? 2 : 1;
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

void restore_checkpoint(const std::string& path, RawCheckpoint& raw, BertForMaskedLM& model,
                        torch::optim::AdamW& optimizer) {
    load_model_weights(path, model, raw.model);
    try {
        if (raw.format == 1)
            optimizer.load(raw.optimizer);
        else
            load_adamw_state(optimizer, raw.optimizer);
    } catch (const c10::Error& e) {
        throw CheckpointError(
            path, "optimizer state does not fit: " + first_line(e.what_without_backtrace()));
    } catch (const std::invalid_argument& e) {
        throw CheckpointError(path, std::string("optimizer state does not fit: ") + e.what());
    }
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(raw.rng);
}

void copy_checkpoint(const std::string& from, const std::string& to) {
    std::error_code ec;
    fs::copy_file(from, to + ".tmp", fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(to + ".tmp", to, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(to + ".tmp", ignored);
        throw CheckpointError(to,
                              "cannot write the snapshot (copy of " + from + "): " + ec.message());
    }
}

}  // namespace detail

std::string checkpoint_path(const std::string& out_dir) {
    return (fs::path(out_dir) / "checkpoint.pt").string();
}
std::string snapshot_path(const std::string& out_dir, int64_t step) {
    return (fs::path(out_dir) / ("checkpoint-" + std::to_string(step) + ".pt")).string();
}

LoadedCheckpoint load_checkpoint(const std::string& path, torch::Device device) {
    detail::RawCheckpoint raw = detail::read_checkpoint(path, device);
    LoadedCheckpoint out;
    out.config = raw.config;
    try {
        out.model = BertForMaskedLM(raw.config.model);
    } catch (const std::exception& e) {
        throw CheckpointError(path, std::string("invalid model config: ") + e.what());
    }
    out.model->to(device);
    detail::load_model_weights(path, out.model, raw.model);
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

void save_finetuned(const std::string& path, BertForSequenceClassification& model,
                    const PretrainConfig& encoder, const std::string& task, int64_t epoch) {
    torch::serialize::OutputArchive archive, weights;
    archive.write("format", c10::IValue(std::string(kFinetunedFormat)));
    archive.write("task", c10::IValue(task));
    archive.write("num_labels", c10::IValue(model->num_labels()));
    archive.write("epoch", c10::IValue(epoch));
    archive.write("config", c10::IValue(config_to_text(encoder)));
    model->save(weights);
    archive.write("model", weights);
    detail::write_archive_atomically(path, archive, "fine-tuned model");
}

std::string checkpoint_format(const std::string& path) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return "";
    torch::serialize::InputArchive archive;
    try {
        archive.load_from(path);
    } catch (const c10::Error&) {
        return "";
    }
    c10::IValue value;
    if (!archive.try_read("format", value) || !value.isString()) return "";
    return value.toStringRef();
}

bool is_finetuned_checkpoint(const std::string& path) {
    return checkpoint_format(path) == kFinetunedFormat;
}

FinetunedCheckpoint load_finetuned(const std::string& path, torch::Device device) {
    if (!fs::exists(path)) throw CheckpointError(path, "no such fine-tuned model file");
    if (fs::is_directory(path)) refuse_directory(path);
    detail::verify_zip_integrity(path);
    torch::serialize::InputArchive archive, weights;
    try {
        archive.load_from(path, device);
    } catch (const c10::Error& e) {
        throw CheckpointError(path, "cannot read the fine-tuned model (truncated or not one): " +
                                        first_line(e.what_without_backtrace()));
    }
    c10::IValue value;
    if (!archive.try_read("format", value) || !value.isString() ||
        value.toStringRef() != kFinetunedFormat)
        throw CheckpointError(path, "not a fine-tuned model (no '" + std::string(kFinetunedFormat) +
                                        "' format tag; finetune.save: best writes one)");
    FinetunedCheckpoint out;
    int64_t num_labels = 0;
    try {
        archive.read("task", value);
        out.task = value.toStringRef();
        archive.read("num_labels", value);
        num_labels = value.toInt();
        archive.read("epoch", value);
        out.epoch = value.toInt();
        archive.read("config", value);
        out.config = parse_config_text(value.toStringRef());
        archive.read("model", weights);
    } catch (const c10::Error& e) {
        throw CheckpointError(
            path, "incomplete fine-tuned model: " + first_line(e.what_without_backtrace()));
    } catch (const std::invalid_argument& e) {
        throw CheckpointError(path, std::string("bad config in the fine-tuned model: ") + e.what());
    }
    if (num_labels < 1)
        throw CheckpointError(path, "num_labels = " + std::to_string(num_labels) + ", not >= 1");
    try {
        out.model = BertForSequenceClassification(out.config.model, num_labels, 0.0);
    } catch (const std::exception& e) {
        throw CheckpointError(path, std::string("invalid model config: ") + e.what());
    }
    out.model->to(device);
    try {
        out.model->load(weights);
    } catch (const c10::Error& e) {
        throw CheckpointError(path, "weights do not fit the model of its config (" +
                                        out.config.model.preset +
                                        "): " + first_line(e.what_without_backtrace()));
    }
    out.model->eval();
    return out;
}

}  // namespace engine
