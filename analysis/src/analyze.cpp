// `tupe analyze`'s computations: sentences encoded and padded into batches, per batch one
// forward pass with the maps on, feeding the [CLS] maps of every layer and
// decompose_first_layer's four terms (Fig. 2), and TUPE's correlation and taxonomy (Fig. 6)
// from the parameters alone. The files are written by analyze_write.cpp.
#include "analysis/analyze.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "engine/errors.h"
#include "engine/eval_mode.h"

namespace analysis {

namespace fs = std::filesystem;

namespace {

using engine::EvalModeGuard;

std::string trim(const std::string& s) {
    const char* ws = " \t\r\n\f\v";
    const auto begin = s.find_first_not_of(ws);
    if (begin == std::string::npos) return {};
    return s.substr(begin, s.find_last_not_of(ws) - begin + 1);
}

/// The sentences as token lists and ids, truncated to max_len (or refused).
struct Encoded {
    std::vector<std::vector<std::string>> tokens;
    std::vector<std::vector<int64_t>> ids;
    std::vector<std::string> notes;
    int64_t longest = 0;
};

Encoded encode_all(const engine::WordPieceTokenizer& tokenizer,
                   const std::vector<std::string>& sentences, int64_t max_len,
                   const std::string& limit_name, const AnalyzeOptions& options) {
    Encoded out;
    std::vector<std::string> truncated;
    for (size_t k = 0; k < sentences.size(); ++k) {
        // Encode without a limit first, so a truncation is never silent.
        engine::Encoding enc =
            tokenizer.encode(sentences[k], {}, std::numeric_limits<int64_t>::max());
        const auto n = static_cast<int64_t>(enc.input_ids.size());
        if (n > max_len) {
            if (!options.truncate)
                throw engine::InputError(
                    options.source, "the text encodes to " + std::to_string(n) +
                                        " tokens, longer than the model's position table (max " +
                                        std::to_string(max_len) +
                                        " tokens incl. [CLS]/[SEP]); shorten it");
            enc = tokenizer.encode(sentences[k], {}, max_len);
            truncated.push_back("sentence " + std::to_string(k + 1) + " (" + std::to_string(n) +
                                " tokens)");
        }
        out.longest = std::max(out.longest, static_cast<int64_t>(enc.input_ids.size()));
        out.tokens.push_back(std::move(enc.tokens));
        out.ids.push_back(std::move(enc.input_ids));
    }
    if (!truncated.empty()) {
        std::string list;
        for (size_t i = 0; i < std::min<size_t>(truncated.size(), 5); ++i)
            list += (i ? ", " : "") + truncated[i];
        if (truncated.size() > 5) list += ", ...";
        out.notes.push_back(std::to_string(truncated.size()) + " of " +
                            std::to_string(sentences.size()) + " sentences from " + options.source +
                            " were truncated to " + std::to_string(max_len) + " tokens, " +
                            limit_name + ": " + list);
    }
    return out;
}

torch::Tensor dbl(const torch::Tensor& t) { return t.detach().to(torch::kCPU, torch::kDouble); }

/// Sums of FourTerms over batches, for the masked batch mean and the pooled spread. Every
/// array runs over the six parts in term_fields() order.
struct TermAccumulator {
    std::array<torch::Tensor, 6> sums;           // (H, T, T) each
    torch::Tensor pair_count;                    // (T, T)
    std::vector<std::array<double, 6>> squared;  // per head: sum over batches of u^2 * rows
    double rows = 0;

    void add(const FourTerms& terms) {
        const auto& fields = term_fields();
        auto m = dbl(terms.attention_mask);           // (B, T)
        auto pair = m.unsqueeze(2) * m.unsqueeze(1);  // (B, T, T): both are tokens
        auto weight = pair.unsqueeze(1);              // (B, 1, T, T)
        for (size_t k = 0; k < fields.size(); ++k) {
            auto s = (dbl(terms.*fields[k].tensor) * weight).sum(0);  // (B, H, T, T) -> (H, T, T)
            sums[k] = sums[k].defined() ? sums[k] + s : s;
        }
        auto count = pair.sum(0);  // (T, T)
        pair_count = pair_count.defined() ? pair_count + count : count;

        // uniformity() is sqrt(sum of per-row variances / rows): u^2 * rows pools exactly.
        const TermStats stats = term_statistics(terms);
        const double batch_rows = m.sum().item<double>();
        squared.resize(stats.spread.size(), {0, 0, 0, 0, 0, 0});
        for (size_t h = 0; h < stats.spread.size(); ++h)
            for (size_t k = 0; k < fields.size(); ++k) {
                const double u = stats.spread[h].*fields[k].spread;
                squared[h][k] += u * u * batch_rows;
            }
        rows += batch_rows;
    }

    TermMaps finish(bool has_bias) const {
        // TermMaps' tensors in term_fields() order.
        static const std::array<torch::Tensor TermMaps::*, 6> maps = {
            &TermMaps::word_word, &TermMaps::word_pos, &TermMaps::pos_word,
            &TermMaps::pos_pos,   &TermMaps::bias,     &TermMaps::rest};
        const auto& fields = term_fields();
        auto n = pair_count.clamp_min(1.0).unsqueeze(0);  // (1, T, T)
        TermMaps out;
        for (size_t k = 0; k < fields.size(); ++k) {
            if (fields[k].tensor == &FourTerms::bias && !has_bias) continue;
            out.*maps[k] = (sums[k] / n).to(torch::kFloat).contiguous();
        }
        for (const auto& sq : squared) {
            TermSpread s;
            for (size_t k = 0; k < fields.size(); ++k)
                s.*fields[k].spread = rows > 0 ? std::sqrt(sq[k] / rows) : 0.0;
            out.stats.spread.push_back(s);
            out.stats.relative.push_back(relative_to_word_word(s));
        }
        return out;
    }
};

/// Sums of ClsAttention over batches: position maps weighted by their token counts, the
/// per-example statistics by the number of examples.
struct ClsAccumulator {
    torch::Tensor from_sum, to_sum, count, entropy_sum, distance_sum, mass_sum;
    double examples = 0;
    int64_t k = 5;

    void add(const ClsAttention& c, double batch_examples) {
        auto n = dbl(c.token_count);                              // (T)
        auto from = dbl(c.from_cls) * n, to = dbl(c.to_cls) * n;  // (L, H, T)
        auto e = dbl(c.entropy) * batch_examples, d = dbl(c.mean_distance) * batch_examples;
        auto m = dbl(c.first_k_mass) * batch_examples;  // (L, H)
        if (!count.defined()) {
            from_sum = from, to_sum = to, count = n, entropy_sum = e, distance_sum = d,
            mass_sum = m;
        } else {
            from_sum += from, to_sum += to, count += n, entropy_sum += e, distance_sum += d,
                mass_sum += m;
        }
        examples += batch_examples;
        k = c.k;
    }

    ClsAttention finish() const {
        ClsAttention out;
        out.k = k;
        const double ex = std::max(examples, 1.0);
        out.from_cls = (from_sum / count.clamp_min(1.0)).to(torch::kFloat);
        out.to_cls = (to_sum / count.clamp_min(1.0)).to(torch::kFloat);
        out.entropy = (entropy_sum / ex).to(torch::kFloat);
        out.mean_distance = (distance_sum / ex).to(torch::kFloat);
        out.first_k_mass = (mass_sum / ex).to(torch::kFloat);
        out.token_count = count.to(torch::kFloat);
        return out;
    }
};

}  // namespace

std::vector<std::string> read_sentences(const std::string& path, int64_t n) {
    std::ifstream in(path);
    if (!in) throw engine::InputError(path, std::string("cannot open: ") + std::strerror(errno));
    std::vector<std::string> out;
    std::string line;
    while ((n <= 0 || static_cast<int64_t>(out.size()) < n) && std::getline(in, line)) {
        line = trim(line);
        if (!line.empty()) out.push_back(line);
    }
    if (in.bad()) throw engine::InputError(path, "read failed");
    if (out.empty()) throw engine::InputError(path, "has no non-empty line to analyse");
    return out;
}

AnalysisOutput analyze_model(engine::BertForMaskedLM& model,
                             const engine::WordPieceTokenizer& tokenizer,
                             const std::vector<std::string>& sentences,
                             const AnalyzeOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    if (sentences.empty()) throw std::invalid_argument("analyze_model: no sentences");
    if (options.batch_size < 1)
        throw std::invalid_argument("analyze_model: batch_size must be >= 1, got " +
                                    std::to_string(options.batch_size));
    const engine::ModelConfig& config = model->config();
    if (tokenizer.vocab().size() > config.vocab_size)
        throw std::invalid_argument(
            "analyze_model: the vocabulary has " + std::to_string(tokenizer.vocab().size()) +
            " tokens but the model only " + std::to_string(config.vocab_size));

    AnalysisOutput out;
    out.config = config;
    if (options.max_tokens < 0 || options.max_tokens > config.max_position_embeddings)
        throw std::invalid_argument(
            "analyze_model: max_tokens = " + std::to_string(options.max_tokens) + " outside 0.." +
            std::to_string(config.max_position_embeddings) + " (the model's position table)");
    const bool own_limit = options.max_tokens > 0;
    Encoded enc = encode_all(
        tokenizer, sentences, own_limit ? options.max_tokens : config.max_position_embeddings,
        own_limit ? "the --max-tokens limit" : "the model's position table", options);
    out.notes = enc.notes;
    const auto N = static_cast<int64_t>(sentences.size());
    const int64_t T = enc.longest;
    out.input_ids = torch::full({N, T}, tokenizer.vocab().pad_id(), torch::kLong);
    out.attention_mask = torch::zeros({N, T}, torch::kLong);
    for (int64_t b = 0; b < N; ++b) {
        const auto& ids = enc.ids[static_cast<size_t>(b)];
        const auto n = static_cast<int64_t>(ids.size());
        out.input_ids[b].slice(0, 0, n).copy_(torch::tensor(ids, torch::kLong));
        out.attention_mask[b].slice(0, 0, n).fill_(1);
    }
    out.tokens = std::move(enc.tokens);
    if (N == 1) out.axis_labels = out.tokens[0];
    if (N > 1 && T > 1) {
        const double fill = out.attention_mask.to(torch::kDouble).mean().item<double>();
        if (fill < 0.999)
            out.notes.push_back(
                "sentences have different lengths, padded to " + std::to_string(T) +
                " tokens: each averaged map cell counts only the sentences with tokens there "
                "(late positions rest on fewer sentences); the batch is " +
                std::to_string(static_cast<int>(std::lround(fill * 100))) + "% tokens");
    }

    const auto mode = config.absolute_position;
    const bool with_terms =
        mode == engine::AbsolutePosition::kInput || mode == engine::AbsolutePosition::kDecoupled;
    const bool has_bias = config.rel_pos || config.untie_cls;
    if (!with_terms) {
        out.skipped.push_back(
            {"terms (Fig. 2: word-word, word-position, position-word, position-position)",
             mode == engine::AbsolutePosition::kUntied
                 ? "TUPE unties positions from words: no word-position or position-word term "
                   "exists by construction, and the position-position term is the untied "
                   "correlation (tupe/)"
                 : "the model has no absolute positions (absolute_position = none): only the "
                   "word-word term would remain"});
    } else if (!has_bias) {
        out.skipped.push_back({"terms/bias",
                               "the variant adds no logit bias in layer 0 (no "
                               "relative bias, no [CLS] reset)"});
    }
    if (mode != engine::AbsolutePosition::kUntied)
        out.skipped.push_back(
            {"tupe (Fig. 6: positional correlation, theta1/theta2, head taxonomy)",
             std::string("only untied (TUPE) models have a positional correlation term; this "
                         "model has absolute_position = ") +
                 engine::to_string(mode)});

    EvalModeGuard eval_mode(*model);
    torch::NoGradGuard no_grad;
    const auto params = model->parameters();
    const torch::Device device = params.empty() ? torch::Device(torch::kCPU) : params[0].device();
    TermAccumulator term_acc;
    ClsAccumulator cls_acc;
    for (int64_t b0 = 0; b0 < N; b0 += options.batch_size) {
        const int64_t b1 = std::min(N, b0 + options.batch_size);
        auto ids = out.input_ids.slice(0, b0, b1);        // (B, T)
        auto mask = out.attention_mask.slice(0, b0, b1);  // (B, T)
        // One forward pass per batch, maps on: the [CLS] maps of every layer and the layer-0
        // logits against which the decomposition is exact.
        engine::EncoderOutput encoded =
            model->bert->forward(ids.to(device), mask.to(device), {}, /*output_attentions=*/true);
        ++out.forward_passes;
        if (with_terms) term_acc.add(decompose_first_layer(model->bert, ids, mask, encoded));
        ClsAttention cls = cls_attention(encoded.attention_probs, mask, options.cls_k);
        cls_acc.add(cls, static_cast<double>(b1 - b0));
    }
    if (with_terms) out.terms = term_acc.finish(has_bias);
    out.cls = cls_acc.finish();

    if (mode == engine::AbsolutePosition::kUntied) {
        TupeMaps tupe;
        tupe.correlation = tupe_positional_correlation(model->bert, T);
        const int64_t positions = options.thresholds.skip_cls ? T - 1 : T;
        if (positions >= 2) {
            for (const auto& group : tupe.correlation.groups) {
                std::vector<HeadPattern> patterns;
                std::vector<HeadStatistics> stats;
                for (int64_t h = 0; h < group.probs.size(0); ++h) {
                    stats.push_back(head_statistics(group.probs[h], options.thresholds.skip_cls));
                    patterns.push_back(classify_head(group.probs[h], options.thresholds));
                }
                tupe.patterns.push_back(std::move(patterns));
                tupe.statistics.push_back(std::move(stats));
            }
        } else {
            out.skipped.push_back({"tupe head taxonomy",
                                   "needs at least 2 positions besides [CLS]; the longest "
                                   "sentence has " +
                                       std::to_string(T) + " tokens"});
        }
        out.tupe = std::move(tupe);
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}

}  // namespace analysis
