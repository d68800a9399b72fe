// `tupe bench`: the MLM training step (engine::mlm_train_step: forward, backward, clipping,
// AdamW) per variant on a synthetic batch: median s/step, tokens/s, achieved FLOP/s against the
// machine's own matmul peak measured here for the same dtype, peak RSS against an analytic
// estimate, and each variant's cost relative to the first. Shapes: B batch, T tokens, C hidden,
// H heads, F FFN width, V vocabulary, M masked positions, N = B * T, S = B * H * T * T.
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench_profile.h"
#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/batched_matmul.h"
#include "engine/bert.h"
#include "engine/cost_model.h"
#include "engine/finetune.h"
#include "engine/fused_ops.h"
#include "engine/precision.h"
#include "engine/tensor_memory.h"
#include "engine/threads.h"
#include "engine/train_step.h"
#include "runtime_info.h"

namespace cli {

namespace {

using engine::matmul_flops;
using engine::synchronize;
using Clock = std::chrono::steady_clock;

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- process memory ---------------------------------------------------------------------------

/// A "VmXXX:   123 kB" line of /proc/self/status in bytes; -1 when unavailable.
double proc_status_bytes(const char* key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    const std::string prefix = std::string(key) + ":";
    while (std::getline(in, line))
        if (line.compare(0, prefix.size(), prefix) == 0)
            return std::stod(line.substr(prefix.size())) * 1024.0;
    return -1;
}

/// Resets VmHWM to the current RSS (Linux >= 4.0: "5" > /proc/self/clear_refs). False when the
/// kernel refuses; the peak is then the process's peak so far.
bool reset_peak_rss() {
    std::ofstream out("/proc/self/clear_refs");
    if (!out) return false;
    out << "5";
    out.flush();
    return static_cast<bool>(out);
}

double peak_rss_bytes() {
    const double hwm = proc_status_bytes("VmHWM");
    if (hwm >= 0) return hwm;
    struct rusage u {};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) * 1024.0;
}

// ---- matmul peak ------------------------------------------------------------------------------

/// Best FLOP/s of a few matmuls at the model's own shapes ((N, C) x (C, F), (N, F) x (F, C),
/// (N, C) x (C, 3C)) and a 1024 square, in `dtype`. Each shape runs until it has had 3 timed
/// repetitions or 1.5 s.
double measure_matmul_peak(const engine::ModelConfig& c, int64_t N, torch::ScalarType dtype,
                           const torch::Device& device) {
    const int64_t C = c.hidden_size, F = c.intermediate_size;
    double best = 0;
    for (const auto& s : std::vector<std::array<int64_t, 3>>{
             {N, C, F}, {N, F, C}, {N, C, 3 * C}, {1024, 1024, 1024}})
        best = std::max(best, matmul_flops(s[0], s[1], s[2], dtype, device));
    return best;
}

// ---- one variant ------------------------------------------------------------------------------

struct Variant {
    std::string preset;
    std::string label;           ///< preset, or "preset/torch" for LibTorch's own kernels
    bool torch_kernels = false;  ///< attention through torch::matmul + softmax (--kernels)
    engine::ModelConfig config;
    engine::BertForMaskedLM model{nullptr};
    std::unique_ptr<torch::optim::AdamW> optimizer;
    engine::MlmTensors batch;
    int64_t params = 0;
    engine::StepFlops flops;
    engine::StepMemory memory;
    double rss_base = 0, rss_peak = 0;
    double tensor_peak = 0;  ///< counted CPU tensor bytes at the warm-up's peak, over the base
    std::vector<double> times;
    double median_s = 0;
    double loss = 0;
};

/// Selects the variant's attention kernels for the steps that follow.
void use_kernels(const Variant& v) {
    engine::set_fused_attention_enabled(!v.torch_kernels);
    engine::set_batched_matmul_enabled(!v.torch_kernels);
}

engine::MlmTensors synthetic_batch(int64_t B, int64_t T, int64_t vocab, const torch::Device& d) {
    // [CLS] + random ids, 15% of positions (never [CLS]) as MLM targets; no padding. The same
    // batch (seed 1) for every variant, as bench/reference_bert.py.
    torch::manual_seed(1);
    engine::MlmTensors b;
    auto ids = torch::randint(5, vocab, {B, T}, torch::kLong);
    ids.select(1, 0).fill_(2);
    auto chosen = torch::rand({B, T}) < 0.15;
    chosen.select(1, 0).fill_(false);
    b.labels = torch::where(chosen, ids, torch::full_like(ids, -100)).to(d);
    b.input_ids = ids.to(d);
    b.attention_mask = torch::ones({B, T}, torch::kLong).to(d);
    b.real_tokens = B * T;
    b.masked_tokens = chosen.sum().item<int64_t>();
    return b;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

std::string mib(double bytes) { return fmt("%.0f", bytes / (1024.0 * 1024.0)); }

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return in ? a + " " + b + " " + c : "?";
}

// ---- the command's steps ----------------------------------------------------------------------

/// The command line, validated.
struct BenchSetup {
    std::vector<std::string> presets;
    std::string size, dtype, format, optimizer, kernels;
    bool quickstart = false;
    int64_t seq = 0, batch = 0, steps = 0, warmup = 0, vocab = 0;
    int threads = 0;
    torch::Device device{torch::kCPU};
    bool bf16 = false;
    bool finetune = false;  ///< --finetune: fine-tuning steps instead of MLM steps
    bool profile = false;   ///< --profile or --trace
    bool trace = false;     ///< --trace: trace_prefix.PRESET[-torch].json per variant
    std::string trace_prefix;
};

BenchSetup parse_bench_setup(const Args& args) {
    BenchSetup s;
    s.presets = split_commas(args.get("preset"));
    s.size = args.get("size");
    s.dtype = args.get("dtype");
    // The quickstart's model (experiments/quickstart.yaml): tiny with hidden 64, 4 heads and
    // an FFN of 256, on sequences of 64 with the 8k Brown vocabulary. The regime where per-op
    // overhead, not matmul throughput, sets the step time.
    s.quickstart = s.size == "quickstart";
    s.format = args.get("format");
    s.optimizer = args.get("optimizer");
    // --kernels: the attention kernels of engine/fused_ops.h and engine/batched_matmul.h
    // ("tupe", the default), LibTorch's composition ("torch"), or both side by side, interleaved
    // step by step ("both": the speed-up measured in one run, under the same load).
    s.kernels = args.get("kernels");
    if (s.kernels != "tupe" && s.kernels != "torch" && s.kernels != "both")
        throw UsageError("--kernels: expected tupe, torch or both, got '" + s.kernels + "'");
    if (s.optimizer != "fused" && s.optimizer != "torch")
        throw UsageError("--optimizer: expected fused or torch, got '" + s.optimizer + "'");
    s.seq = args.get_int("seq", s.quickstart ? 64 : 128), s.batch = args.get_int("batch");
    s.steps = args.get_int("steps"), s.warmup = args.get_int("warmup");
    s.vocab = args.get_int("vocab-size", s.quickstart ? 8000 : 30522);
    s.threads = static_cast<int>(args.get_int("threads", engine::available_cpus()));
    if (s.dtype != "fp32" && s.dtype != "bf16" && s.dtype != "auto")
        throw UsageError("--dtype: expected fp32, bf16 or auto, got '" + s.dtype + "'");
    if (s.format != "table" && s.format != "json")
        throw UsageError("--format: expected table or json, got '" + s.format + "'");
    if (s.seq < 2 || s.batch < 1 || s.steps < 1 || s.warmup < 1 || s.threads < 1 || s.vocab < 6)
        throw UsageError(
            "--seq >= 2, --batch, --steps, --warmup, --threads >= 1, --vocab-size >= 6");
    if (s.presets.empty()) throw UsageError("--preset: no variant given");
    s.device = torch::Device(args.get("device"));
    if (s.device.is_cuda() && !torch::cuda::is_available())
        throw UsageError("--device " + s.device.str() +
                         ": this LibTorch has no usable CUDA device");
    s.finetune = args.has("finetune");
    s.profile = args.has("profile") || args.has("trace");
    if (s.finetune && s.profile)
        throw UsageError("--finetune: --profile and --trace time MLM steps only");
    if (s.finetune && s.kernels == "both")
        throw UsageError("--finetune: --kernels both is for MLM steps only");
    s.trace = args.has("trace");
    if (s.trace) s.trace_prefix = args.get("trace");
    return s;
}

/// Sets the thread count, resolves --dtype auto and prints the run's conditions on stderr.
void start_bench(BenchSetup& s) {
    at::set_num_threads(s.threads);
    if (s.dtype == "auto") {
        const auto choice = engine::choose_precision(s.dtype, s.device, "--dtype");
        std::cerr << "bench: --dtype auto -> " << choice.dtype << ": " << choice.reason << "\n";
        s.dtype = choice.dtype;
    }
    s.bf16 = s.dtype == "bf16";
    std::cerr << "bench: size " << s.size << ", seq " << s.seq << ", batch " << s.batch
              << ", vocab " << s.vocab << ", " << at::get_num_threads() << " threads, " << s.dtype
              << ", " << s.device.str() << ", " << s.optimizer << " AdamW, BLAS threads "
              << (blas_threading().empty() ? std::string("not OpenBLAS") : blas_threading()) << ", "
              << allocator_name() << "; median of " << s.steps << " steps after " << s.warmup
              << " warm-up steps, variants interleaved step by step; load average "
              << load_average() << "\n";
}

engine::MlmStepOptions bench_step_options(const BenchSetup& s) {
    engine::MlmStepOptions options;
    options.dtype = s.dtype;
    options.clip_norm = 1.0;
    options.fused_adamw = s.optimizer == "fused";
    return options;
}

engine::ModelConfig bench_model_config(const std::string& preset, const BenchSetup& s) {
    engine::ModelConfig config;
    try {
        config = engine::make_model_config(preset, s.quickstart ? "tiny" : s.size);
        if (s.quickstart) {
            config.hidden_size = 64;
            config.num_attention_heads = 4;
            config.intermediate_size = 256;
        }
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--preset/--size: ") + e.what());
    }
    config.vocab_size = s.vocab;
    // Longer sequences than the size's table: every variant gets a table that fits, as a
    // run at that length would configure it (the learned tables grow, the rest ignore it).
    if (s.seq > config.max_position_embeddings) config.max_position_embeddings = s.seq;
    return config;
}

/// Builds the model, optimizer and batch of `v` (its config set) and runs its warm-up steps;
/// its peak RSS is taken over them (VmHWM reset first, freed memory returned to the OS before
/// the baseline). `hwm_reset` turns false when the kernel refuses the reset.
void warm_up_variant(Variant& v, const BenchSetup& s, bool& hwm_reset) {
    release_free_memory();
    hwm_reset = reset_peak_rss() && hwm_reset;
    v.rss_base = proc_status_bytes("VmRSS");
    const int64_t tensor_base = engine::live_tensor_bytes();
    engine::reset_peak_tensor_bytes();
    torch::manual_seed(1);
    v.model = engine::BertForMaskedLM(v.config);
    v.model->to(s.device);
    v.model->train();
    // As bench/reference_bert.py: one group, lr 1e-4, weight decay 0.01, betas (0.9, 0.999).
    v.optimizer = std::make_unique<torch::optim::AdamW>(
        v.model->parameters(), torch::optim::AdamWOptions(1e-4).weight_decay(0.01));
    v.batch = synthetic_batch(s.batch, s.seq, s.vocab, s.device);
    v.params = engine::parameter_groups(*v.model)["total"];
    v.flops = engine::count_step_flops(v.config, s.batch, s.seq, v.batch.masked_tokens);
    v.memory = engine::estimate_step_memory(v.config, v.params, s.batch, s.seq,
                                            v.batch.masked_tokens, s.bf16);
    const auto options = bench_step_options(s);
    use_kernels(v);
    for (int64_t i = 0; i < s.warmup; ++i) {
        const auto r = engine::mlm_train_step(v.model, *v.optimizer, {v.batch}, options);
        if (!r.finite) throw std::runtime_error(v.preset + ": non-finite loss in warm-up");
    }
    synchronize(s.device);
    v.rss_peak = peak_rss_bytes();
    v.tensor_peak = static_cast<double>(engine::peak_tensor_bytes() - tensor_base);
}

/// Every variant built and warmed up, one after the other; the matmul peak is measured at the
/// first one's shapes.
std::vector<Variant> build_bench_variants(const BenchSetup& s, double& peak_flops,
                                          bool& hwm_reset) {
    std::vector<std::pair<std::string, bool>> runs;  // preset, LibTorch kernels
    for (const auto& p : s.presets) {
        if (s.kernels != "torch") runs.push_back({p, false});
        if (s.kernels != "tupe") runs.push_back({p, true});
    }
    std::vector<Variant> variants;
    variants.reserve(s.presets.size());
    for (const auto& [p, torch_kernels] : runs) {
        Variant v;
        v.preset = p;
        v.torch_kernels = torch_kernels;
        v.label = s.kernels == "both" && torch_kernels ? p + "/torch" : p;
        v.config = bench_model_config(p, s);
        if (peak_flops == 0) {
            peak_flops = measure_matmul_peak(v.config, s.batch * s.seq,
                                             s.bf16 ? torch::kBFloat16 : torch::kFloat, s.device);
            std::cerr << "  matmul peak (" << s.dtype
                      << ", best of the model's shapes): " << fmt("%.1f", peak_flops / 1e9)
                      << " GFLOP/s\n";
        }
        warm_up_variant(v, s, hwm_reset);
        variants.push_back(std::move(v));
    }
    if (!hwm_reset)
        std::cerr << "  note: /proc/self/clear_refs refused; peak RSS is the process's peak so "
                     "far, not per variant\n";
    return variants;
}

/// Timed steps, interleaved (A B C A B C ...) so that load from other processes falls on
/// every variant alike and the relative costs stay meaningful on a shared machine; then each
/// variant's median.
void time_bench_variants(std::vector<Variant>& variants, const BenchSetup& s) {
    const auto options = bench_step_options(s);
    for (int64_t i = 0; i < s.steps; ++i) {
        for (auto& v : variants) {
            use_kernels(v);
            const auto t0 = Clock::now();
            const auto r = engine::mlm_train_step(v.model, *v.optimizer, {v.batch}, options);
            synchronize(s.device);
            v.times.push_back(seconds_since(t0));
            v.loss = r.loss;
        }
    }
    for (auto& v : variants) {
        auto sorted = v.times;
        std::sort(sorted.begin(), sorted.end());
        const size_t n = sorted.size();
        v.median_s = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    }
}

/// --profile: a few more steps per variant under LibTorch's profiler, reduced to op classes.
std::vector<StepProfile> profile_bench_variants(std::vector<Variant>& variants,
                                                const BenchSetup& s) {
    std::vector<StepProfile> profiles;
    if (!s.profile) return profiles;
    const auto options = bench_step_options(s);
    for (auto& v : variants)
        profiles.push_back(profile_step(
            [&] {
                use_kernels(v);
                engine::mlm_train_step(v.model, *v.optimizer, {v.batch}, options);
                synchronize(s.device);
            },
            static_cast<int>(std::max<int64_t>(3, s.steps / 2)),
            s.trace ? s.trace_prefix + "." + v.preset + (v.torch_kernels ? "-torch" : "") + ".json"
                    : ""));
    return profiles;
}

nlohmann::json bench_variant_json(const Variant& v, const BenchSetup& s, double peak_flops,
                                  double base) {
    const double achieved = v.flops.step() / v.median_s;
    return {
        {"variant", v.label},
        {"kernels", v.torch_kernels ? "torch" : "tupe"},
        {"params", v.params},
        {"median_s", v.median_s},
        {"times_s", v.times},
        {"tokens_per_s", static_cast<double>(s.batch * s.seq) / v.median_s},
        {"flops_per_step", v.flops.step()},
        {"flops_forward",
         {{"encoder", v.flops.encoder},
          {"positional", v.flops.positional},
          {"mlm_head", v.flops.head}}},
        {"masked_tokens", v.batch.masked_tokens},
        {"achieved_flops", achieved},
        {"utilisation", achieved / peak_flops},
        {"rss_base_bytes", v.rss_base},
        {"rss_peak_bytes", v.rss_peak},
        {"memory_estimate_bytes",
         {{"params", v.memory.params},
          {"grads", v.memory.grads},
          {"optimizer", v.memory.optimizer},
          {"activations", v.memory.activations},
          {"positional", v.memory.positional},
          {"total", v.memory.total()}}},
        {"tensor_peak_bytes", v.tensor_peak},
        {"relative_to_first", v.median_s / base},
        {"loss", v.loss},
    };
}

nlohmann::json bench_profile_json(const StepProfile& profile) {
    nlohmann::json classes = nlohmann::json::array();
    for (const auto& c : profile.classes)
        classes.push_back({{"class", c.op_class},
                           {"ms_per_step", c.ms_per_step},
                           {"share", c.share},
                           {"ops_per_step", c.ops_per_step}});
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& c : profile.ops)
        ops.push_back({{"op", c.op_class},
                       {"ms_per_step", c.ms_per_step},
                       {"calls_per_step", c.ops_per_step}});
    return {{"wall_ms_per_step", profile.wall_ms_per_step}, {"classes", classes}, {"ops", ops}};
}

void print_bench_json(const std::vector<Variant>& variants,
                      const std::vector<StepProfile>& profiles, const BenchSetup& s,
                      double peak_flops, bool hwm_reset) {
    const double base = variants.front().median_s;
    nlohmann::json out;
    out["size"] = s.size, out["seq"] = s.seq, out["batch"] = s.batch, out["vocab_size"] = s.vocab;
    out["threads"] = at::get_num_threads(), out["dtype"] = s.dtype, out["device"] = s.device.str();
    out["steps"] = s.steps, out["warmup"] = s.warmup, out["load_average"] = load_average();
    out["optimizer"] = s.optimizer;
    out["blas_threading"] = blas_threading(), out["allocator"] = allocator_name();
    out["matmul_peak_flops"] = peak_flops;
    out["peak_rss_per_variant"] = hwm_reset;
    for (const auto& v : variants)
        out["variants"].push_back(bench_variant_json(v, s, peak_flops, base));
    for (size_t i = 0; i < profiles.size(); ++i)
        out["variants"][i]["profile"] = bench_profile_json(profiles[i]);
    std::cout << out.dump(2) << "\n";
}

void print_bench_profile(const Variant& v, const StepProfile& profile) {
    std::vector<std::vector<std::string>> prow = {{"op class", "ms/step", "share", "ops/step"}};
    for (const auto& c : profile.classes)
        prow.push_back({c.op_class, fmt("%.2f", c.ms_per_step), fmt("%.1f%%", 100 * c.share),
                        c.ops_per_step ? std::to_string(c.ops_per_step) : ""});
    const double unprofiled = 1000.0 * v.median_s;
    std::cout << "\nprofile of " << v.label << " (self time per op class; "
              << fmt("%.1f", profile.wall_ms_per_step) << " ms/step under the profiler, "
              << fmt("%.1f", unprofiled) << " without"
              << (profile.wall_ms_per_step > 1.5 * unprofiled
                      ? ": the profiler distorts multi-threaded steps, rerun with --threads 1"
                      : "")
              << "):\n"
              << format_table(prow);
    std::vector<std::vector<std::string>> orow = {{"most called ops", "calls/step", "ms/step"}};
    for (size_t k = 0; k < std::min<size_t>(10, profile.ops.size()); ++k)
        orow.push_back({profile.ops[k].op_class, std::to_string(profile.ops[k].ops_per_step),
                        fmt("%.2f", profile.ops[k].ms_per_step)});
    std::cout << format_table(orow);
}

void print_bench_table(const std::vector<Variant>& variants,
                       const std::vector<StepProfile>& profiles, const BenchSetup& s,
                       double peak_flops, bool hwm_reset) {
    const double base = variants.front().median_s;
    std::vector<std::vector<std::string>> rows = {{"variant", "params", "s/step", "tokens/s",
                                                   "GFLOP/step", "GFLOP/s", "util", "RSS MiB",
                                                   "base", "tensors", "estimate", "(RSS-base)/est",
                                                   "tensors/est", "vs " + variants.front().label}};
    for (const auto& v : variants) {
        const double achieved = v.flops.step() / v.median_s;
        rows.push_back({v.label, format_count(static_cast<double>(v.params)),
                        fmt("%.3f", v.median_s),
                        format_count(static_cast<double>(s.batch * s.seq) / v.median_s),
                        fmt("%.1f", v.flops.step() / 1e9), fmt("%.1f", achieved / 1e9),
                        fmt("%.0f%%", 100.0 * achieved / peak_flops), mib(v.rss_peak),
                        mib(v.rss_base), mib(v.tensor_peak), mib(v.memory.total()),
                        fmt("%.2f", (v.rss_peak - v.rss_base) / v.memory.total()),
                        fmt("%.2f", v.tensor_peak / v.memory.total()),
                        fmt("%+.1f%%", 100.0 * (v.median_s / base - 1.0))});
    }
    std::cout << format_table(rows);
    std::cout << "matmul peak " << fmt("%.1f", peak_flops / 1e9) << " GFLOP/s (" << s.dtype
              << "); FLOPs = matmuls x 3 for forward + backward, MLM head at the "
              << variants.front().batch.masked_tokens << " masked positions; RSS = peak over "
              << (hwm_reset ? "the variant's warm-up steps" : "the process so far")
              << ", base = RSS before the variant was built; tensors = the peak of CPU tensor "
                 "storage over the warm-up steps, counted by the allocator (what the estimate "
                 "models)\n";
    for (size_t i = 0; i < profiles.size(); ++i) print_bench_profile(variants[i], profiles[i]);
}

// ---- --finetune: the fine-tuning runner's steps ------------------------------------------------

/// GLUE-shaped single-sentence examples, two balanced labels: word counts spread evenly over
/// [seq/8, seq-2] by a fixed stride, so the length-bucketed batches span short and long ones
/// as a GLUE task's do; one token per word ("w123"). bench/reference_bert.py --finetune draws
/// the same counts.
std::vector<engine::LabeledText> finetune_bench_examples(const BenchSetup& s, int64_t n) {
    const int64_t lo = std::max<int64_t>(1, s.seq / 8), hi = s.seq - 2, span = hi - lo + 1;
    std::vector<engine::LabeledText> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const int64_t words = lo + (i * 7919 + 13) % span;
        std::string text;
        for (int64_t w = 0; w < words; ++w) {
            if (w) text += ' ';
            text += "w" + std::to_string((i * 31 + w * 17) % (s.vocab - 5));
        }
        out[static_cast<size_t>(i)].text_a = std::move(text);
        out[static_cast<size_t>(i)].label = i % 2;
    }
    return out;
}

struct FinetuneBenchRow {
    std::string preset;
    int64_t params = 0;
    std::vector<double> times;  ///< Seconds per measured step.
    double median_s = 0, loss = 0;
};

/// One variant through engine::finetune, the runner's own code path (encoding, length
/// buckets, the classifier, AdamW with its schedule, clipping): the time between consecutive
/// steps after the warm-up steps.
FinetuneBenchRow finetune_bench_variant(const std::string& preset, const BenchSetup& s,
                                        const engine::WordPieceTokenizer& tokenizer,
                                        const std::vector<engine::LabeledText>& train) {
    FinetuneBenchRow row;
    row.preset = preset;
    const auto config = bench_model_config(preset, s);
    torch::manual_seed(1);
    engine::BertForMaskedLM encoder(config);
    engine::FinetuneConfig fc;
    fc.num_labels = 2;
    fc.epochs = 1;
    fc.batch_size = s.batch;
    fc.max_seq_len = s.seq;
    fc.threads = s.threads;
    fc.dtype = s.dtype;
    fc.device = s.device.str();
    {
        engine::BertForSequenceClassification counted(config, 2);
        for (const auto& p : counted->parameters()) row.params += p.numel();
    }
    engine::FinetuneCallbacks cb;
    auto last = Clock::now();
    cb.on_step = [&](int64_t step, int64_t, double loss) {
        synchronize(s.device);
        const auto now = Clock::now();
        if (step > s.warmup) row.times.push_back(std::chrono::duration<double>(now - last).count());
        last = now;
        row.loss = loss;
    };
    engine::finetune(encoder, tokenizer, train, {}, fc, cb);
    auto sorted = row.times;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    row.median_s = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    return row;
}

int finetune_bench(const BenchSetup& s) {
    std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    for (int64_t i = 0; i + 5 < s.vocab; ++i) tokens.push_back("w" + std::to_string(i));
    const engine::WordPieceTokenizer tokenizer(engine::Vocab::from_tokens(tokens));
    const auto train = finetune_bench_examples(s, s.batch * (s.warmup + s.steps));
    int64_t words = 0;
    for (const auto& e : train) words += 2 + std::count(e.text_a.begin(), e.text_a.end(), ' ') + 1;
    const double tokens_per_example =
        static_cast<double>(words) / static_cast<double>(train.size());
    std::cerr << "  fine-tuning: " << train.size() << " single-sentence examples of "
              << fmt("%.1f", tokens_per_example) << " tokens on average ([CLS] and [SEP] included, "
              << std::max<int64_t>(1, s.seq / 8) + 2 << " to " << s.seq
              << "), length-bucketed batches of " << s.batch
              << ", 2 labels, one epoch; variants one after another\n";
    std::vector<FinetuneBenchRow> rows;
    for (const auto& p : s.presets) rows.push_back(finetune_bench_variant(p, s, tokenizer, train));
    const double base = rows.front().median_s;
    if (s.format == "json") {
        nlohmann::json out;
        out["mode"] = "finetune", out["size"] = s.size, out["seq"] = s.seq, out["batch"] = s.batch;
        out["vocab_size"] = s.vocab, out["threads"] = at::get_num_threads(), out["dtype"] = s.dtype;
        out["device"] = s.device.str(), out["steps"] = s.steps, out["warmup"] = s.warmup;
        out["load_average"] = load_average(), out["tokens_per_example"] = tokens_per_example;
        out["blas_threading"] = blas_threading(), out["allocator"] = allocator_name();
        for (const auto& r : rows)
            out["variants"].push_back(
                {{"variant", r.preset},
                 {"params", r.params},
                 {"median_s", r.median_s},
                 {"times_s", r.times},
                 {"examples_per_s", static_cast<double>(s.batch) / r.median_s},
                 {"tokens_per_s", tokens_per_example * s.batch / r.median_s},
                 {"relative_to_first", r.median_s / base},
                 {"loss", r.loss}});
        std::cout << out.dump(2) << "\n";
        return 0;
    }
    std::vector<std::vector<std::string>> table = {
        {"variant", "params", "s/step", "examples/s", "tokens/s", "vs " + rows.front().preset}};
    for (const auto& r : rows)
        table.push_back({r.preset, format_count(static_cast<double>(r.params)),
                         fmt("%.4f", r.median_s), fmt("%.0f", s.batch / r.median_s),
                         format_count(tokens_per_example * s.batch / r.median_s),
                         fmt("%+.1f%%", 100.0 * (r.median_s / base - 1.0))});
    std::cout << format_table(table)
              << "fine-tuning steps of engine::finetune (classifier on [CLS], AdamW, clipping); "
                 "tokens/s counts real tokens, not padding\n";
    return 0;
}

}  // namespace

int cmd_bench(const Argv& argv) {
    Args args(argv, command_spec("bench"));
    BenchSetup setup = parse_bench_setup(args);
    start_bench(setup);
    if (setup.finetune) return finetune_bench(setup);
    double peak_flops = 0;
    bool hwm_reset = true;
    engine::track_tensor_memory();  // before any model is built: every tensor is counted
    auto variants = build_bench_variants(setup, peak_flops, hwm_reset);
    time_bench_variants(variants, setup);
    const auto profiles = profile_bench_variants(variants, setup);
    if (setup.format == "json")
        print_bench_json(variants, profiles, setup, peak_flops, hwm_reset);
    else
        print_bench_table(variants, profiles, setup, peak_flops, hwm_reset);
    return 0;
}

}  // namespace cli
