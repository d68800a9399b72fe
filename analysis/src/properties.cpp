// Properties of the positional part of attention (properties.h): the map properties in float64
// on CPU copies, and the probe that measures them on a model, Delta_pos included.
#include "analysis/properties.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "analysis/metrics.h"
#include "engine/errors.h"
#include "engine/eval_mode.h"
#include "engine/position.h"
#include "tensor_util.h"

namespace analysis {

using detail::cpu_dbl;
using detail::require;
using detail::shape_of;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

torch::Tensor square_map(const torch::Tensor& phi, const char* what) {
    require(phi.defined() && phi.dim() == 2 && phi.size(0) == phi.size(1) && phi.size(0) >= 1,
            std::string(what) + ": expected a square (n, n) map, got " + shape_of(phi));
    return cpu_dbl(phi).contiguous();
}

// NaN when either side has no variance (relative to its mean).
double pearson_or_nan(const std::vector<double>& a, const std::vector<double>& b) {
    const size_t n = a.size();
    if (n < 2) return kNan;
    const double ma = std::accumulate(a.begin(), a.end(), 0.0) / static_cast<double>(n);
    const double mb = std::accumulate(b.begin(), b.end(), 0.0) / static_cast<double>(n);
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; ++i) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    // Relative tolerance: a map equal up to float error on one side has no variance.
    const double scale = std::max({1e-300, ma * ma, mb * mb});
    if (saa <= 1e-24 * scale * static_cast<double>(n) ||
        sbb <= 1e-24 * scale * static_cast<double>(n))
        return kNan;
    return sab / std::sqrt(saa * sbb);
}

// Spearman's rho of (x, y) (analysis::spearman); 0 when y is constant (a flat row prefers
// nothing) and NaN when a value is not finite (nan_mean leaves the row out).
double spearman_or_zero(const std::vector<double>& x, const std::vector<double>& y) {
    const auto finite = [](double v) { return std::isfinite(v); };
    if (!std::all_of(x.begin(), x.end(), finite) || !std::all_of(y.begin(), y.end(), finite))
        return kNan;
    return analysis::spearman(x, y);
}

double nan_mean(const std::vector<double>& v) {
    double s = 0;
    int64_t n = 0;
    for (double x : v)
        if (!std::isnan(x)) s += x, ++n;
    return n ? s / static_cast<double>(n) : kNan;
}

// Sum over rows of the population variance across the last dimension: (..., n, n) -> scalar.
double row_variance_sum(const torch::Tensor& t) {
    auto x = cpu_dbl(t);
    auto centred = x - x.mean(-1, /*keepdim=*/true);
    return centred.pow(2).mean(-1).sum().item<double>();
}

// Drops [CLS]'s row and column: (..., T, T) -> (..., T-1, T-1).
torch::Tensor without_cls(const torch::Tensor& t) { return t.slice(-2, 1).slice(-1, 1); }

// Restores the constant-positions switch, also when a pass throws.
class ConstantPositions {
  public:
    explicit ConstantPositions(engine::PositionEncodingImpl& position)
        : position_(position), saved_(position.constant_positions()) {
        position_.set_constant_positions(true);
    }
    ~ConstantPositions() { position_.set_constant_positions(saved_); }
    ConstantPositions(const ConstantPositions&) = delete;
    ConstantPositions& operator=(const ConstantPositions&) = delete;

  private:
    engine::PositionEncodingImpl& position_;
    bool saved_;
};

// Rows 1..T-1 of a table (T, C): their cosine similarity, (T-1, T-1).
torch::Tensor cosine_similarity_rows(const torch::Tensor& table) {
    auto t = cpu_dbl(table).slice(0, 1);
    auto n = t / t.norm(2, -1, /*keepdim=*/true).clamp_min(1e-300);
    return torch::mm(n, n.t());
}

}  // namespace

// ---- map properties -----------------------------------------------------------------------------

torch::Tensor toeplitz_fit(const torch::Tensor& phi) {
    auto p = square_map(phi, "toeplitz_fit");
    const int64_t n = p.size(0);
    auto idx = torch::arange(n, torch::kLong);
    auto diag = (idx.view({1, n}) - idx.view({n, 1}) + (n - 1)).reshape({-1});  // j - i + n - 1
    auto sums = torch::zeros({2 * n - 1}, torch::kDouble).index_add_(0, diag, p.reshape({-1}));
    auto counts = torch::zeros({2 * n - 1}, torch::kDouble)
                      .index_add_(0, diag, torch::ones({n * n}, torch::kDouble));
    return (sums / counts).index_select(0, diag).view({n, n});
}

double translation_invariance(const torch::Tensor& phi) {
    auto p = square_map(phi, "translation_invariance");
    const double total = (p - p.mean()).pow(2).sum().item<double>();
    const double scale = std::max(1e-300, p.pow(2).sum().item<double>());
    if (total <= 1e-24 * scale) return kNan;
    const double residual = (p - toeplitz_fit(p)).pow(2).sum().item<double>();
    return 1.0 - residual / total;
}

Monotonicity monotonicity(const torch::Tensor& phi, int64_t window) {
    require(window >= 1, "monotonicity: window must be >= 1, got " + std::to_string(window));
    auto p = square_map(phi, "monotonicity");
    const int64_t n = p.size(0);
    auto a = p.accessor<double, 2>();
    std::vector<double> left, right;
    for (int64_t i = 0; i < n; ++i) {
        for (int side = -1; side <= 1; side += 2) {
            std::vector<double> x, y;
            for (int64_t k = 1; k <= window; ++k) {
                const int64_t j = i + side * k;
                if (j < 0 || j >= n) break;
                x.push_back(-static_cast<double>(k));
                y.push_back(a[i][j]);
            }
            if (x.size() < 3) continue;
            (side < 0 ? left : right).push_back(spearman_or_zero(x, y));
        }
    }
    return {nan_mean(left), nan_mean(right)};
}

double mirror_symmetry(const torch::Tensor& phi) {
    auto p = square_map(phi, "mirror_symmetry");
    const int64_t n = p.size(0);
    auto a = p.accessor<double, 2>();
    std::vector<double> forward, backward;
    for (int64_t k = 1; 2 * k < n; ++k)
        for (int64_t i = k; i + k < n; ++i) {
            forward.push_back(a[i][i + k]);
            backward.push_back(a[i][i - k]);
        }
    return pearson_or_nan(forward, backward);
}

double locality(const torch::Tensor& probs) {
    auto p = square_map(probs, "locality");
    const int64_t n = p.size(0);
    auto idx = torch::arange(n, torch::kDouble);
    auto weight = torch::pow(2.0, -(idx.view({n, 1}) - idx.view({1, n})).abs());
    return (p * weight).sum(-1).mean().item<double>();
}

torch::Tensor toeplitz_spectrum(const torch::Tensor& phi) {
    auto p = square_map(phi, "toeplitz_spectrum");
    auto fit = toeplitz_fit(p);
    return torch::stack(
        {torch::linalg_svdvals(p), torch::linalg_svdvals(fit), torch::linalg_svdvals(p - fit)});
}

int64_t energy_rank(const torch::Tensor& singular_values, double share) {
    auto s = cpu_dbl(singular_values).reshape({-1}).pow(2);
    const double total = s.sum().item<double>();
    if (total <= 0) return 0;
    auto cum = s.cumsum(0) / total;
    auto a = cum.accessor<double, 1>();
    for (int64_t k = 0; k < cum.size(0); ++k)
        if (a[k] >= share - 1e-12) return k + 1;
    return cum.size(0);
}

double toeplitz_residual(const torch::Tensor& phi) {
    auto p = square_map(phi, "toeplitz_residual");
    const double norm = p.norm().item<double>();
    if (norm <= 0) return kNan;
    return (p - toeplitz_fit(p)).norm().item<double>() / norm;
}

double variance_share(const torch::Tensor& positional, const torch::Tensor& total) {
    require(positional.defined() && total.defined() && positional.dim() >= 2 &&
                positional.sizes() == total.sizes(),
            "variance_share: positional " + shape_of(positional) + " and total " + shape_of(total) +
                " must have one shape");
    const double denominator = row_variance_sum(total);
    // Relative to the map's size: rows constant up to rounding have no variance.
    const double size = cpu_dbl(total).pow(2).mean(-1).sum().item<double>();
    if (denominator <= 1e-24 * std::max(size, 1e-300)) return kNan;
    return row_variance_sum(positional) / denominator;
}

namespace {

// The field of `p` named `name` (HeadProperties or const HeadProperties).
template <class Properties>
auto* property_field(Properties& p, const std::string& name) {
    if (name == "positional_share") return &p.positional_share;
    if (name == "static_share") return &p.static_share;
    if (name == "monotonicity_left") return &p.monotonicity_left;
    if (name == "monotonicity_right") return &p.monotonicity_right;
    if (name == "translation_invariance") return &p.translation_invariance;
    if (name == "symmetry") return &p.symmetry;
    if (name == "rank90") return &p.rank90;
    if (name == "toeplitz_residual") return &p.toeplitz_residual;
    if (name == "locality") return &p.locality;
    if (name == "attention_symmetry") return &p.attention_symmetry;
    if (name == "mean_distance") return &p.mean_distance;
    if (name == "entropy") return &p.entropy;
    throw std::invalid_argument("unknown property '" + name + "'");
}

HeadProperties mean_of_heads(const std::vector<HeadProperties>& heads) {
    HeadProperties m;
    for (const auto& name : property_names()) {
        std::vector<double> v;
        for (const auto& h : heads) v.push_back(property_value(h, name));
        *property_field(m, name) = nan_mean(v);
    }
    return m;
}

}  // namespace

double property_value(const HeadProperties& p, const std::string& name) {
    return *property_field(p, name);
}

std::vector<std::pair<std::string, double>> PropertiesReport::overall() const {
    std::vector<std::pair<std::string, double>> out;
    for (const auto& name : property_names()) {
        std::vector<double> v;
        for (const auto& layer : layers)
            for (const auto& h : layer.heads) v.push_back(property_value(h, name));
        out.emplace_back(name, nan_mean(v));
    }
    return out;
}

// ---- the probe
// -----------------------------------------------------------------------------------

std::vector<int64_t> sentences_stream(const std::vector<std::string>& sentences,
                                      const engine::WordPieceTokenizer& tokenizer,
                                      int64_t max_tokens) {
    std::vector<int64_t> out;
    for (const auto& s : sentences) {
        for (int64_t id : tokenizer.token_ids(s)) {
            if (max_tokens > 0 && static_cast<int64_t>(out.size()) >= max_tokens) return out;
            out.push_back(id);
        }
    }
    return out;
}

namespace {

// Throws when the options, the vocabulary or the token stream do not suit a probe with
// windows of T tokens.
void check_probe_input(const engine::ModelConfig& config, const std::vector<int64_t>& stream,
                       const engine::Vocab& vocab, const PropertiesOptions& options, int64_t T) {
    const int64_t W = T - 2;
    require(T >= 4, "properties: length must be >= 4 tokens, got " + std::to_string(T));
    require(options.windows >= 1, "properties: windows must be >= 1");
    require(options.batch_size >= 1, "properties: batch_size must be >= 1");
    require(options.window >= 1, "properties: the monotonicity window must be >= 1");
    require(vocab.size() <= config.vocab_size,
            "properties: vocabulary of " + std::to_string(vocab.size()) +
                " tokens for a model of " + std::to_string(config.vocab_size));
    const int64_t S = static_cast<int64_t>(stream.size());
    if (S < W)
        throw engine::InputError(
            options.source, "holds " + std::to_string(S) +
                                " tokens; the properties probe needs at least T - 2 = " +
                                std::to_string(W) + " for one window of T = " + std::to_string(T));
    for (int64_t id : stream)
        if (id < 0 || id >= config.vocab_size)
            throw engine::InputError(options.source,
                                     "token id " + std::to_string(id) + " outside the vocabulary");
}

// The static positional logit of each layer at the true positions (H, T-1, T-1), undefined
// where a layer has none; its source (and a table's row similarity) go into `report`.
std::vector<torch::Tensor> static_positional_logits(engine::PositionEncodingImpl& position,
                                                    const engine::ModelConfig& config, int64_t T,
                                                    PropertiesReport& report) {
    const int64_t L = config.num_hidden_layers, H = config.num_attention_heads;
    std::vector<torch::Tensor> statics(static_cast<size_t>(L));
    auto terms = position.forward(T);
    for (int64_t l = 0; l < L; ++l) {
        const engine::LayerPosition& lp = terms.for_layer(static_cast<size_t>(l));
        torch::Tensor phi;
        if (lp.q_offset.defined()) {
            const int64_t d = config.head_dim();
            auto q = cpu_dbl(lp.q_offset).view({T, H, d}).transpose(0, 1);
            auto k = cpu_dbl(lp.k_offset).view({T, H, d}).transpose(0, 1);
            phi = torch::bmm(q, k.transpose(1, 2)) * lp.scaling;
            report.static_source = "decoupled";
        }
        if (lp.bias.defined()) {
            auto b = cpu_dbl(lp.bias);
            phi = phi.defined() ? phi + b : b;
            if (report.static_source.empty()) report.static_source = "bias";
        }
        if (phi.defined()) statics[static_cast<size_t>(l)] = without_cls(phi);
    }
    if (report.static_source.empty() && terms.input.defined()) {
        report.static_source = "table";
        report.table_similarity = cosine_similarity_rows(terms.input).to(torch::kFloat);
    }
    return statics;
}

// The probe's sums over its windows, per layer (and head).
struct ProbeSums {
    int64_t L, H;
    std::vector<torch::Tensor> delta_sum, probs_sum;  // (H, T-1, T-1), (H, T, T)
    std::vector<std::vector<double>> var_delta, var_total, var_static, distance, entropy;

    ProbeSums(int64_t layers, int64_t heads, int64_t T)
        : L(layers),
          H(heads),
          delta_sum(L),
          probs_sum(L),
          var_delta(L, std::vector<double>(H, 0.0)),
          var_total(L, std::vector<double>(H, 0.0)),
          var_static(L, std::vector<double>(H, 0.0)),
          distance(L, std::vector<double>(H, 0.0)),
          entropy(L, std::vector<double>(H, 0.0)) {
        for (int64_t l = 0; l < L; ++l) {
            delta_sum[l] = torch::zeros({H, T - 1, T - 1}, torch::kDouble);
            probs_sum[l] = torch::zeros({H, T, T}, torch::kDouble);
        }
    }
};

// Token ids (B, T) of the stream's windows first .. first + B - 1: [CLS], T - 2 tokens, [SEP].
torch::Tensor probe_window_ids(const std::vector<int64_t>& stream, const engine::Vocab& vocab,
                               int64_t first, int64_t B, int64_t T) {
    const int64_t W = T - 2;
    auto ids = torch::empty({B, T}, torch::kLong);
    auto a = ids.accessor<int64_t, 2>();
    for (int64_t b = 0; b < B; ++b) {
        a[b][0] = vocab.cls_id();
        a[b][T - 1] = vocab.sep_id();
        for (int64_t t = 0; t < W; ++t) a[b][t + 1] = stream[(first + b) * W + t];
    }
    return ids;
}

// Adds a batch of B windows to `sums`: the logits with true (`truth`) and constant (`flat`)
// positions, and the attention.
void accumulate_probe_batch(ProbeSums& sums, const engine::EncoderOutput& truth,
                            const engine::EncoderOutput& flat,
                            const std::vector<torch::Tensor>& statics, int64_t B,
                            const PropertiesOptions& options) {
    for (int64_t l = 0; l < sums.L; ++l) {
        auto logits = without_cls(cpu_dbl(truth.attention_logits[l]));  // (B, H, T-1, T-1)
        auto delta = logits - without_cls(cpu_dbl(flat.attention_logits[l]));
        auto probs = cpu_dbl(truth.attention_probs[l]);  // (B, H, T, T)
        sums.delta_sum[l] += delta.sum(0);
        sums.probs_sum[l] += probs.sum(0);
        for (int64_t h = 0; h < sums.H; ++h) {
            sums.var_delta[l][h] += row_variance_sum(delta.select(1, h));
            sums.var_total[l][h] += row_variance_sum(logits.select(1, h));
            if (statics[l].defined())
                sums.var_static[l][h] += static_cast<double>(B) * row_variance_sum(statics[l][h]);
            for (int64_t b = 0; b < B; ++b) {
                const HeadStatistics s = head_statistics(probs[b][h], options.thresholds.skip_cls);
                sums.distance[l][h] += s.mean_distance;
                sums.entropy[l][h] += s.entropy;
            }
        }
    }
}

// Layer l's properties from the sums over n windows; `static_logit` is its static positional
// logit (or undefined).
LayerProperties probe_layer_properties(const ProbeSums& sums, int64_t l,
                                       const torch::Tensor& static_logit, double n,
                                       const PropertiesOptions& options) {
    LayerProperties layer;
    auto delta = sums.delta_sum[l] / n;  // (H, T-1, T-1)
    auto probs = sums.probs_sum[l] / n;  // (H, T, T)
    auto inner = without_cls(probs);
    inner = inner / inner.sum(-1, /*keepdim=*/true).clamp_min(1e-300);
    const auto& var_total = sums.var_total[l];
    std::vector<torch::Tensor> spectra;
    for (int64_t h = 0; h < sums.H; ++h) {
        HeadProperties p;
        const auto d = delta[h];
        p.positional_share = var_total[h] > 0 ? sums.var_delta[l][h] / var_total[h] : kNan;
        p.static_share = static_logit.defined() && var_total[h] > 0
                             ? sums.var_static[l][h] / var_total[h]
                             : kNan;
        const Monotonicity m = monotonicity(d, options.window);
        p.monotonicity_left = m.left;
        p.monotonicity_right = m.right;
        p.translation_invariance = translation_invariance(d);
        p.symmetry = mirror_symmetry(d);
        auto spectrum = toeplitz_spectrum(d);
        spectra.push_back(spectrum);
        p.rank90 = static_cast<double>(energy_rank(spectrum[0]));
        p.toeplitz_residual = toeplitz_residual(d);
        p.locality = locality(inner[h]);
        p.attention_symmetry = mirror_symmetry(inner[h]);
        p.mean_distance = sums.distance[l][h] / n;
        p.entropy = sums.entropy[l][h] / n;
        p.pattern = classify_head(probs[h], options.thresholds);
        layer.heads.push_back(p);
    }
    layer.mean = mean_of_heads(layer.heads);
    layer.delta = delta.to(torch::kFloat);
    if (static_logit.defined()) layer.static_term = static_logit.to(torch::kFloat);
    layer.spectrum = torch::stack(spectra).to(torch::kFloat);  // (H, 3, T-1)
    return layer;
}

}  // namespace

PropertiesReport measure_properties(engine::BertForMaskedLM& model,
                                    const std::vector<int64_t>& stream, const engine::Vocab& vocab,
                                    const PropertiesOptions& options) {
    const engine::ModelConfig& config = model->bert->config();
    const int64_t T = options.length > 0 ? options.length
                                         : std::min<int64_t>(128, config.max_position_embeddings);
    const int64_t W = T - 2;
    check_probe_input(config, stream, vocab, options, T);
    const int64_t S = static_cast<int64_t>(stream.size());

    engine::PositionEncodingImpl& position = *model->bert->position;
    const engine::PositionDescription& description = position.description();
    const int64_t L = config.num_hidden_layers, H = config.num_attention_heads;
    const int64_t nwin = std::min(options.windows, S / W);

    engine::EvalModeGuard eval(*model);
    torch::NoGradGuard no_grad;
    const auto device = model->bert->embeddings->word_embeddings->weight.device();

    PropertiesReport report;
    report.summary = description.summary;
    report.length = T;
    report.windows = nwin;
    report.window = options.window;
    const std::vector<torch::Tensor> statics =
        static_positional_logits(position, config, T, report);

    ProbeSums sums(L, H, T);
    for (int64_t first = 0; first < nwin; first += options.batch_size) {
        const int64_t B = std::min(options.batch_size, nwin - first);
        const auto ids = probe_window_ids(stream, vocab, first, B, T).to(device);
        auto mask = torch::ones({B, T}, torch::TensorOptions().dtype(torch::kLong).device(device));
        engine::EncoderOutput truth = model->bert->forward(ids, mask, {}, true);
        engine::EncoderOutput flat;
        {
            ConstantPositions constant(position);
            flat = model->bert->forward(ids, mask, {}, true);
        }
        accumulate_probe_batch(sums, truth, flat, statics, B, options);
    }

    const double n = static_cast<double>(nwin);
    for (int64_t l = 0; l < L; ++l)
        report.layers.push_back(probe_layer_properties(sums, l, statics[l], n, options));
    return report;
}

}  // namespace analysis
