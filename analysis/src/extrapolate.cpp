// Length extrapolation and position shift (extrapolate.h): one stream, one masked set, windows
// of every length over the same span, losses split at the training length.
#include "analysis/extrapolate.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/errors.h"
#include "engine/eval_mode.h"

namespace analysis {

namespace F = torch::nn::functional;

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

std::string format_number(double x) {
    std::ostringstream os;
    os << x;
    return os.str();
}

// Restores the position offset when a row ends, also when its forward pass throws: a model
// left shifted would silently shift every later use of it.
class OffsetGuard {
  public:
    explicit OffsetGuard(engine::PositionEncodingImpl& position)
        : position_(position), saved_(position.position_offset()) {}
    ~OffsetGuard() { position_.set_position_offset(saved_); }
    OffsetGuard(const OffsetGuard&) = delete;
    OffsetGuard& operator=(const OffsetGuard&) = delete;

  private:
    engine::PositionEncodingImpl& position_;
    int64_t saved_;
};

// Puts the RoPE scaling back (to none) when the scaled rows end, also when one throws.
class RopeScalingGuard {
  public:
    explicit RopeScalingGuard(engine::PositionEncodingImpl& position)
        : position_(position), saved_(position.rope_scaling()) {}
    ~RopeScalingGuard() { position_.set_rope_scaling(saved_); }
    RopeScalingGuard(const RopeScalingGuard&) = delete;
    RopeScalingGuard& operator=(const RopeScalingGuard&) = delete;

  private:
    engine::PositionEncodingImpl& position_;
    engine::RopeScaling saved_;
};

// A window of W stream tokens from `start`, scoring only the masked tokens at index >= `first`.
struct Window {
    int64_t start, first;
};

// Non-overlapping windows of W tokens tiling [0, S); the tail the last full window leaves is
// covered by one more window aligned to the span's end, which scores only the tail. So every
// window has the length under test and every token of the span is scored exactly once, at any
// length: the masked set is the same, the tail's tokens merely see context scored before.
std::vector<Window> tile(int64_t S, int64_t W) {
    std::vector<Window> out;
    int64_t s = 0;
    for (; s + W <= S; s += W) out.push_back({s, s});
    if (s < S && S >= W) out.push_back({S - W, s});
    return out;
}

// Adds each window's per-head mean distance and entropy (summed over windows; run_row divides
// by the window count). probs: per layer (B, H, T, T).
void add_drift(const std::vector<torch::Tensor>& probs, ExtrapolationRow& row) {
    if (probs.empty()) return;
    const int64_t H = probs[0].size(1), T = probs[0].size(-1);
    if (row.distance.empty()) {
        row.heads = H;
        row.distance.assign(probs.size() * static_cast<size_t>(H), 0.0);
        row.entropy.assign(row.distance.size(), 0.0);
    }
    auto idx = torch::arange(T, torch::kDouble);
    auto dist = (idx.view({T, 1}) - idx.view({1, T})).abs();
    for (size_t l = 0; l < probs.size(); ++l) {
        auto p = probs[l].detach().to(torch::kCPU, torch::kDouble);  // (B, H, T, T)
        auto d = (p * dist).sum(-1).mean(-1).sum(0);                 // (H): sum over windows
        auto e = (-torch::xlogy(p, p).sum(-1)).mean(-1).sum(0);
        for (int64_t h = 0; h < H; ++h) {
            row.distance[l * static_cast<size_t>(H) + static_cast<size_t>(h)] +=
                d[h].item<double>();
            row.entropy[l * static_cast<size_t>(H) + static_cast<size_t>(h)] += e[h].item<double>();
        }
    }
}

// What a row needs besides its length and offset.
struct RowContext {
    engine::BertForMaskedLM* model;
    const std::vector<int64_t>* stream;
    const std::vector<uint8_t>* masked;
    const engine::Vocab* vocab;
    int64_t span, train_length, batch_tokens;
    torch::Device device;
};

// The masked-token losses of the span cut into windows of `length` tokens at the module's
// current position offset.
void run_row(const RowContext& c, ExtrapolationRow& row) {
    const int64_t Le = row.length, W = Le - 2, L = c.train_length;
    const auto windows = tile(c.span, W);
    row.windows = static_cast<int64_t>(windows.size());
    const int64_t per_batch = std::max<int64_t>(1, c.batch_tokens / Le);
    const auto& stream = *c.stream;
    const auto& masked = *c.masked;
    double sum = 0, sum_within = 0, sum_beyond = 0;
    int64_t drift_windows = 0;  // windows whose attention went into distance and entropy
    for (size_t b0 = 0; b0 < windows.size(); b0 += static_cast<size_t>(per_batch)) {
        const size_t b1 = std::min(windows.size(), b0 + static_cast<size_t>(per_batch));
        const auto B = static_cast<int64_t>(b1 - b0);
        std::vector<int64_t> ids(static_cast<size_t>(B * Le)), labels(ids.size(), -100);
        std::vector<int64_t> scored_positions;  // window position of each target, in flat order
        for (int64_t b = 0; b < B; ++b) {
            const Window& w = windows[b0 + static_cast<size_t>(b)];
            int64_t* row_ids = ids.data() + b * Le;
            int64_t* row_labels = labels.data() + b * Le;
            row_ids[0] = c.vocab->cls_id();
            row_ids[Le - 1] = c.vocab->sep_id();
            for (int64_t j = 0; j < W; ++j) {
                const int64_t i = w.start + j;
                const bool m = masked[static_cast<size_t>(i)] != 0;
                row_ids[j + 1] = m ? c.vocab->mask_id() : stream[static_cast<size_t>(i)];
                if (m && i >= w.first) {
                    row_labels[j + 1] = stream[static_cast<size_t>(i)];
                    scored_positions.push_back(j + 1);
                }
            }
        }
        if (scored_positions.empty()) continue;
        auto opts = torch::TensorOptions().dtype(torch::kLong);
        auto input = torch::tensor(ids, opts).view({B, Le}).to(c.device);
        auto target_grid = torch::tensor(labels, opts).view({B, Le}).to(c.device);
        // The model's own head picks the masked rows in flat order (labels != -100), the order
        // scored_positions was filled in.
        engine::MlmOutput out = (*c.model)->forward(input, {}, target_grid, false,
                                                    /*output_attentions=*/true);
        add_drift(out.encoder.attention_probs, row);
        drift_windows += B;
        TORCH_CHECK(out.num_masked == static_cast<int64_t>(scored_positions.size()),
                    "extrapolation: the model scored ", out.num_masked, " tokens, expected ",
                    scored_positions.size());
        auto flat = target_grid.reshape({-1});
        auto targets = flat.index_select(0, flat.ne(-100).nonzero().squeeze(1));
        auto logits = out.logits;
        // Reduced-precision logits are upcast for the loss, as BertForMaskedLM's.
        if (logits.scalar_type() != torch::kFloat && logits.scalar_type() != torch::kDouble)
            logits = logits.to(torch::kFloat);
        auto ce =
            F::cross_entropy(logits, targets, F::CrossEntropyFuncOptions().reduction(torch::kNone))
                .to(torch::kCPU, torch::kDouble)
                .contiguous();
        const double* v = ce.data_ptr<double>();
        for (size_t k = 0; k < scored_positions.size(); ++k) {
            sum += v[k];
            if (scored_positions[k] < L) {
                sum_within += v[k];
                ++row.masked_within;
            } else {
                sum_beyond += v[k];
                ++row.masked_beyond;
            }
        }
        row.masked += static_cast<int64_t>(scored_positions.size());
    }
    for (double& v : row.distance) v /= static_cast<double>(std::max<int64_t>(1, drift_windows));
    for (double& v : row.entropy) v /= static_cast<double>(std::max<int64_t>(1, drift_windows));
    auto mean = [](double s, int64_t n) { return n > 0 ? s / static_cast<double>(n) : kNoLoss; };
    row.loss = mean(sum, row.masked);
    row.loss_within = mean(sum_within, row.masked_within);
    row.loss_beyond = mean(sum_beyond, row.masked_beyond);
}

}  // namespace

namespace {
double mean_of(const std::vector<double>& v) {
    if (v.empty()) return kNoLoss;
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
}
}  // namespace

double ExtrapolationRow::mean_distance() const { return mean_of(distance); }
double ExtrapolationRow::mean_entropy() const { return mean_of(entropy); }

std::vector<double> parse_length_factors(const std::string& text) {
    std::vector<double> out;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, ',')) {
        const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
        const std::string v = b == std::string::npos ? "" : item.substr(b, e - b + 1);
        if (v.empty()) throw std::invalid_argument("empty factor in '" + text + "'");
        double f = 0;
        size_t used = 0;
        try {
            f = std::stod(v, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != v.size()) throw std::invalid_argument("'" + v + "' is not a number");
        if (!std::isfinite(f) || f <= 0)
            throw std::invalid_argument("factor " + v + " must be a finite number > 0");
        out.push_back(f);
    }
    // getline drops a trailing separator: "1,2," would otherwise pass as "1,2".
    if (out.empty() || text.back() == ',')
        throw std::invalid_argument("expected factors of the training length, e.g. 1,1.5,2,4");
    return out;
}

int64_t window_length(double factor, int64_t train_length) {
    return static_cast<int64_t>(std::llround(factor * static_cast<double>(train_length)));
}

bool stream_masked(uint64_t seed, uint64_t index, double mask_prob) {
    const uint64_t h = splitmix64(splitmix64(seed ^ 0x5EED5EED5EED5EEDULL) ^ index);
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // uniform in [0, 1)
    return u < mask_prob;
}

std::vector<int64_t> read_token_stream(const std::string& path,
                                       const engine::WordPieceTokenizer& tokenizer,
                                       int64_t max_tokens) {
    if (max_tokens < 1)
        throw std::invalid_argument("max_tokens must be >= 1, got " + std::to_string(max_tokens));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw engine::InputError(path, "cannot open corpus file");
    std::vector<int64_t> stream;
    std::string line;
    long line_no = 0;
    while (static_cast<int64_t>(stream.size()) < max_tokens && std::getline(in, line)) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::vector<int64_t> ids;
        try {
            ids = tokenizer.token_ids(line);
        } catch (const engine::InputError&) {
            throw;
        } catch (const std::exception& e) {
            throw engine::InputError(path, std::string("cannot tokenize: ") + e.what(), line_no);
        }
        stream.insert(stream.end(), ids.begin(), ids.end());
    }
    if (in.bad()) throw engine::InputError(path, "read error", line_no);
    if (stream.empty()) throw engine::InputError(path, "corpus holds no tokens (empty file?)");
    if (static_cast<int64_t>(stream.size()) > max_tokens)
        stream.resize(static_cast<size_t>(max_tokens));
    return stream;
}

ExtrapolationReport evaluate_extrapolation(engine::BertForMaskedLM& model,
                                           const std::vector<int64_t>& stream,
                                           const engine::Vocab& vocab,
                                           const ExtrapolationOptions& o) {
    const int64_t L = o.train_length;
    if (L < 3)
        throw std::invalid_argument("train_length must be >= 3 ([CLS], a token, [SEP]), got " +
                                    std::to_string(L));
    if (o.factors.empty()) throw std::invalid_argument("lengths: no factor given");
    for (double f : o.factors) {
        // The bound keeps llround in range; no encoder runs a billion-token window.
        if (!std::isfinite(f) || f <= 0 || f * static_cast<double>(L) > 1e9)
            throw std::invalid_argument("lengths: factor " + format_number(f) +
                                        " must be a finite number > 0 (and below 1e9 / L)");
        if (window_length(f, L) < 3)
            throw std::invalid_argument("lengths: factor " + format_number(f) + " gives " +
                                        std::to_string(window_length(f, L)) + " tokens at L = " +
                                        std::to_string(L) + " (a window needs at least 3)");
    }
    if (o.max_tokens < 1)
        throw std::invalid_argument("max_tokens must be >= 1, got " + std::to_string(o.max_tokens));
    if (!(o.mask_prob > 0 && o.mask_prob <= 1))
        throw std::invalid_argument("mask_prob must be in (0, 1], got " +
                                    format_number(o.mask_prob));
    if (o.batch_tokens < 1) throw std::invalid_argument("batch_tokens must be >= 1");
    const engine::ModelConfig& config = model->config();
    if (vocab.size() != config.vocab_size)
        throw std::invalid_argument("the vocabulary has " + std::to_string(vocab.size()) +
                                    " tokens but the model has " +
                                    std::to_string(config.vocab_size));
    if (stream.empty()) throw engine::InputError(o.source, "holds no tokens");

    engine::PositionEncodingImpl& position = *model->bert->position;
    ExtrapolationReport report;
    report.train_length = L;
    report.max_positions = config.max_position_embeddings;
    report.extrapolates = position.description().extrapolates;
    report.rotary = position.description().rotary;
    report.summary = position.description().summary;
    report.base_offset = position.position_offset();
    report.seed = o.seed;
    report.mask_prob = o.mask_prob;
    const int64_t S = std::min<int64_t>(static_cast<int64_t>(stream.size()), o.max_tokens);
    report.stream_tokens = S;

    // The masked set, and the unigram counts of the span's maskable tokens for the floor.
    std::vector<uint8_t> masked(static_cast<size_t>(S), 0);
    std::vector<double> counts(static_cast<size_t>(vocab.size()), 0.0);
    int64_t maskable = 0;
    for (int64_t i = 0; i < S; ++i) {
        const int64_t id = stream[static_cast<size_t>(i)];
        if (id < 0 || id >= vocab.size())
            throw engine::InputError(o.source, "token id " + std::to_string(id) +
                                                   " outside the vocabulary of " +
                                                   std::to_string(vocab.size()));
        if (vocab.is_special(id)) continue;
        counts[static_cast<size_t>(id)] += 1.0;
        ++maskable;
        if (stream_masked(o.seed, static_cast<uint64_t>(i), o.mask_prob)) {
            masked[static_cast<size_t>(i)] = 1;
            ++report.masked_tokens;
        }
    }
    if (report.masked_tokens == 0)
        throw engine::InputError(
            o.source, "none of its " + std::to_string(S) + " tokens is masked (mask_prob " +
                          format_number(o.mask_prob) + "); a longer stream is needed");
    int64_t maskable_types = 0;
    for (int64_t id = 0; id < vocab.size(); ++id)
        if (!vocab.is_special(id)) ++maskable_types;
    // add-1/2 over the maskable vocabulary, as engine::corpus_floor.
    const double denominator =
        static_cast<double>(maskable) + 0.5 * static_cast<double>(maskable_types);
    double floor_sum = 0;
    for (int64_t i = 0; i < S; ++i)
        if (masked[static_cast<size_t>(i)])
            floor_sum -= std::log(
                (counts[static_cast<size_t>(stream[static_cast<size_t>(i)])] + 0.5) / denominator);
    report.unigram_floor = floor_sum / static_cast<double>(report.masked_tokens);

    engine::EvalModeGuard eval(*model);
    torch::NoGradGuard no_grad;
    OffsetGuard restore(position);
    const RowContext context{
        &model, &stream, &masked,        &vocab,
        S,      L,       o.batch_tokens, model->bert->embeddings->word_embeddings->weight.device()};
    // Not available: a learned table without rows for the last position, or a span too short
    // for one window. Never truncated: a shorter window would measure another length.
    auto unavailable = [&](int64_t offset, int64_t length) -> std::string {
        if (!report.extrapolates && offset + length > report.max_positions)
            return "n/a: table of " + std::to_string(report.max_positions) + " positions";
        if (length - 2 > S)
            return "n/a: " + std::to_string(S) + " stream tokens, fewer than one window";
        return "";
    };
    auto measure = [&](double factor, int64_t length, int64_t offset) {
        ExtrapolationRow row;
        row.factor = factor;
        row.length = length;
        row.offset = offset;
        row.note = unavailable(offset, length);
        row.available = row.note.empty();
        if (row.available) {
            position.set_position_offset(offset);
            run_row(context, row);
        }
        return row;
    };
    for (double f : o.factors)
        report.lengths.push_back(measure(f, window_length(f, L), report.base_offset));
    if (report.rotary && !o.rope_scalings.empty()) {
        // RoPE at its best known extension: each length beyond L again, with the frequencies
        // scaled by s = L_eval / L (engine::RopeScaling), on the same windows and tokens.
        RopeScalingGuard restore_scaling(position);
        for (const auto& plain : std::vector<ExtrapolationRow>(report.lengths)) {
            if (!plain.available || plain.length <= L) continue;
            for (const auto method : o.rope_scalings) {
                if (method == engine::RopeScaling::Method::kNone) continue;
                engine::RopeScaling scaling;
                scaling.method = method;
                scaling.factor = static_cast<double>(plain.length) / static_cast<double>(L);
                scaling.original_length = L;
                position.set_rope_scaling(scaling);
                report.scaled.push_back(measure(plain.factor, plain.length, report.base_offset));
                report.scaled.back().rope_scaling = engine::rope_scaling_name(method);
            }
        }
    }
    for (int64_t offset : {int64_t{0}, L / 2, L}) {
        // The length row at L and this offset, when there is one, is this row already.
        auto same = std::find_if(report.lengths.begin(), report.lengths.end(), [&](const auto& r) {
            return r.available && r.length == L && r.offset == offset;
        });
        if (same != report.lengths.end()) {
            report.shifts.push_back(*same);
            report.shifts.back().factor = 1.0;
        } else {
            report.shifts.push_back(measure(1.0, L, offset));
        }
    }
    return report;
}

}  // namespace analysis
