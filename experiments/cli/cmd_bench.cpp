// `tupe bench`: median seconds per MLM training step (forward, backward, clip, AdamW) on a
// synthetic batch, per variant, and each variant's cost relative to the first one listed.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "engine/bert.h"
#include "engine/train_step.h"

namespace cli {

namespace {

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) if (!item.empty()) out.push_back(item);
    return out;
}

struct BenchResult {
    double median_s = 0;
    double tokens_per_s = 0;
    int64_t params = 0;
};

BenchResult bench_variant(const std::string& preset, const std::string& size, int64_t seq,
                          int64_t batch, int64_t vocab, int64_t steps, const std::string& dtype) {
    auto config = engine::make_model_config(preset, size);
    config.vocab_size = vocab;
    config.max_position_embeddings = std::max(config.max_position_embeddings, seq);
    torch::manual_seed(1);
    engine::BertForMaskedLM model(config);
    model->train();
    torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-4));
    // A fixed synthetic batch: [CLS] + random ids, 15% of positions as MLM targets.
    engine::MlmTensors batch_t;
    batch_t.input_ids = torch::randint(5, vocab, {batch, seq}, torch::kLong);
    batch_t.input_ids.select(1, 0).fill_(2);
    auto chosen = torch::rand({batch, seq}) < 0.15;
    chosen.select(1, 0).fill_(false);
    batch_t.labels = torch::where(chosen, batch_t.input_ids, torch::full_like(batch_t.input_ids, -100));
    batch_t.attention_mask = torch::ones({batch, seq}, torch::kLong);
    batch_t.real_tokens = batch * seq;
    batch_t.masked_tokens = chosen.sum().item<int64_t>();
    engine::MlmStepOptions options;
    options.dtype = dtype;
    options.clip_norm = 1.0;
    std::vector<double> times;
    const int64_t warmup = 2;
    for (int64_t i = 0; i < warmup + steps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        engine::mlm_train_step(model, optimizer, {batch_t}, options);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (i >= warmup) times.push_back(s);
    }
    std::sort(times.begin(), times.end());
    BenchResult r;
    r.median_s = times[times.size() / 2];
    r.tokens_per_s = static_cast<double>(batch * seq) / r.median_s;
    r.params = engine::parameter_groups(*model)["total"];
    return r;
}

}  // namespace

int cmd_bench(const Argv& argv) {
    Args args(argv, {"preset", "size", "seq", "batch", "threads", "steps", "dtype", "vocab-size"});
    const auto presets = split_commas(args.get("preset", "bert-a,tupe-a,tupe-r"));
    const std::string size = args.get("size", "small"), dtype = args.get("dtype", "fp32");
    const int64_t seq = args.get_int("seq", 128), batch = args.get_int("batch", 32);
    const int64_t steps = args.get_int("steps", 10), vocab = args.get_int("vocab-size", 30522);
    if (dtype != "fp32") throw UsageError("--dtype: only fp32 is benchmarked so far");
    if (args.has("threads")) at::set_num_threads(static_cast<int>(args.get_int("threads", 0)));
    if (seq < 2 || batch < 1 || steps < 1) throw UsageError("--seq, --batch and --steps must be positive");
    std::cerr << "bench: size " << size << ", seq " << seq << ", batch " << batch << ", vocab "
              << vocab << ", " << at::get_num_threads() << " threads, " << dtype << ", median of "
              << steps << " steps after 2 warm-up steps\n";
    std::vector<std::vector<std::string>> rows = {
        {"variant", "params", "s/step", "tokens/s", "vs " + presets.front()}};
    double base = 0;
    for (const auto& p : presets) {
        const auto r = bench_variant(p, size, seq, batch, vocab, steps, dtype);
        if (base == 0) base = r.median_s;
        char s[32], rel[32];
        std::snprintf(s, sizeof s, "%.3f", r.median_s);
        std::snprintf(rel, sizeof rel, "%+.1f%%", 100.0 * (r.median_s / base - 1.0));
        rows.push_back({p, format_count(static_cast<double>(r.params)), s,
                        format_count(r.tokens_per_s), rel});
        std::cerr << "  " << p << " done\n";
    }
    std::cout << format_table(rows);
    return 0;
}

}  // namespace cli
