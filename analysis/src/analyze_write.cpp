// `tupe analyze`'s files (see analyze.h, write_analysis): every matrix as .npy + .csv, the
// texts, and an index.json that says what each file holds (its schema: analysis_index.h).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "analysis/analysis_index.h"
#include "analysis/analyze.h"
#include "analysis/npy.h"
#include "engine/errors.h"

namespace analysis {

namespace fs = std::filesystem;

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

void write_scheme_terms(Writer& w, const SchemeTerms& scheme) {
    std::string names;
    for (const auto& term : scheme.terms) names += (names.empty() ? "" : " + ") + term.first;
    // The same averaging as terms/, and the sum is what a reader checks a scheme against.
    const std::string suffix = "; scheme: " + scheme.summary + "; " + names +
                               " add up to the layer-0 logits before the padding mask; mean "
                               "over the batch where query and key are both tokens; rows = "
                               "query position, columns = key position, logit units";
    for (size_t k = 0; k < scheme.terms.size(); ++k) {
        const auto& [name, map] = scheme.terms[k];
        const std::string what = "scheme_" + name;
        const std::string term =
            k < scheme.meanings.size() ? scheme.meanings[k] : name + " term";  // the row's line
        const std::string meaning = "layer-0 " + term + suffix;
        w.array("scheme_terms/" + name, map, describe(what, meaning + "; all heads (H, T, T)", 0));
        for (int64_t h = 0; h < map.size(0); ++h)
            w.matrix("scheme_terms/" + name + "_h" + std::to_string(h), map[h],
                     describe(what, meaning, 0, h));
    }
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

std::string csv_number(double x) {
    if (std::isnan(x)) return "";
    std::ostringstream os;
    os.precision(9);
    os << x;
    return os.str();
}

std::string property_meaning(const PropertiesReport& p) {
    return "positional properties of the attention logits (properties.h), probe of " +
           std::to_string(p.windows) + " window(s) x " + std::to_string(p.length) +
           " tokens, [CLS] row and column left out; Delta_pos = logit at the true positions "
           "minus logit with every position equal";
}

void write_properties(Writer& w, const PropertiesReport& p) {
    const auto& names = property_names();
    std::ostringstream csv;
    csv << "layer,head,pattern";
    for (const auto& n : names) csv << "," << n;
    csv << "\n";
    for (size_t l = 0; l < p.layers.size(); ++l) {
        const auto& layer = p.layers[l];
        for (size_t h = 0; h <= layer.heads.size(); ++h) {
            const bool mean = h == layer.heads.size();
            const HeadProperties& hp = mean ? layer.mean : layer.heads[h];
            csv << l << "," << (mean ? std::string("mean") : std::to_string(h)) << ","
                << (mean ? "" : to_string(hp.pattern));
            for (const auto& n : names) csv << "," << csv_number(property_value(hp, n));
            csv << "\n";
        }
    }
    IndexEntry table = describe("properties_table", property_meaning(p) +
                                                        "; one row per layer and head, 'mean' "
                                                        "rows average the heads");
    w.text("properties/properties.csv", csv.str(), table);
    for (size_t l = 0; l < p.layers.size(); ++l) {
        const auto& layer = p.layers[l];
        const auto L = static_cast<int64_t>(l);
        for (size_t h = 0; h <= layer.heads.size(); ++h) {
            const bool mean = h == layer.heads.size();
            const HeadProperties& hp = mean ? layer.mean : layer.heads[h];
            IndexEntry e =
                describe("property", property_meaning(p), L, mean ? -1 : static_cast<int64_t>(h));
            e.file = "properties/properties.csv";
            for (const auto& n : names) e.statistics.emplace_back(n, property_value(hp, n));
            if (!mean) e.label = to_string(hp.pattern);
            w.entries.push_back(std::move(e));
        }
        const std::string ls = std::to_string(l);
        for (int64_t h = 0; h < layer.delta.size(0); ++h) {
            const std::string hs = std::to_string(h);
            w.array("properties/delta_l" + ls + "_h" + hs, layer.delta[h],
                    describe("delta_pos",
                             "Delta_pos (T-1, T-1), mean over the probe windows: layer " + ls +
                                 " head " + hs +
                                 "'s logits at the true positions minus with "
                                 "every position equal; rows = query 1.., columns = key 1..",
                             L, h));
            if (layer.static_term.defined())
                w.array("properties/static_l" + ls + "_h" + hs, layer.static_term[h],
                        describe("static_pos",
                                 "the exact input-independent positional logit (" +
                                     p.static_source + "), (T-1, T-1) without [CLS]",
                                 L, h));
        }
        w.array("properties/spectrum_l" + ls, layer.spectrum,
                describe("spectrum",
                         "(H, 3, T-1): singular values of each head's Delta_pos, of its "
                         "best Toeplitz fit, and of the residual (TUPE, Proposition 1)",
                         L));
    }
    if (p.table_similarity.defined())
        w.array("properties/table_similarity", p.table_similarity,
                describe("static_pos",
                         "cosine similarity of the position table's rows 1..T-1 (the same for "
                         "every layer and head)"));
}

void write_order_probe(Writer& w, const OrderProbeReport& r) {
    std::ostringstream csv;
    csv << "perturbation,n,loss,change\n";
    csv << "none,0," << csv_number(r.loss) << ",0\n";
    IndexEntry e = describe("order_probe",
                            "order probe (order_probe.h): MLM loss of " + std::to_string(r.masked) +
                                " masked tokens in " + std::to_string(r.windows) + " window(s) x " +
                                std::to_string(r.length) +
                                " tokens, unperturbed and with the order destroyed; change = "
                                "loss - unperturbed loss (nats)");
    e.statistics.emplace_back("loss", r.loss);
    for (const auto& row : r.rows) {
        csv << row.kind << "," << row.n << "," << csv_number(row.loss) << ","
            << csv_number(row.change) << "\n";
        e.statistics.emplace_back(row.kind + "_" + std::to_string(row.n), row.change);
    }
    w.text("properties/order_probe.csv", csv.str(), e);
}

void write_flow(Writer& w, const FlowMaps& flow) {
    const int64_t L = flow.rollout.size(0), H = flow.norm_head.size(1);
    const std::string mean = ", mean over the sentences with a token at both the query and the key";
    const std::string cls_mean = ", mean over the sentences with a token at the key";
    w.array("flow/rollout", flow.rollout,
            describe("rollout",
                     "attention rollout (Abnar & Zuidema 2020) through each layer, (L, T, T): "
                     "R_l = A_hat_l R_{l-1}, A_hat = 0.5 (head-mean attention) + 0.5 I; R_l[i, j] "
                     "= share of layer l's output i that comes from input token j" +
                         mean));
    for (int64_t l = 0; l < L; ++l)
        w.matrix("flow/rollout_l" + std::to_string(l), flow.rollout[l],
                 describe("rollout",
                          "attention rollout through this layer: rows = output position, "
                          "columns = input position" +
                              mean,
                          l));
    w.matrix(
        "flow/cls_rollout", flow.rollout.select(1, 0),
        describe("cls_rollout",
                 "the [CLS] row of the rollout: rows = layers, columns = input position" + mean));
    IndexEntry flow_entry =
        describe("cls_flow",
                 "attention flow (Abnar & Zuidema 2020) into [CLS] after each layer: "
                 "max-flow from input token j to [CLS] in the layered graph of "
                 "A_hat, each sentence's row normalised to sum 1; rows = layers, "
                 "columns = input position; the first " +
                     std::to_string(flow.flow_sentences) + " sentences" + cls_mean);
    flow_entry.statistics = {{"sentences", static_cast<double>(flow.flow_sentences)}};
    w.matrix("flow/cls_flow", flow.flow_cls, flow_entry);
    w.matrix("flow/cls_attention", flow.cls_attention,
             describe("cls_attention",
                      "attention from [CLS], mean over heads, each sentence's row over its "
                      "tokens; rows = layers, columns = key position" +
                          cls_mean));
    w.matrix("flow/cls_value_norm", flow.cls_norm_share,
             describe("cls_value_norm",
                      "share of ||sum_h alpha^h_0j f_h(x_j)|| (Kobayashi et al. 2020) over the "
                      "keys of the [CLS] row, each sentence's row normalised to sum 1; rows = "
                      "layers, columns = key position" +
                          cls_mean));

    std::ostringstream csv;
    csv << "measure,layer,head,cls,words,sep,sentences\n";
    for (const ClsSources& s : flow.sources) {
        csv << s.measure << "," << s.layer << "," << (s.head < 0 ? "" : std::to_string(s.head))
            << "," << csv_number(s.cls) << "," << csv_number(s.words) << "," << csv_number(s.sep)
            << "," << s.sentences << "\n";
    }
    w.text("flow/cls_sources.csv", csv.str(),
           describe("cls_sources",
                    "where the [CLS] row's mass lies, per measure (attention, value_norm, "
                    "rollout, flow), layer and head (empty: the layer): share on [CLS] itself, on "
                    "the words between [CLS] and [SEP], on [SEP]; each sentence's row "
                    "normalised over its tokens, mean over sentences of >= 3 tokens"));
    for (const ClsSources& s : flow.sources) {
        IndexEntry e = describe("cls_sources",
                                "[CLS] row shares of " + s.measure +
                                    (s.head < 0 ? std::string(" (layer)") : std::string()),
                                s.layer, s.head);
        e.file = "flow/cls_sources.csv";
        e.statistics = {{"cls", s.cls},
                        {"words", s.words},
                        {"sep", s.sep},
                        {"sentences", static_cast<double>(s.sentences)}};
        e.label = s.measure;
        w.entries.push_back(std::move(e));
    }

    const std::string kob = " (Kobayashi et al. 2020; f_h(x) = (x W^V_h + b^V_h) W^O_h)";
    for (int64_t l = 0; l < L; ++l) {
        const std::string ls = std::to_string(l);
        w.matrix("value_norms/layer_l" + ls, flow.norm_layer[l],
                 describe("value_norm_layer",
                          "||sum_h alpha^h_ij f_h(x_j)||" + kob +
                              ": rows = query position, columns = key position" + mean,
                          l));
        w.array("value_norms/heads_l" + ls, flow.norm_head[l],
                describe("value_norm_head",
                         "alpha^h_ij ||f_h(x_j)|| per head, (H, T, T)" + kob + mean, l));
    }
    w.array("value_norms/value_norm", flow.value_norm,
            describe("value_norm", "||f_h(x_j)||, what token j sends through head h, (L, H, T)" +
                                       kob + ", mean over the sentences with a token at j"));
    w.array("value_norms/cls_heads", flow.cls_norm_share_head,
            describe("cls_value_norm_head",
                     "per head, share of alpha^h_0j ||f_h(x_j)|| over the keys of the [CLS] row, "
                     "(L, H, T), each sentence's row normalised to sum 1" +
                         cls_mean));
    w.array("value_norms/cls_attention_heads", flow.cls_attention_head,
            describe("cls_attention_head",
                     "per head, the attention alpha^h_0j of the [CLS] row over the sentence's "
                     "keys, (L, H, T), for comparison with cls_heads" +
                         cls_mean));
    for (int64_t h = 0; h < H; ++h)
        w.matrix("value_norms/cls_h" + std::to_string(h), flow.cls_norm_share_head.select(1, h),
                 describe("cls_value_norm_head",
                          "share of alpha^h_0j ||f_h(x_j)|| over the [CLS] row's keys for one "
                          "head: rows = layers, columns = key position" +
                              cls_mean,
                          -1, h));
}

void write_position_vectors(Writer& w, const PositionVectors& p) {
    const std::string wang = " (as Wang et al. 2021 show them for BERT)";
    w.array("positions/vectors", p.vectors,
            describe("position_vectors", "position vectors (P, C): " + p.source));
    w.matrix("positions/cosine", p.cosine,
             describe("position_cosine",
                      "cosine similarity of the position vectors, rows and columns = "
                      "position" +
                          wang + "; " + p.source));
    IndexEntry pca = describe("position_pca",
                              "the centred position vectors on their first two principal axes: "
                              "rows = positions, columns = PC1, PC2" +
                                  wang + "; " + p.source);
    pca.statistics = {{"explained_pc1", p.explained[0]}, {"explained_pc2", p.explained[1]}};
    w.matrix("positions/pca", p.pca, pca);
}

void write_logit_lens(Writer& w, const LogitLensReport& r) {
    std::ostringstream csv;
    csv << "layer,loss,accuracy\n";
    for (const auto& row : r.rows)
        csv << row.layer << "," << csv_number(row.loss) << "," << csv_number(row.accuracy) << "\n";
    IndexEntry e = describe(
        "logit_lens",
        "logit lens at [MASK]: the MLM head on each layer's hidden state (layer -1 = the "
        "embeddings' output, layer l = layer l's output, the last = the model's own prediction" +
            std::string(r.final_norm ? ", every state through the final norm" : "") +
            "), mean cross-entropy (nats) and accuracy over " + std::to_string(r.masked) +
            " masked tokens in " + std::to_string(r.windows) + " window(s) x " +
            std::to_string(r.length) + " tokens of " + r.source +
            "; context-free floors on the same targets: unigram_loss (each target at its "
            "frequency in the whole text) and majority_accuracy (always the text's most frequent "
            "token)");
    e.statistics = {{"masked", static_cast<double>(r.masked)},
                    {"unigram_loss", r.unigram_loss},
                    {"majority_accuracy", r.majority_accuracy}};
    for (const auto& row : r.rows) {
        const std::string at =
            row.layer < 0 ? std::string("_embeddings") : "_layer" + std::to_string(row.layer);
        e.statistics.emplace_back("loss" + at, row.loss);
        e.statistics.emplace_back("accuracy" + at, row.accuracy);
    }
    w.text("logit_lens/logit_lens.csv", csv.str(), e);
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
    write_scheme_terms(w, output.scheme_terms);
    if (output.tupe) write_tupe(w, *output.tupe);
    write_cls(w, output.cls);
    if (output.properties) write_properties(w, *output.properties);
    if (output.order) write_order_probe(w, *output.order);
    if (output.flow) write_flow(w, *output.flow);
    if (output.position_vectors) write_position_vectors(w, *output.position_vectors);
    if (output.lens) write_logit_lens(w, *output.lens);
    write_analysis_index(output, dir, w.entries);
    return w.entries;
}

void write_analysis_index(const AnalysisOutput& output, const std::string& dir,
                          const std::vector<IndexEntry>& entries) {
    const auto& c = output.config;
    AnalysisIndex index;
    index.model = output.model_name;
    index.variant = c.preset;
    index.size = c.size;
    index.config = c;  // every model.* field (analysis_index.h)
    index.sentences = static_cast<int64_t>(output.tokens.size());
    index.tokens = output.input_ids.defined() ? output.input_ids.size(1) : 0;
    index.forward_passes = output.forward_passes;
    index.seconds = output.seconds;
    index.axes =
        "T x T maps: rows = query position i, columns = key position j, position 0 "
        "= [CLS]; layers and heads count from 0";
    index.notes = output.notes;
    for (const auto& s : output.skipped) index.skipped.push_back({s.what, s.reason});
    for (const auto& e : entries)
        index.files.push_back(
            {e.file, e.what, e.description, e.layer, e.head, e.shape, e.statistics, e.label});

    const fs::path path = fs::path(dir) / "index.json";
    const fs::path tmp = fs::path(dir) / "index.json.tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        f << write_index_json(index);
        f.flush();
        if (!f) throw engine::InputError(path.string(), "cannot write");
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) throw engine::InputError(path.string(), "cannot write: " + ec.message());
}

}  // namespace analysis
