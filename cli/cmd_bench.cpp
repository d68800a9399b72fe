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
#include "engine/fused_ops.h"
#include "engine/precision.h"
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

// ---- FLOPs ------------------------------------------------------------------------------------
// Counted analytically from the shapes, 2 FLOPs per multiply-add, matmuls only (embedding
// look-ups, LayerNorm, softmax, GELU, dropout and the optimizer are O(N*C) and left out):
//   per layer   QKV 2*N*C*3C, scores 2*N*T*C (= 2*B*H*T*T*d), context 2*N*T*C, attention
//               output 2*N*C*C, FFN 2*N*C*F * 2
//   positional  TUPE: p'U^Q and p'U^K 2*2*(T+1)*C*C and (H, T+1, T+1) correlations
//               2*(T+1)^2*C, once per forward (per layer group when not shared);
//               BERT-Ad: 2*2*T*C*C per group; the T5 bias is a look-up (0)
//   MLM head    at the M masked positions only (that is what the engine computes):
//               transform 2*M*C*C, decoder 2*M*C*V
// A training step costs forward x 3: the backward pass computes two matmuls of the forward's
// size per forward matmul (gradients of both operands).
struct FlopCount {
    double encoder = 0, positional = 0, head = 0;
    double forward() const { return encoder + positional + head; }
    double step() const { return 3.0 * forward(); }
};

FlopCount count_flops(const engine::ModelConfig& c, int64_t B, int64_t T, int64_t M) {
    const double N = static_cast<double>(B * T), C = static_cast<double>(c.hidden_size),
                 F = static_cast<double>(c.intermediate_size),
                 V = static_cast<double>(c.vocab_size),
                 L = static_cast<double>(c.num_hidden_layers), t = static_cast<double>(T);
    FlopCount f;
    f.encoder = L * (2 * N * C * 3 * C + 2 * 2 * N * t * C + 2 * N * C * C + 2 * 2 * N * C * F);
    const double groups = c.shared_pos_term ? 1.0 : L;
    const auto scheme = engine::describe_position(c);
    const double k2 =
        2.0 * static_cast<double>(c.max_relative_distance > 0 ? c.max_relative_distance
                                                              : c.max_position_embeddings - 1);
    if (scheme.untied)
        f.positional = groups * (2 * 2 * (t + 1) * C * C + 2 * (t + 1) * (t + 1) * C);
    else if (scheme.qk_offsets)
        f.positional = groups * 2 * 2 * t * C * C;
    if (scheme.relative == "deberta")  // Q_r, K_r per group; c2p and p2c against 2k rows
        f.positional = groups * 2 * 2 * k2 * C * C + L * 2 * 2 * N * k2 * C;
    if (scheme.relative == "shaw" || scheme.relative == "shaw_key_query")  // q.r (and k.r)
        f.positional = L * (scheme.relative == "shaw" ? 1 : 2) * 2 * N * t * C;
    f.head = 2 * static_cast<double>(M) * C * C + 2 * static_cast<double>(M) * C * V;
    return f;
}

// ---- memory -----------------------------------------------------------------------------------
// Analytic estimate of what one training step keeps alive at its peak (bytes):
//   parameters P*4, gradients P*4, AdamW exp_avg and exp_avg_sq 2*P*4 (fp32 master weights);
//   under bf16 autocast also the bf16 weight copies autocast caches for the step, P*2.
//   Activations saved for backward, per post-LN layer (e = 4 bytes fp32, 2 bf16):
//     matmul inputs: x, the QKV buffer (3NC), q*scale, dropped probs (S), the merged context,
//       the attention block output y, GELU output (NF):      (7NC + S + NF) * e
//     softmax output S * e, GELU input NF * e, the two LayerNorm inputs 2NC * 4,
//     dropout masks (S + 2NC) * 1 byte
//   embeddings: LayerNorm input N*C*4 and a dropout mask N*C bytes;
//   MLM head: 5 (M, C) tensors * 4, logits M*V*e, fp32 log-softmax M*V*4 (plus the fp32 copy
//     of bf16 logits), and at the start of backward the logits' gradient M*V*4;
//   the backward of one layer holds a few S-sized gradients at once: 2 * S * 4.
// Not counted: the input batch, the positional term (H*T*T), allocator slack and what the
// process held before the model was built (libraries, BLAS buffers: the "base" column).
struct MemoryEstimate {
    double params = 0, grads = 0, optimizer = 0, activations = 0;
    double total() const { return params + grads + optimizer + activations; }
};

MemoryEstimate estimate_memory(const engine::ModelConfig& c, int64_t n_params, int64_t B, int64_t T,
                               int64_t M, bool bf16) {
    const double P = static_cast<double>(n_params), N = static_cast<double>(B * T),
                 C = static_cast<double>(c.hidden_size),
                 F = static_cast<double>(c.intermediate_size),
                 V = static_cast<double>(c.vocab_size),
                 L = static_cast<double>(c.num_hidden_layers),
                 S = static_cast<double>(B * c.num_attention_heads * T * T),
                 m = static_cast<double>(M);
    const double e = bf16 ? 2.0 : 4.0;
    MemoryEstimate est;
    est.params = P * 4 + (bf16 ? P * 2 : 0.0);
    est.grads = P * 4;
    est.optimizer = 2 * P * 4;
    const double layer =
        (7 * N * C + S + N * F) * e + S * e + N * F * e + 2 * N * C * 4 + (S + 2 * N * C) * 1;
    const double head =
        5 * m * C * 4 + m * V * e + m * V * 4 + (bf16 ? m * V * 4 : 0.0) + m * V * 4;
    est.activations = L * layer + N * C * 4 + N * C + head + 2 * S * 4;
    return est;
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
    FlopCount flops;
    MemoryEstimate memory;
    double rss_base = 0, rss_peak = 0;
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

}  // namespace

int cmd_bench(const Argv& argv) {
    Args args(argv, command_spec("bench"));
    const auto presets = split_commas(args.get("preset"));
    const std::string size = args.get("size");
    std::string dtype = args.get("dtype");
    // The quickstart's model (experiments/quickstart.yaml): tiny with hidden 64, 4 heads and
    // an FFN of 256, on sequences of 64 with the 8k Brown vocabulary. The regime where per-op
    // overhead, not matmul throughput, sets the step time.
    const bool quickstart = size == "quickstart";
    const std::string format = args.get("format");
    const std::string optimizer = args.get("optimizer");
    // --kernels: the attention kernels of engine/fused_ops.h and engine/batched_matmul.h
    // ("tupe", the default), LibTorch's composition ("torch"), or both side by side, interleaved
    // step by step ("both": the speed-up measured in one run, under the same load).
    const std::string kernels = args.get("kernels");
    if (kernels != "tupe" && kernels != "torch" && kernels != "both")
        throw UsageError("--kernels: expected tupe, torch or both, got '" + kernels + "'");
    if (optimizer != "fused" && optimizer != "torch")
        throw UsageError("--optimizer: expected fused or torch, got '" + optimizer + "'");
    const int64_t seq = args.get_int("seq", quickstart ? 64 : 128), batch = args.get_int("batch");
    const int64_t steps = args.get_int("steps"), warmup = args.get_int("warmup");
    const int64_t vocab = args.get_int("vocab-size", quickstart ? 8000 : 30522);
    const int threads = static_cast<int>(args.get_int("threads", engine::available_cpus()));
    if (dtype != "fp32" && dtype != "bf16" && dtype != "auto")
        throw UsageError("--dtype: expected fp32, bf16 or auto, got '" + dtype + "'");
    if (format != "table" && format != "json")
        throw UsageError("--format: expected table or json, got '" + format + "'");
    if (seq < 2 || batch < 1 || steps < 1 || warmup < 1 || threads < 1 || vocab < 6)
        throw UsageError(
            "--seq >= 2, --batch, --steps, --warmup, --threads >= 1, --vocab-size >= 6");
    if (presets.empty()) throw UsageError("--preset: no variant given");
    const torch::Device device(args.get("device"));
    if (device.is_cuda() && !torch::cuda::is_available())
        throw UsageError("--device " + device.str() + ": this LibTorch has no usable CUDA device");
    at::set_num_threads(threads);
    if (dtype == "auto") {
        const auto choice = engine::choose_precision(dtype, device, "--dtype");
        std::cerr << "bench: --dtype auto -> " << choice.dtype << ": " << choice.reason << "\n";
        dtype = choice.dtype;
    }
    const bool bf16 = dtype == "bf16";
    const auto matmul_dtype = bf16 ? torch::kBFloat16 : torch::kFloat;

    std::cerr << "bench: size " << size << ", seq " << seq << ", batch " << batch << ", vocab "
              << vocab << ", " << at::get_num_threads() << " threads, " << dtype << ", "
              << device.str() << ", " << optimizer << " AdamW, BLAS threads "
              << (blas_threading().empty() ? std::string("not OpenBLAS") : blas_threading()) << ", "
              << allocator_name() << "; median of " << steps << " steps after " << warmup
              << " warm-up steps, variants interleaved step by step; load average "
              << load_average() << "\n";

    // Variants are built one after the other; each one's peak RSS is taken over its warm-up
    // steps (VmHWM reset first, freed memory returned to the OS before the baseline).
    std::vector<Variant> variants;
    variants.reserve(presets.size());
    double peak_flops = 0;
    bool hwm_reset = true;
    std::vector<std::pair<std::string, bool>> runs;  // preset, LibTorch kernels
    for (const auto& p : presets) {
        if (kernels != "torch") runs.push_back({p, false});
        if (kernels != "tupe") runs.push_back({p, true});
    }
    for (const auto& [p, torch_kernels] : runs) {
        Variant v;
        v.preset = p;
        v.torch_kernels = torch_kernels;
        v.label = kernels == "both" && torch_kernels ? p + "/torch" : p;
        try {
            v.config = engine::make_model_config(p, quickstart ? "tiny" : size);
            if (quickstart) {
                v.config.hidden_size = 64;
                v.config.num_attention_heads = 4;
                v.config.intermediate_size = 256;
            }
        } catch (const std::invalid_argument& e) {
            throw UsageError(std::string("--preset/--size: ") + e.what());
        }
        v.config.vocab_size = vocab;
        // Longer sequences than the size's table: every variant gets a table that fits, as a
        // run at that length would configure it (the learned tables grow, the rest ignore it).
        if (seq > v.config.max_position_embeddings) v.config.max_position_embeddings = seq;
        if (peak_flops == 0) {
            peak_flops = measure_matmul_peak(v.config, batch * seq, matmul_dtype, device);
            std::cerr << "  matmul peak (" << dtype
                      << ", best of the model's shapes): " << fmt("%.1f", peak_flops / 1e9)
                      << " GFLOP/s\n";
        }
        release_free_memory();
        hwm_reset = reset_peak_rss() && hwm_reset;
        v.rss_base = proc_status_bytes("VmRSS");
        torch::manual_seed(1);
        v.model = engine::BertForMaskedLM(v.config);
        v.model->to(device);
        v.model->train();
        // As bench/reference_bert.py: one group, lr 1e-4, weight decay 0.01, betas (0.9, 0.999).
        v.optimizer = std::make_unique<torch::optim::AdamW>(
            v.model->parameters(), torch::optim::AdamWOptions(1e-4).weight_decay(0.01));
        v.batch = synthetic_batch(batch, seq, vocab, device);
        v.params = engine::parameter_groups(*v.model)["total"];
        v.flops = count_flops(v.config, batch, seq, v.batch.masked_tokens);
        v.memory = estimate_memory(v.config, v.params, batch, seq, v.batch.masked_tokens, bf16);
        engine::MlmStepOptions options;
        options.dtype = dtype;
        options.clip_norm = 1.0;
        options.fused_adamw = optimizer == "fused";
        use_kernels(v);
        for (int64_t i = 0; i < warmup; ++i) {
            const auto r = engine::mlm_train_step(v.model, *v.optimizer, {v.batch}, options);
            if (!r.finite) throw std::runtime_error(p + ": non-finite loss in warm-up");
        }
        synchronize(device);
        v.rss_peak = peak_rss_bytes();
        variants.push_back(std::move(v));
    }
    if (!hwm_reset)
        std::cerr << "  note: /proc/self/clear_refs refused; peak RSS is the process's peak so "
                     "far, not per variant\n";

    // Timed steps, interleaved (A B C A B C ...) so that load from other processes falls on
    // every variant alike and the relative costs stay meaningful on a shared machine.
    engine::MlmStepOptions options;
    options.dtype = dtype;
    options.clip_norm = 1.0;
    options.fused_adamw = optimizer == "fused";
    for (int64_t i = 0; i < steps; ++i) {
        for (auto& v : variants) {
            use_kernels(v);
            const auto t0 = Clock::now();
            const auto r = engine::mlm_train_step(v.model, *v.optimizer, {v.batch}, options);
            synchronize(device);
            v.times.push_back(seconds_since(t0));
            v.loss = r.loss;
        }
    }
    // --profile: a few more steps per variant under LibTorch's profiler, reduced to op classes.
    std::vector<StepProfile> profiles;
    if (args.has("profile") || args.has("trace")) {
        for (auto& v : variants)
            profiles.push_back(profile_step(
                [&] {
                    use_kernels(v);
                    engine::mlm_train_step(v.model, *v.optimizer, {v.batch}, options);
                    synchronize(device);
                },
                static_cast<int>(std::max<int64_t>(3, steps / 2)),
                args.has("trace") ? args.get("trace") + "." + v.preset +
                                        (v.torch_kernels ? "-torch" : "") + ".json"
                                  : ""));
    }
    for (auto& v : variants) {
        auto sorted = v.times;
        std::sort(sorted.begin(), sorted.end());
        const size_t n = sorted.size();
        v.median_s = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    }

    const double base = variants.front().median_s;
    if (format == "json") {
        nlohmann::json out;
        out["size"] = size, out["seq"] = seq, out["batch"] = batch, out["vocab_size"] = vocab;
        out["threads"] = at::get_num_threads(), out["dtype"] = dtype, out["device"] = device.str();
        out["steps"] = steps, out["warmup"] = warmup, out["load_average"] = load_average();
        out["optimizer"] = optimizer;
        out["blas_threading"] = blas_threading(), out["allocator"] = allocator_name();
        out["matmul_peak_flops"] = peak_flops;
        out["peak_rss_per_variant"] = hwm_reset;
        for (const auto& v : variants) {
            const double achieved = v.flops.step() / v.median_s;
            out["variants"].push_back({
                {"variant", v.label},
                {"kernels", v.torch_kernels ? "torch" : "tupe"},
                {"params", v.params},
                {"median_s", v.median_s},
                {"times_s", v.times},
                {"tokens_per_s", static_cast<double>(batch * seq) / v.median_s},
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
                  {"total", v.memory.total()}}},
                {"relative_to_first", v.median_s / base},
                {"loss", v.loss},
            });
        }
        for (size_t i = 0; i < profiles.size(); ++i) {
            nlohmann::json classes = nlohmann::json::array();
            for (const auto& c : profiles[i].classes)
                classes.push_back({{"class", c.op_class},
                                   {"ms_per_step", c.ms_per_step},
                                   {"share", c.share},
                                   {"ops_per_step", c.ops_per_step}});
            nlohmann::json ops = nlohmann::json::array();
            for (const auto& c : profiles[i].ops)
                ops.push_back({{"op", c.op_class},
                               {"ms_per_step", c.ms_per_step},
                               {"calls_per_step", c.ops_per_step}});
            out["variants"][i]["profile"] = {{"wall_ms_per_step", profiles[i].wall_ms_per_step},
                                             {"classes", classes},
                                             {"ops", ops}};
        }
        std::cout << out.dump(2) << "\n";
        return 0;
    }
    std::vector<std::vector<std::string>> rows = {
        {"variant", "params", "s/step", "tokens/s", "GFLOP/step", "GFLOP/s", "util", "RSS MiB",
         "base", "estimate", "(RSS-base)/est", "vs " + variants.front().label}};
    for (const auto& v : variants) {
        const double achieved = v.flops.step() / v.median_s;
        rows.push_back(
            {v.label, format_count(static_cast<double>(v.params)), fmt("%.3f", v.median_s),
             format_count(static_cast<double>(batch * seq) / v.median_s),
             fmt("%.1f", v.flops.step() / 1e9), fmt("%.1f", achieved / 1e9),
             fmt("%.0f%%", 100.0 * achieved / peak_flops), mib(v.rss_peak), mib(v.rss_base),
             mib(v.memory.total()), fmt("%.2f", (v.rss_peak - v.rss_base) / v.memory.total()),
             fmt("%+.1f%%", 100.0 * (v.median_s / base - 1.0))});
    }
    std::cout << format_table(rows);
    std::cout << "matmul peak " << fmt("%.1f", peak_flops / 1e9) << " GFLOP/s (" << dtype
              << "); FLOPs = matmuls x 3 for forward + backward, MLM head at the "
              << variants.front().batch.masked_tokens << " masked positions; RSS = peak over "
              << (hwm_reset ? "the variant's warm-up steps" : "the process so far")
              << ", base = RSS before the variant was built\n";
    for (size_t i = 0; i < profiles.size(); ++i) {
        std::vector<std::vector<std::string>> prow = {{"op class", "ms/step", "share", "ops/step"}};
        for (const auto& c : profiles[i].classes)
            prow.push_back({c.op_class, fmt("%.2f", c.ms_per_step), fmt("%.1f%%", 100 * c.share),
                            c.ops_per_step ? std::to_string(c.ops_per_step) : ""});
        const double unprofiled = 1000.0 * variants[i].median_s;
        std::cout << "\nprofile of " << variants[i].label << " (self time per op class; "
                  << fmt("%.1f", profiles[i].wall_ms_per_step) << " ms/step under the profiler, "
                  << fmt("%.1f", unprofiled) << " without"
                  << (profiles[i].wall_ms_per_step > 1.5 * unprofiled
                          ? ": the profiler distorts multi-threaded steps, rerun with --threads 1"
                          : "")
                  << "):\n"
                  << format_table(prow);
        std::vector<std::vector<std::string>> orow = {{"most called ops", "calls/step", "ms/step"}};
        for (size_t k = 0; k < std::min<size_t>(10, profiles[i].ops.size()); ++k)
            orow.push_back({profiles[i].ops[k].op_class,
                            std::to_string(profiles[i].ops[k].ops_per_step),
                            fmt("%.2f", profiles[i].ops[k].ms_per_step)});
        std::cout << format_table(orow);
    }
    return 0;
}

}  // namespace cli
