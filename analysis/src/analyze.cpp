// `tupe analyze`'s computations: sentences encoded and padded into batches, per batch one
// forward pass with the maps on, feeding the [CLS] maps of every layer and
// decompose_first_layer's four terms (Fig. 2), layer 0's named terms of every scheme
// (engine::LayerPosition::terms), and TUPE's correlation and taxonomy (Fig. 6) from the
// parameters alone. The files are written by analyze_write.cpp.
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

/// Layer 0's named logit terms (engine::LayerPosition::terms), (B, H, T, T) each on the model's
/// device and dtype, from q and k computed as the layer computes them: the embeddings with the
/// input slot, the pre-LN norm where the layer has one, the q/k projections and offsets, the
/// head split. Only layer 0: a later layer's q and k need its input, i.e. a full pass.
std::vector<std::pair<std::string, torch::Tensor>> first_layer_named_terms(
    engine::BertModel& bert, const torch::Tensor& ids) {
    const int64_t B = ids.size(0), T = ids.size(1);
    const int64_t H = bert->config().num_attention_heads, d = bert->config().head_dim();
    auto& position = bert->position;
    // As BertModelImpl::forward: the positions on the ids' device, tables in the words' dtype.
    engine::PositionTerms terms =
        position->forward(position->positions(T, ids.device()),
                          bert->embeddings->word_embeddings->weight.scalar_type());
    auto x = bert->embeddings->forward(ids, {}, terms.input);  // (B, T, C)
    auto* layer = bert->encoder->layer[0]->as<engine::BertLayerImpl>();
    if (layer->attention_norm) {
        // Pre-LN attends over LN(x), the norm run in its weights' dtype as the layer does
        // (ModernBERT's layer 0 over x itself: model.skip_first_attention_norm).
        auto& ln = layer->attention->output->LayerNorm;
        x = ln(x.to(ln->weight.scalar_type()));
    }
    auto& self = *layer->attention->self;
    auto q = self.query(x), k = self.key(x);  // (B, T, C)
    const engine::LayerPosition& layer0 = terms.for_layer(0);
    layer0.offset_qk(q, k);  // BERT-Ad's p'U^Q, p'U^K; nothing for the other schemes
    auto heads = [&](const torch::Tensor& t) {
        return t.reshape({B, T, H, d}).transpose(1, 2);  // (B, T, C) -> (B, H, T, d)
    };
    return layer0.terms(heads(q), heads(k));
}

/// Sums of layer 0's named scheme terms over batches, for the masked batch mean of
/// TermAccumulator (each cell over the sentences with a token at both the query and the key).
/// The float64 products and the sum over the batch run on the model's device, one term at a
/// time, so only (H, T, T) per term comes back to the CPU.
struct SchemeTermAccumulator {
    std::vector<std::string> names;
    std::vector<torch::Tensor> sums;  // (H, T, T) float64 CPU, in names' order
    torch::Tensor pair_count;         // (T, T)

    void add(std::vector<std::pair<std::string, torch::Tensor>> terms, const torch::Tensor& mask) {
        if (names.empty())
            for (const auto& term : terms) names.push_back(term.first);
        if (terms.size() != names.size())
            throw std::logic_error("analyze_model: layer 0 has " + std::to_string(terms.size()) +
                                   " named terms in this batch, " + std::to_string(names.size()) +
                                   " in the first");
        sums.resize(names.size());
        auto m = mask.to(terms.front().second.device(), torch::kDouble);  // (B, T)
        auto pair = m.unsqueeze(2) * m.unsqueeze(1);                      // (B, T, T)
        auto weight = pair.unsqueeze(1);                                  // (B, 1, T, T)
        for (size_t k = 0; k < terms.size(); ++k) {
            auto s = (terms[k].second.to(torch::kDouble) * weight).sum(0).to(torch::kCPU);
            terms[k].second = torch::Tensor();  // (B, H, T, T) released before the next term
            sums[k] = sums[k].defined() ? sums[k] + s : s;
        }
        auto count = pair.sum(0).to(torch::kCPU);  // (T, T)
        pair_count = pair_count.defined() ? pair_count + count : count;
    }

    SchemeTerms finish(const engine::PositionDescription& scheme) const {
        SchemeTerms out;
        out.summary = scheme.summary;
        out.meanings = scheme.logit_term_meanings;
        auto n = pair_count.clamp_min(1.0).unsqueeze(0);  // (1, T, T)
        for (size_t k = 0; k < names.size(); ++k)
            out.terms.emplace_back(names[k], (sums[k] / n).to(torch::kFloat).contiguous());
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

namespace {

// The properties and order probes on the sentences as one stream: windows of T tokens, T the
// asked length (0: min(128, the position table)), shortened to the stream when it is shorter.
void probe_stream(engine::BertForMaskedLM& model, const engine::WordPieceTokenizer& tokenizer,
                  const std::vector<std::string>& sentences, const AnalyzeOptions& options,
                  AnalysisOutput& out) {
    const engine::ModelConfig& config = model->config();
    PropertiesOptions po = options.property_options;
    int64_t T = po.length > 0 ? po.length : std::min<int64_t>(128, config.max_position_embeddings);
    const int64_t needed = std::max<int64_t>(po.windows, options.order_options.windows) * (T - 2);
    const auto stream = sentences_stream(sentences, tokenizer, needed);
    const auto S = static_cast<int64_t>(stream.size());
    if (S + 2 < T) {
        if (S + 2 < 4) {
            out.skipped.push_back({"properties and order probe",
                                   "the sentences hold " + std::to_string(S) +
                                       " tokens; the probes need windows of at least 4 tokens"});
            return;
        }
        out.notes.push_back("the sentences hold " + std::to_string(S) +
                            " tokens, fewer than one probe window of " + std::to_string(T) +
                            ": properties and the order probe use one window of " +
                            std::to_string(S + 2) + " tokens");
        T = S + 2;
    }
    po.length = T;
    po.source = options.source;
    po.thresholds = options.thresholds;
    if (options.properties) {
        out.properties = measure_properties(model, stream, tokenizer.vocab(), po);
        if (out.properties->windows < po.windows)
            out.notes.push_back("properties: " + std::to_string(out.properties->windows) +
                                " window(s) of " + std::to_string(T) + " tokens (asked for " +
                                std::to_string(po.windows) + "; give more --sentences for more)");
    }
    if (options.order_probe) {
        OrderProbeOptions oo = options.order_options;
        oo.length = T;
        oo.source = options.source;
        out.order = order_probe(model, stream, tokenizer.vocab(), oo);
    }
}

// The logit lens on options.lens_stream, or on the sentences as one stream, in windows of the
// asked length (0: the properties' length), shortened to the stream when it is shorter.
void run_logit_lens(engine::BertForMaskedLM& model, const engine::WordPieceTokenizer& tokenizer,
                    const std::vector<std::string>& sentences, const AnalyzeOptions& options,
                    AnalysisOutput& out) {
    const engine::ModelConfig& config = model->config();
    LogitLensOptions lo = options.lens_options;
    const int64_t asked = options.property_options.length;
    int64_t T = lo.length > 0 ? lo.length
                : asked > 0   ? asked
                              : std::min<int64_t>(128, config.max_position_embeddings);
    const bool own = !options.lens_stream.empty();
    const auto stream =
        own ? options.lens_stream : sentences_stream(sentences, tokenizer, lo.windows * (T - 2));
    if (!own) lo.source = options.source;
    const auto S = static_cast<int64_t>(stream.size());
    if (S + 2 < T) {
        if (S + 2 < 4) {
            out.skipped.push_back({"logit lens", "the text holds " + std::to_string(S) +
                                                     " tokens; the lens needs windows of at "
                                                     "least 4 tokens"});
            return;
        }
        out.notes.push_back("the logit lens' text holds " + std::to_string(S) +
                            " tokens, fewer than one window of " + std::to_string(T) +
                            ": it uses one window of " + std::to_string(S + 2) + " tokens");
        T = S + 2;
    }
    lo.length = T;
    try {
        out.lens = logit_lens(model, stream, tokenizer.vocab(), lo);
    } catch (const engine::InputError& e) {
        // Short texts may hold no masked token at 15%: the rest of the analysis stands.
        out.skipped.push_back({"logit lens", e.what()});
    }
}

}  // namespace

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

    const engine::PositionDescription& scheme = model->bert->position->description();
    // The four-term split of layer 0 (Fig. 2) is exact where positions enter at the input or
    // as q/k offsets; RoPE and the content-dependent schemes mix them inside attention.
    const bool with_terms =
        (scheme.input_slot || scheme.qk_offsets) && !scheme.rotary && !scheme.content_bias;
    const bool has_bias = scheme.static_bias;
    if (!with_terms) {
        out.skipped.push_back(
            {"terms (Fig. 2: word-word, word-position, position-word, position-position)",
             scheme.untied
                 ? "TUPE unties positions from words: no word-position or position-word term "
                   "exists by construction, and the position-position term is the untied "
                   "correlation (tupe/)"
                 : (scheme.input_slot || scheme.qk_offsets
                        ? scheme.summary + ": positions mix with words inside attention, so "
                                           "the four-term split of Fig. 2 is not exact"
                        : scheme.summary + ": no absolute positions at the input, so only the "
                                           "word-word term would remain")});
    } else if (!has_bias) {
        out.skipped.push_back({"terms/bias",
                               "the variant adds no logit bias in layer 0 (no "
                               "relative bias, no [CLS] reset)"});
    }
    if (!scheme.untied)
        out.skipped.push_back(
            {"tupe (Fig. 6: positional correlation, theta1/theta2, head taxonomy)",
             "only untied (TUPE) models have a positional correlation term; this model has " +
                 scheme.summary});

    EvalModeGuard eval_mode(*model);
    torch::NoGradGuard no_grad;
    const auto params = model->parameters();
    const torch::Device device = params.empty() ? torch::Device(torch::kCPU) : params[0].device();
    TermAccumulator term_acc;
    SchemeTermAccumulator scheme_acc;
    ClsAccumulator cls_acc;
    FlowAccumulator flow_acc(options.flow_sentences);
    for (int64_t b0 = 0; b0 < N; b0 += options.batch_size) {
        const int64_t b1 = std::min(N, b0 + options.batch_size);
        auto ids = out.input_ids.slice(0, b0, b1);        // (B, T)
        auto mask = out.attention_mask.slice(0, b0, b1);  // (B, T)
        // The scheme's named terms of layer 0 first, so that they are never in memory beside
        // the maps of every layer that the pass below keeps.
        scheme_acc.add(first_layer_named_terms(model->bert, ids.to(device)), mask);
        // One forward pass per batch, maps on: the [CLS] maps of every layer and the layer-0
        // logits against which the decomposition is exact; traced (every layer's input kept)
        // for the value-weighted norms.
        EncoderTrace trace;
        if (options.flow)
            trace = trace_encoder(model->bert, ids.to(device), mask.to(device));
        else
            trace.encoded = model->bert->forward(ids.to(device), mask.to(device), {},
                                                 /*output_attentions=*/true);
        const engine::EncoderOutput& encoded = trace.encoded;
        ++out.forward_passes;
        if (options.flow) flow_acc.add(model->bert, trace, mask);
        if (with_terms) term_acc.add(decompose_first_layer(model->bert, ids, mask, encoded));
        ClsAttention cls = cls_attention(encoded.attention_probs, mask, options.cls_k);
        cls_acc.add(cls, static_cast<double>(b1 - b0));
    }
    if (with_terms) out.terms = term_acc.finish(has_bias);
    out.scheme_terms = scheme_acc.finish(scheme);
    out.cls = cls_acc.finish();
    if (options.flow) out.flow = flow_acc.finish();
    out.position_vectors = position_vectors(
        model->bert, std::min(options.position_rows, config.max_position_embeddings));
    if (!out.position_vectors)
        out.skipped.push_back({"positions (cosine similarity and PCA of the position vectors)",
                               "no learned absolute position table: " + scheme.summary});

    if (scheme.untied) {
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
    if (options.properties || options.order_probe)
        probe_stream(model, tokenizer, sentences, options, out);
    if (options.logit_lens) run_logit_lens(model, tokenizer, sentences, options, out);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}

}  // namespace analysis
