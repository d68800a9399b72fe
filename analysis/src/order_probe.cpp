// The order probe (order_probe.h): perturbed windows against the original, same masked tokens.
#include "analysis/order_probe.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

#include "analysis/extrapolate.h"
#include "engine/errors.h"
#include "engine/eval_mode.h"
#include "tensor_util.h"

namespace analysis {

using detail::check_probe_stream;
using detail::require;

namespace {

// The seed of one window's perturbation: the probe's seed, the row and the window, mixed.
uint64_t mix(uint64_t seed, uint64_t a, uint64_t b) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ (a + 0x632BE59BD9B4E019ULL) * 0xBF58476D1CE4E5B9ULL;
    x ^= (b + 0x94D049BB133111EBULL) * 0xD6E8FEB86659FD93ULL;
    return x ^ (x >> 29);
}

// Sum of the masked-token cross-entropies of windows[w] under permutation perm(w) (identity
// when perm is empty), and the number scored.
struct LossSum {
    double sum = 0;
    int64_t count = 0;
};

}  // namespace

std::vector<int64_t> ngram_shuffle(int64_t count, int64_t n, uint64_t seed) {
    require(count >= 0 && n >= 1, "ngram_shuffle: count >= 0 and n >= 1");
    std::vector<int64_t> starts;
    for (int64_t s = 0; s < count; s += n) starts.push_back(s);
    std::mt19937_64 rng(seed);
    std::shuffle(starts.begin(), starts.end(), rng);
    std::vector<int64_t> out;
    out.reserve(static_cast<size_t>(count));
    for (int64_t s : starts)
        for (int64_t t = s; t < std::min(count, s + n); ++t) out.push_back(t);
    return out;
}

std::vector<int64_t> adjacent_swaps(int64_t count, int64_t k, uint64_t seed) {
    require(count >= 0 && k >= 0, "adjacent_swaps: count >= 0 and k >= 0");
    std::vector<int64_t> out(static_cast<size_t>(count));
    std::iota(out.begin(), out.end(), 0);
    if (count < 2) return out;
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> pick(0, count - 2);
    for (int64_t s = 0; s < k; ++s) {
        const auto t = static_cast<size_t>(pick(rng));
        std::swap(out[t], out[t + 1]);
    }
    return out;
}

OrderProbeReport order_probe(engine::BertForMaskedLM& model, const std::vector<int64_t>& stream,
                             const engine::Vocab& vocab, const OrderProbeOptions& options) {
    const int64_t T = options.length, W = T - 2;
    require(T >= 4, "order probe: length must be >= 4 tokens, got " + std::to_string(T));
    require(options.windows >= 1 && options.batch_size >= 1,
            "order probe: windows and batch_size must be >= 1");
    for (int64_t n : options.ngrams) require(n >= 1, "order probe: n-grams must be >= 1");
    for (int64_t k : options.swaps) require(k >= 0, "order probe: swaps must be >= 0");
    const engine::ModelConfig& config = model->bert->config();
    require(vocab.size() <= config.vocab_size,
            "order probe: the vocabulary does not fit the model");
    check_probe_stream(stream, W, config.vocab_size, options.source, "the order probe");
    const auto S = static_cast<int64_t>(stream.size());
    const int64_t nwin = std::min(options.windows, S / W);

    engine::EvalModeGuard eval(*model);
    torch::NoGradGuard no_grad;
    const auto device = model->bert->embeddings->word_embeddings->weight.device();

    // kind 0: original, 1: n-gram shuffle, 2: adjacent swaps; `row` seeds the permutations.
    auto run = [&](int kind, int64_t n, uint64_t row) {
        LossSum total;
        for (int64_t first = 0; first < nwin; first += options.batch_size) {
            const int64_t B = std::min(options.batch_size, nwin - first);
            std::vector<int64_t> ids(static_cast<size_t>(B * T)), labels(ids.size(), -100);
            for (int64_t b = 0; b < B; ++b) {
                const int64_t w = first + b, base = w * W;
                std::vector<int64_t> perm;
                const uint64_t seed = mix(options.seed, row, static_cast<uint64_t>(w));
                if (kind == 1) perm = ngram_shuffle(W, n, seed);
                if (kind == 2) perm = adjacent_swaps(W, n, seed);
                auto source = [&](int64_t t) {
                    return base + (perm.empty() ? t : perm[static_cast<size_t>(t)]);
                };
                detail::fill_masked_window(stream, vocab, T, source, options.seed,
                                           options.mask_prob, ids.data() + b * T,
                                           labels.data() + b * T);
            }
            auto opts = torch::TensorOptions().dtype(torch::kLong);
            auto input = torch::tensor(ids, opts).view({B, T}).to(device);
            auto target = torch::tensor(labels, opts).view({B, T}).to(device);
            if (target.ne(-100).sum().item<int64_t>() == 0) continue;
            engine::MlmOutput out = model->forward(input, {}, target);
            total.sum +=
                out.loss.to(torch::kDouble).item<double>() * static_cast<double>(out.num_masked);
            total.count += out.num_masked;
        }
        return total;
    };

    OrderProbeReport report;
    report.length = T;
    report.windows = nwin;
    const LossSum original = run(0, 0, 0);
    if (original.count == 0)
        throw engine::InputError(options.source,
                                 "no masked token in the order probe's windows (mask_prob " +
                                     std::to_string(options.mask_prob) + ")");
    report.masked = original.count;
    report.loss = original.sum / static_cast<double>(original.count);
    uint64_t row = 1;
    auto add = [&](const char* kind, int k, int64_t n) {
        const LossSum s = run(k, n, row++);
        OrderProbeRow r;
        r.kind = kind;
        r.n = n;
        r.loss = s.sum / static_cast<double>(s.count);
        r.change = r.loss - report.loss;
        report.rows.push_back(r);
    };
    for (int64_t n : options.ngrams) add("ngram_shuffle", 1, n);
    for (int64_t k : options.swaps) add("adjacent_swaps", 2, k);
    return report;
}

}  // namespace analysis
