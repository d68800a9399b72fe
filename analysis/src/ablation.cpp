// Causal positional ablation (ablation.h): per head, the masked-token loss with that head's
// positional contribution removed, against the loss with nothing removed, on the same tokens.
#include "analysis/ablation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

#include "analysis/evidence.h"
#include "analysis/extrapolate.h"
#include "analysis/metrics.h"
#include "analysis/properties.h"
#include "engine/errors.h"
#include "engine/eval_mode.h"
#include "tensor_util.h"

namespace analysis {

using detail::check_probe_stream;
using detail::require;

namespace {

constexpr double kAblationNan = std::numeric_limits<double>::quiet_NaN();

// Restores the model's ablation switch when the probe ends, also on a throw.
class AblationGuard {
  public:
    explicit AblationGuard(engine::PositionEncodingImpl& position)
        : position_(position), saved_(position.ablation()) {}
    ~AblationGuard() {
        position_.set_ablation(saved_);
        if (saved_.mode != engine::PositionAblation::Mode::kPatch)
            position_.set_patch_source(nullptr);
    }
    AblationGuard(const AblationGuard&) = delete;
    AblationGuard& operator=(const AblationGuard&) = delete;

  private:
    engine::PositionEncodingImpl& position_;
    engine::PositionAblation saved_;
};

// The windows of the probe: (T) ids with [CLS] and [SEP], labels -100 except at masked tokens.
struct Windows {
    std::vector<std::vector<int64_t>> ids, labels;
};

Windows cut_windows(const std::vector<int64_t>& stream, const engine::Vocab& vocab, int64_t T,
                    int64_t count, const AblationOptions& options) {
    const int64_t W = T - 2;
    Windows out;
    for (int64_t w = 0; w < count; ++w) {
        std::vector<int64_t> ids(static_cast<size_t>(T)), labels(ids.size());
        detail::fill_masked_window(
            stream, vocab, T, [&](int64_t t) { return w * W + t; }, options.seed, options.mask_prob,
            ids.data(), labels.data());
        out.ids.push_back(std::move(ids));
        out.labels.push_back(std::move(labels));
    }
    return out;
}

// Per window: the sum of the masked tokens' cross-entropies (nats) under the model as it is
// now set, in float64.
std::vector<double> window_loss_sums(engine::BertForMaskedLM& model, const Windows& windows,
                                     int64_t batch_size, const torch::Device& device) {
    const auto n = static_cast<int64_t>(windows.ids.size());
    const auto T = static_cast<int64_t>(windows.ids.front().size());
    std::vector<double> sums(static_cast<size_t>(n), 0.0);
    for (int64_t first = 0; first < n; first += batch_size) {
        const int64_t B = std::min(batch_size, n - first);
        std::vector<int64_t> ids, labels;
        for (int64_t b = 0; b < B; ++b) {
            const auto& wi = windows.ids[static_cast<size_t>(first + b)];
            const auto& wl = windows.labels[static_cast<size_t>(first + b)];
            ids.insert(ids.end(), wi.begin(), wi.end());
            labels.insert(labels.end(), wl.begin(), wl.end());
        }
        auto opts = torch::TensorOptions().dtype(torch::kLong);
        auto input = torch::tensor(ids, opts).view({B, T});
        auto target = torch::tensor(labels, opts).view({B, T});
        auto masked = target.ne(-100);
        if (masked.sum().item<int64_t>() == 0) continue;
        engine::MlmOutput out = model->forward(input.to(device), {}, target.to(device));
        // The logits are the masked positions' in row-major order: row b for each of them.
        auto rows = masked.nonzero().select(1, 0);  // (M)
        auto ce = torch::nn::functional::cross_entropy(
            out.logits.to(torch::kCPU, torch::kDouble), target.masked_select(masked),
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
        auto per_window = torch::zeros({B}, torch::kDouble).index_add_(0, rows, ce);
        auto acc = per_window.accessor<double, 1>();
        for (int64_t b = 0; b < B; ++b) sums[static_cast<size_t>(first + b)] = acc[b];
    }
    return sums;
}

// What the scheme's terms hold, in words, from one forward of the positional module.
struct Slots {
    bool input = false, heads = false;
    std::string names;
};

Slots positional_slots(engine::BertForMaskedLM& model, int64_t T) {
    engine::PositionTerms terms = model->bert->position->forward(T);
    Slots s;
    s.input = terms.input.defined();
    std::vector<std::string> names;
    auto add = [&](bool present, const char* name) {
        if (present && std::find(names.begin(), names.end(), name) == names.end())
            names.push_back(name);
    };
    for (const auto& lp : terms.layers) {
        add(lp.q_offset.defined(), "q/k offsets");
        add(lp.rope_dims > 0, "rotation");
        for (const auto& term : lp.content) add(true, term->slot_name());
        add(lp.bias.defined(), "static bias");
    }
    s.heads = !names.empty();
    for (const auto& n : names) s.names += (s.names.empty() ? "" : ", ") + n;
    return s;
}

// Spearman's correlation of the pairs without a NaN; NaN for fewer than 3 or no spread.
double share_use_spearman(const std::vector<double>& x, const std::vector<double>& y) {
    std::vector<double> a, b;
    for (size_t i = 0; i < x.size(); ++i)
        if (std::isfinite(x[i]) && std::isfinite(y[i])) a.push_back(x[i]), b.push_back(y[i]);
    const auto spread = [](const std::vector<double>& v) {
        return !v.empty() &&
               *std::max_element(v.begin(), v.end()) > *std::min_element(v.begin(), v.end());
    };
    if (a.size() < 3 || !spread(a) || !spread(b)) return kAblationNan;
    return spearman(a, b);
}

}  // namespace

AblationReport positional_ablation(engine::BertForMaskedLM& model,
                                   const std::vector<int64_t>& stream, const engine::Vocab& vocab,
                                   const AblationOptions& options) {
    const engine::ModelConfig& config = model->bert->config();
    const int64_t T = options.length > 0 ? options.length
                                         : std::min<int64_t>(128, config.max_position_embeddings);
    require(T >= 4, "ablation: length must be >= 4 tokens, got " + std::to_string(T));
    require(options.windows >= 1 && options.batch_size >= 1,
            "ablation: windows and batch_size must be >= 1");
    require(options.resamples >= 100, "ablation: resamples must be >= 100");
    require(options.mask_prob > 0 && options.mask_prob <= 1, "ablation: mask_prob in (0, 1]");
    require(vocab.size() <= config.vocab_size, "ablation: the vocabulary does not fit the model");
    const int64_t W = T - 2;
    check_probe_stream(stream, W, config.vocab_size, options.source, "the ablation");
    const auto S = static_cast<int64_t>(stream.size());
    const int64_t nwin = std::min(options.windows, S / W);
    const Windows windows = cut_windows(stream, vocab, T, nwin, options);
    std::vector<double> counts(static_cast<size_t>(nwin), 0.0);
    double masked = 0;
    for (int64_t w = 0; w < nwin; ++w) {
        for (int64_t l : windows.labels[static_cast<size_t>(w)])
            counts[static_cast<size_t>(w)] += l != -100;
        masked += counts[static_cast<size_t>(w)];
    }
    if (masked == 0)
        throw engine::InputError(options.source, "no masked token in the ablation's windows");

    engine::PositionEncodingImpl& position = *model->bert->position;
    AblationGuard restore(position);
    engine::EvalModeGuard eval(*model);
    torch::NoGradGuard no_grad;
    const auto device = model->bert->embeddings->word_embeddings->weight.device();
    position.set_ablation({});
    if (options.mode == engine::PositionAblation::Mode::kPatch) {
        require(options.patch_source != nullptr, "ablation: mode patch needs a patch_source");
        position.set_patch_source(options.patch_source);
    }

    AblationReport report;
    report.summary = position.description().summary;
    report.mode = engine::ablation_mode_name(options.mode);
    report.length = T;
    report.windows = nwin;
    report.masked = static_cast<int64_t>(masked);
    const Slots slots = positional_slots(model, T);
    if (slots.heads && slots.input)
        report.scope = "per head: " + slots.names +
                       "; the input table only in the whole-model row (it enters before any head)";
    else if (slots.heads)
        report.scope = "per head: " + slots.names;
    else if (slots.input)
        report.scope = "input table: whole model only (positions enter before any head)";
    else
        report.scope = "no positional terms: every change is 0";

    const std::vector<double> base = window_loss_sums(model, windows, options.batch_size, device);
    report.loss = std::accumulate(base.begin(), base.end(), 0.0) / masked;

    // The same window resamples for every row, so rows are compared on the same draws.
    std::mt19937_64 rng(options.seed * 0x9E3779B97F4A7C15ULL + 17);
    std::uniform_int_distribution<int64_t> pick(0, nwin - 1);
    std::vector<std::vector<int64_t>> draws(static_cast<size_t>(options.resamples));
    for (auto& d : draws) {
        d.resize(static_cast<size_t>(nwin));
        for (auto& i : d) i = pick(rng);
    }

    auto run = [&](int64_t layer, int64_t head) {
        engine::PositionAblation a;
        a.mode = options.mode;
        a.layer = layer;
        a.head = head;
        a.seed = options.seed;
        position.set_ablation(a);
        const std::vector<double> sums =
            window_loss_sums(model, windows, options.batch_size, device);
        position.set_ablation({});
        AblationRow row;
        row.layer = layer;
        row.head = head;
        row.loss = std::accumulate(sums.begin(), sums.end(), 0.0) / masked;
        row.delta_loss = row.loss - report.loss;
        std::vector<double> reps;
        reps.reserve(draws.size());
        for (const auto& d : draws) {
            double diff = 0, n = 0;
            for (int64_t i : d) {
                diff += sums[static_cast<size_t>(i)] - base[static_cast<size_t>(i)];
                n += counts[static_cast<size_t>(i)];
            }
            reps.push_back(n > 0 ? diff / n : 0.0);
        }
        const Interval ci = percentile_interval(reps);
        row.ci_lo = ci.lo;
        row.ci_hi = ci.hi;
        row.positional_share = kAblationNan;
        return row;
    };

    const bool per_head = slots.heads || !slots.input;
    if (per_head)
        for (int64_t l = 0; l < config.num_hidden_layers; ++l)
            for (int64_t h = 0; h < config.num_attention_heads; ++h)
                report.rows.push_back(run(l, h));
    report.rows.push_back(run(-1, -1));

    report.share_use_spearman = kAblationNan;
    if (options.with_share && per_head) {
        PropertiesOptions po;
        po.length = T;
        po.windows = nwin;
        po.batch_size = options.batch_size;
        po.source = options.source;
        const PropertiesReport props = measure_properties(model, stream, vocab, po);
        std::vector<double> share, use;
        for (auto& row : report.rows) {
            if (row.layer < 0) continue;
            row.positional_share = props.layers.at(static_cast<size_t>(row.layer))
                                       .heads.at(static_cast<size_t>(row.head))
                                       .positional_share;
            share.push_back(row.positional_share);
            use.push_back(row.delta_loss);
        }
        report.share_use_spearman = share_use_spearman(share, use);
    }
    return report;
}

}  // namespace analysis
