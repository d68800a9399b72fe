// `tupe analyze`'s computations and files: sentences encoded and padded into batches, per batch
// one forward pass with the maps on, feeding the [CLS] maps of every layer and
// decompose_first_layer's four terms (Fig. 2), TUPE's correlation and taxonomy (Fig. 6) from the parameters alone, and the
// export of every matrix (.npy + .csv) with an index.json that says what each file holds.
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
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "analysis/npy.h"
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

// ---- files --------------------------------------------------------------------------------------

namespace {

/// Writes arrays under one directory and remembers an IndexEntry per file.
class Writer {
  public:
    explicit Writer(const fs::path& dir) : dir_(dir) {}

    /// A 2-d matrix as rel.npy and rel.csv.
    void matrix(const std::string& rel, const torch::Tensor& m, IndexEntry entry) {
        auto t = m.detach().to(torch::kCPU).contiguous();
        if (t.dim() == 1) t = t.unsqueeze(0);  // (T) -> (1, T)
        array(rel, t, entry);
        mkdir(rel);
        write_csv((dir_ / (rel + ".csv")).string(), t);
        entry.file = rel + ".csv";
        entry.shape = t.sizes().vec();
        entries.push_back(std::move(entry));
    }
    /// Any array as rel.npy.
    void array(const std::string& rel, const torch::Tensor& a, IndexEntry entry) {
        mkdir(rel);
        auto t = a.detach().to(torch::kCPU).contiguous();
        write_npy((dir_ / (rel + ".npy")).string(), t);
        entry.file = rel + ".npy";
        entry.shape = t.sizes().vec();
        entries.push_back(std::move(entry));
    }
    void text(const std::string& rel, const std::string& content, IndexEntry entry) {
        mkdir(rel);
        const fs::path path = dir_ / rel;
        std::ofstream f(path, std::ios::trunc);
        f << content;
        f.flush();
        if (!f) throw engine::InputError(path.string(), "cannot write");
        entry.file = rel;
        entries.push_back(std::move(entry));
    }

    std::vector<IndexEntry> entries;

  private:
    void mkdir(const std::string& rel) {
        std::error_code ec;
        const fs::path parent = (dir_ / rel).parent_path();
        fs::create_directories(parent, ec);
        if (ec)
            throw engine::InputError(parent.string(),
                                     "cannot create the directory: " + ec.message());
    }
    fs::path dir_;
};

IndexEntry describe(const std::string& what, const std::string& description, int64_t layer = -1,
                    int64_t head = -1) {
    IndexEntry e;
    e.what = what;
    e.description = description;
    e.layer = layer;
    e.head = head;
    return e;
}

nlohmann::json number(double v) {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

void write_terms(Writer& w, const TermMaps& terms) {
    struct Part {
        const char* name;
        const torch::Tensor* map;
        const char* description;
        double TermSpread::*field;
    };
    const Part parts[] = {
        {"word_word", &terms.word_word, "layer-0 word->word term (x_w W^Q)(x_w W^K)^T * scale",
         &TermSpread::word_word},
        {"word_pos", &terms.word_pos,
         "layer-0 word->position term (x_w W^Q)(x_p W^K)^T * scale: word query, key position",
         &TermSpread::word_pos},
        {"pos_word", &terms.pos_word,
         "layer-0 position->word term (x_p W^Q)(x_w W^K)^T * scale: query position, key word",
         &TermSpread::pos_word},
        {"pos_pos", &terms.pos_pos, "layer-0 position->position term (x_p W^Q)(x_p W^K)^T * scale",
         &TermSpread::pos_pos},
        {"bias", &terms.bias,
         "layer-0 logit bias of the model (T5 relative bias and/or [CLS] theta)",
         &TermSpread::bias},
        {"rest", &terms.rest,
         "layer-0 products with the rest stream (segment embedding, LayerNorm and Linear biases)",
         &TermSpread::rest},
    };
    const std::string suffix =
        ", mean over the batch where query and key are both tokens; rows = query position, "
        "columns = key position, logit units";
    for (const Part& p : parts) {
        if (!p.map->defined()) continue;
        w.array(std::string("terms/") + p.name, *p.map,
                describe(p.name, std::string(p.description) + suffix + "; all heads (H, T, T)", 0));
        for (int64_t h = 0; h < p.map->size(0); ++h) {
            IndexEntry e = describe(p.name, std::string(p.description) + suffix, 0, h);
            const auto hs = static_cast<size_t>(h);
            e.statistics = {
                {"uniformity", terms.stats.spread[hs].*p.field},
                {"uniformity_relative_to_word_word", terms.stats.relative[hs].*p.field}};
            w.matrix(std::string("terms/") + p.name + "_h" + std::to_string(h), (*p.map)[h], e);
        }
    }
    const int64_t H = terms.word_word.size(0);
    auto spread = torch::zeros({H, 6}, torch::kDouble),
         relative = torch::zeros({H, 6}, torch::kDouble);
    const auto& fields = term_fields();
    for (int64_t h = 0; h < H; ++h) {
        const auto& s = terms.stats.spread[static_cast<size_t>(h)];
        const auto& r = terms.stats.relative[static_cast<size_t>(h)];
        for (size_t k = 0; k < fields.size(); ++k) {
            spread[h][static_cast<int64_t>(k)] = s.*fields[k].spread;
            relative[h][static_cast<int64_t>(k)] = r.*fields[k].spread;
        }
    }
    const std::string columns =
        "; rows = heads, columns = word_word, word_pos, pos_word, pos_pos, bias, rest";
    w.matrix("terms/uniformity", spread,
             describe("uniformity",
                      "uniformity (spread across keys, logit units; 0 = cannot move "
                      "attention) of each layer-0 term per head, over every sentence" +
                          columns,
                      0));
    w.matrix("terms/uniformity_relative", relative,
             describe("uniformity_relative",
                      "uniformity of each term divided by the word-word term's" + columns, 0));
}

void write_tupe(Writer& w, const TupeMaps& tupe) {
    const auto& corr = tupe.correlation;
    const size_t groups = corr.groups.size();
    if (corr.relative.defined())
        w.array(
            "tupe/relative", corr.relative,
            describe("tupe_relative", "T5 relative bias per head (H, T, T), shared by all layers"));
    for (size_t g = 0; g < groups; ++g) {
        const auto& group = corr.groups[g];
        const int64_t layer = groups > 1 ? static_cast<int64_t>(g) : -1;
        const std::string prefix =
            "tupe/" + (groups > 1 ? "layer" + std::to_string(g) + "_" : std::string());
        const std::string scope =
            groups > 1 ? "layer " + std::to_string(g) : std::string("shared by all layers");
        w.array(prefix + "raw", group.raw,
                describe("tupe_raw",
                         "untied correlation (p'U^Q)(p'U^K)^T * scale before the "
                         "[CLS] reset, (H, T, T), " +
                             scope,
                         layer));
        w.array(prefix + "reset", group.reset,
                describe("tupe_reset",
                         "untied correlation after the [CLS] reset (row 0 <- theta1, "
                         "column 0 <- theta2), (H, T, T), " +
                             scope,
                         layer));
        w.array(prefix + "total", group.total,
                describe("tupe_total",
                         "the positional bias the model adds to the logits (reset "
                         "correlation + relative bias), (H, T, T), " +
                             scope,
                         layer));
        w.array(prefix + "probs", group.probs,
                describe("tupe_probs", "row softmax of tupe_total over keys, (H, T, T), " + scope,
                         layer));
        const int64_t H = group.theta1.size(0);
        w.matrix(prefix + "theta", torch::stack({group.theta1, group.theta2}, 1),
                 describe("tupe_theta",
                          "per head (rows): theta1 ([CLS] -> others), theta2 "
                          "(others -> [CLS])",
                          layer));
        for (int64_t h = 0; h < H; ++h) {
            std::vector<std::pair<std::string, double>> stats = {
                {"theta1", group.theta1[h].item<double>()},
                {"theta2", group.theta2[h].item<double>()}};
            std::string label;
            if (g < tupe.statistics.size()) {
                const HeadStatistics& s = tupe.statistics[g][static_cast<size_t>(h)];
                stats.insert(stats.end(), {{"mean_distance", s.mean_distance},
                                           {"entropy", s.entropy},
                                           {"previous_mass", s.previous_mass},
                                           {"next_mass", s.next_mass},
                                           {"self_mass", s.self_mass}});
                label = to_string(tupe.patterns[g][static_cast<size_t>(h)]);
            }
            IndexEntry total =
                describe("tupe_total",
                         "positional correlation of one head (after the [CLS] reset, relative "
                         "bias included): rows = query position, columns = key position, "
                         "logit units, " +
                             scope,
                         layer, h);
            total.statistics = stats;
            total.label = label;
            w.matrix(prefix + "total_h" + std::to_string(h), group.total[h], total);
            IndexEntry probs =
                describe("tupe_probs",
                         "row softmax of the positional correlation of one head (what "
                         "positions alone would attend to), " +
                             scope,
                         layer, h);
            probs.statistics = stats;
            probs.label = label;
            w.matrix(prefix + "probs_h" + std::to_string(h), group.probs[h], probs);
        }
    }
}

void write_cls(Writer& w, const ClsAttention& cls) {
    const int64_t L = cls.from_cls.size(0), H = cls.from_cls.size(1);
    const std::string k = std::to_string(cls.k);
    w.array("cls/from_cls", cls.from_cls,
            describe("from_cls",
                     "attention from [CLS] to each key position, (L, H, T), mean over "
                     "the sentences with a token there"));
    w.array("cls/to_cls", cls.to_cls,
            describe("to_cls",
                     "attention from each query position to [CLS], (L, H, T), mean over "
                     "the sentences with a token there"));
    w.matrix("cls/from_cls_mean", cls.from_cls.mean(1),
             describe("from_cls",
                      "attention from [CLS], mean over heads: rows = layers, columns "
                      "= key position"));
    w.matrix("cls/to_cls_mean", cls.to_cls.mean(1),
             describe("to_cls",
                      "attention to [CLS], mean over heads: rows = layers, columns = "
                      "query position"));
    for (int64_t h = 0; h < H; ++h) {
        std::vector<std::pair<std::string, double>> stats;
        for (int64_t l = 0; l < L; ++l) {
            const std::string sl = "_layer" + std::to_string(l);
            stats.push_back({"entropy" + sl, cls.entropy[l][h].item<double>()});
            stats.push_back({"mean_distance" + sl, cls.mean_distance[l][h].item<double>()});
            stats.push_back({"first_" + k + "_mass" + sl, cls.first_k_mass[l][h].item<double>()});
        }
        IndexEntry from = describe("from_cls",
                                   "attention from [CLS] of one head: rows = layers, "
                                   "columns = key position",
                                   -1, h);
        from.statistics = stats;
        w.matrix("cls/from_cls_h" + std::to_string(h), cls.from_cls.select(1, h), from);
        IndexEntry to = describe("to_cls",
                                 "attention to [CLS] of one head: rows = layers, "
                                 "columns = query position",
                                 -1, h);
        to.statistics = stats;
        w.matrix("cls/to_cls_h" + std::to_string(h), cls.to_cls.select(1, h), to);
    }
    const std::string lh = ": rows = layers, columns = heads";
    w.matrix("cls/entropy", cls.entropy,
             describe("cls_entropy", "entropy of the [CLS] row in nats, mean over sentences" + lh));
    w.matrix("cls/mean_distance", cls.mean_distance,
             describe("cls_mean_distance",
                      "mean key position attended from [CLS] (tokens), mean over sentences" + lh));
    w.matrix("cls/first_k_mass", cls.first_k_mass,
             describe("cls_first_k_mass", "attention mass of [CLS] on the first " + k +
                                              " positions, mean over sentences" + lh));
    w.array("cls/token_count", cls.token_count,
            describe("token_count", "sentences with a token at each position, (T)"));
}

}  // namespace

std::vector<IndexEntry> write_analysis(const AnalysisOutput& output, const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw engine::InputError(dir, "cannot create the directory: " + ec.message());
    Writer w{fs::path(dir)};
    std::string tokens;
    for (const auto& sentence : output.tokens) {
        for (size_t i = 0; i < sentence.size(); ++i) tokens += (i ? " " : "") + sentence[i];
        tokens += "\n";
    }
    IndexEntry t = describe("tokens",
                            "the wordpieces of each sentence, one sentence per line, "
                            "[CLS] and [SEP] included, after truncation");
    t.shape = {static_cast<int64_t>(output.tokens.size())};
    w.text("input/tokens.txt", tokens, t);
    w.array("input/input_ids", output.input_ids,
            describe("input_ids", "token ids (N, T), [PAD] after each sentence"));
    w.array("input/attention_mask", output.attention_mask,
            describe("attention_mask", "(N, T), 1 = token, 0 = padding"));
    if (output.terms) write_terms(w, *output.terms);
    if (output.tupe) write_tupe(w, *output.tupe);
    write_cls(w, output.cls);
    write_analysis_index(output, dir, w.entries);
    return w.entries;
}

void write_analysis_index(const AnalysisOutput& output, const std::string& dir,
                          const std::vector<IndexEntry>& entries) {
    using nlohmann::json;
    const auto& c = output.config;
    json index;
    index["model"] = output.model_name;
    index["variant"] = c.preset;
    index["size"] = c.size;
    index["config"] = {{"absolute_position", engine::to_string(c.absolute_position)},
                       {"rel_pos", c.rel_pos},
                       {"untie_cls", c.untie_cls},
                       {"shared_pos_term", c.shared_pos_term},
                       {"attention_scale_factor", c.attention_scale_factor},
                       {"pre_layernorm", c.pre_layernorm},
                       {"num_hidden_layers", c.num_hidden_layers},
                       {"num_attention_heads", c.num_attention_heads},
                       {"hidden_size", c.hidden_size},
                       {"max_position_embeddings", c.max_position_embeddings},
                       {"vocab_size", c.vocab_size}};
    index["sentences"] = output.tokens.size();
    index["tokens"] = output.input_ids.defined() ? output.input_ids.size(1) : 0;
    index["forward_passes"] = output.forward_passes;
    index["seconds"] = output.seconds;
    index["axes"] =
        "T x T maps: rows = query position i, columns = key position j, position 0 "
        "= [CLS]; layers and heads count from 0";
    index["notes"] = output.notes;
    json skipped = json::array();
    for (const auto& s : output.skipped)
        skipped.push_back({{"what", s.what}, {"reason", s.reason}});
    index["skipped"] = skipped;
    json files = json::array();
    for (const auto& e : entries) {
        json f = {{"file", e.file}, {"what", e.what}, {"description", e.description}};
        f["layer"] = e.layer >= 0 ? json(e.layer) : json(nullptr);
        f["head"] = e.head >= 0 ? json(e.head) : json(nullptr);
        if (!e.shape.empty()) f["shape"] = e.shape;
        if (!e.label.empty()) f["label"] = e.label;
        if (!e.statistics.empty()) {
            json stats = json::object();
            for (const auto& [name, value] : e.statistics) stats[name] = number(value);
            f["statistics"] = stats;
        }
        files.push_back(f);
    }
    index["files"] = files;

    const fs::path path = fs::path(dir) / "index.json";
    const fs::path tmp = fs::path(dir) / "index.json.tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        f << index.dump(1) << "\n";
        f.flush();
        if (!f) throw engine::InputError(path.string(), "cannot write");
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw engine::InputError(path.string(), "cannot write: " + ec.message());
}

}  // namespace analysis
