// `tupe analyze`: the paper's attention figures for a model (Ke, He, Liu, ICLR 2021, Fig. 2 and
// Fig. 6, plus [CLS] attention): analysis::analyze_model computes, write_analysis exports the
// matrices, and this file turns tensors into plotting's plain structs for the PNGs. The
// plotting header is torch- and Qt-free, so this torch file never sees a Qt header. With --db,
// --experiment and --run, every file written is recorded as an artifact of that run.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "analysis/analyze.h"
#include "analysis/attention_analysis.h"
#include "analysis/text_format.h"
#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/errors.h"
#include "engine/threads.h"
#include "engine/trainer.h"
#include "experiments/analysis_artifacts.h"
#include "experiments/claims.h"
#include "experiments/result_store.h"
#include "model_loader.h"
#if TUPE_WITH_QT
#include "plotting/plotting.h"
#endif

namespace cli {

namespace fs = std::filesystem;
#if TUPE_WITH_QT
namespace plt = plotting;
#endif

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- tensors -> plotting structs ---------------------------------------------------------------

#if TUPE_WITH_QT  // only the figures read it (the headless build warned: defined but not used)
std::vector<double> to_values(const torch::Tensor& t) {
    auto c = t.detach().to(torch::kCPU, torch::kDouble).contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}
#endif

// Titles and timings: 3 significant digits, "n/a" where nothing was measured.
std::string fmt(double v, int digits = 3) { return analysis::significant_number(v, digits); }

#if TUPE_WITH_QT
plt::Heatmap heatmap(const torch::Tensor& m, const std::string& title, bool symmetric) {
    TORCH_CHECK(m.dim() == 2, "heatmap: expected a matrix, got ", m.sizes());
    plt::Heatmap h;
    h.title = title;
    h.rows = static_cast<int>(m.size(0));
    h.cols = static_cast<int>(m.size(1));
    h.values = to_values(m);
    h.symmetric = symmetric;
    return h;
}

/// Positions drawn in position-indexed figures: those reached by at least half of the
/// sentences. Beyond them an averaged cell rests on one or two sentences and its noise would
/// dominate the picture; the files keep every position.
int64_t shown_positions(const analysis::AnalysisOutput& out) {
    const int64_t T = out.cls.token_count.size(0);
    const double need = std::ceil(static_cast<double>(out.tokens.size()) / 2.0);
    for (int64_t t = T; t > 1; --t)
        if (out.cls.token_count[t - 1].item<double>() >= need) return t;
    return T;
}

/// "" when every position is drawn, else a line for the figure title.
std::string shown_phrase(const analysis::AnalysisOutput& out) {
    const int64_t shown = shown_positions(out), T = out.cls.token_count.size(0);
    if (shown == T) return {};
    return "\npositions 0-" + std::to_string(shown - 1) +
           ", reached by at least half of the sentences (the files hold all " + std::to_string(T) +
           ")";
}

/// A T x T map with query rows and key columns labelled by token (one sentence) or position,
/// cut to the first `shown` positions (0 = all).
plt::Heatmap square_map(const analysis::AnalysisOutput& out, const torch::Tensor& m,
                        const std::string& title, bool symmetric, const std::string& unit,
                        int64_t shown = 0) {
    const int64_t n = shown > 0 ? std::min(shown, m.size(0)) : m.size(0);
    plt::Heatmap h = heatmap(m.slice(0, 0, n).slice(1, 0, n), title, symmetric);
    if (!out.axis_labels.empty())
        h.row_labels = h.col_labels =
            std::vector<std::string>(out.axis_labels.begin(), out.axis_labels.begin() + n);
    const bool tokens = !out.axis_labels.empty();
    h.x_label = tokens ? "key" : "key position (0 = [CLS])";
    h.y_label = tokens ? "query" : "query position";
    h.value_label = unit;
    return h;
}

/// An L x T map: rows are layers, columns tokens or positions (the first shown_positions).
plt::Heatmap layer_map(const analysis::AnalysisOutput& out, const torch::Tensor& m,
                       const std::string& title, const std::string& x_label) {
    const int64_t n = std::min(shown_positions(out), m.size(1));
    plt::Heatmap h = heatmap(m.slice(1, 0, n), title, false);
    for (int l = 0; l < h.rows; ++l) h.row_labels.push_back("layer " + std::to_string(l));
    if (!out.axis_labels.empty())
        h.col_labels =
            std::vector<std::string>(out.axis_labels.begin(), out.axis_labels.begin() + n);
    h.x_label = out.axis_labels.empty() ? x_label + " position (0 = [CLS])" : x_label;
    h.value_label = "attention";
    return h;
}

/// Heights that keep T x T cells about square in a grid panel.
constexpr int kCellW = 420, kCellH = 380;

std::string sentences_phrase(const analysis::AnalysisOutput& out) {
    const size_t n = out.tokens.size();
    return n == 1 ? "1 sentence" : "mean over " + std::to_string(n) + " sentences";
}

std::string model_title(const analysis::AnalysisOutput& out) {
    return out.config.preset + " (" + out.model_name + ")";
}

/// Collects figure files and their index entries.
struct Figures {
    fs::path dir;
    std::vector<analysis::IndexEntry> entries;

    std::string path(const std::string& name) const { return (dir / "figures" / name).string(); }
    void add(const std::string& name, const std::string& description, int64_t layer = -1,
             int64_t head = -1) {
        analysis::IndexEntry e;
        e.file = "figures/" + name;
        e.what = "figure";
        e.description = description;
        e.layer = layer;
        e.head = head;
        entries.push_back(std::move(e));
    }
};

void term_figures(const analysis::AnalysisOutput& out, int64_t head, Figures& figs) {
    const analysis::TermMaps& t = *out.terms;
    const int64_t H = t.word_word.size(0);
    struct Term {
        const char* name;
        const char* label;
        const torch::Tensor* map;
        double analysis::TermSpread::*field;
    };
    const Term terms[] = {
        {"word_word", "word \u2192 word", &t.word_word, &analysis::TermSpread::word_word},
        {"word_pos", "word \u2192 position", &t.word_pos, &analysis::TermSpread::word_pos},
        {"pos_word", "position \u2192 word", &t.pos_word, &analysis::TermSpread::pos_word},
        {"pos_pos", "position \u2192 position", &t.pos_pos, &analysis::TermSpread::pos_pos},
    };
    auto panel = [&](const Term& term, int64_t h, bool with_head) {
        const auto hs = static_cast<size_t>(h);
        const double u = t.stats.spread[hs].*term.field;
        const double rel = t.stats.relative[hs].*term.field;
        std::string title = (with_head ? "head " + std::to_string(h) + ": " : std::string()) +
                            term.label + "\nuniformity " + fmt(u);
        if (term.field != &analysis::TermSpread::word_word)
            title += " (" + fmt(rel, 2) + " \u00d7 word-word)";
        return square_map(out, (*term.map)[h], title, true, "logit", shown_positions(out));
    };
    std::vector<plt::Heatmap> one;
    for (const Term& term : terms) one.push_back(panel(term, head, false));
    const std::string name = "fig2_terms_head" + std::to_string(head) + ".png";
    plt::save_heatmap_grid_png(one, 2, figs.path(name), 520, 480,
                               model_title(out) + ": layer-0 terms of head " +
                                   std::to_string(head) + ", " + sentences_phrase(out) +
                                   shown_phrase(out));
    figs.add(name,
             "Fig. 2: the four layer-0 terms of one head (word-word, word-position, "
             "position-word, position-position), " +
                 sentences_phrase(out) + ", uniformity in the titles",
             0, head);

    std::vector<plt::Heatmap> all;
    for (int64_t h = 0; h < H; ++h)
        for (const Term& term : terms) all.push_back(panel(term, h, true));
    plt::save_heatmap_grid_png(all, 4, figs.path("fig2_terms_all_heads.png"), kCellW, kCellH,
                               model_title(out) + ": layer-0 terms per head (rows), " +
                                   sentences_phrase(out) + shown_phrase(out));
    figs.add("fig2_terms_all_heads.png",
             "Fig. 2 for every head: one row per head, columns word-word, word-position, "
             "position-word, position-position",
             0);
}

void tupe_figures(const analysis::AnalysisOutput& out, Figures& figs) {
    const analysis::TupeMaps& tupe = *out.tupe;
    const auto& corr = tupe.correlation;
    const size_t groups = corr.groups.size();
    const std::string what = std::string("positional correlation after the [CLS] reset") +
                             (corr.relative.defined() ? ", relative bias included" : "") +
                             (corr.cls_reset ? "" : " (tie-cls: no reset)");
    // The taxonomy and theta belong to positions, not sentences: tick labels are positions.
    analysis::AnalysisOutput positions_only;
    for (size_t g = 0; g < groups; ++g) {
        const auto& group = corr.groups[g];
        const int64_t H = group.total.size(0);
        const std::string scope = groups > 1 ? "layer " + std::to_string(g) : "all layers";
        const std::string stem = groups > 1 ? "_layer" + std::to_string(g) : "";
        const int64_t layer = groups > 1 ? static_cast<int64_t>(g) : -1;
        std::vector<plt::Heatmap> totals, probs;
        for (int64_t h = 0; h < H; ++h) {
            std::string label;
            if (g < tupe.patterns.size())
                label = std::string(": ") +
                        analysis::to_string(tupe.patterns[g][static_cast<size_t>(h)]);
            const std::string theta = "\u03b81 = " + fmt(group.theta1[h].item<double>()) +
                                      ", \u03b82 = " + fmt(group.theta2[h].item<double>());
            totals.push_back(square_map(positions_only, group.total[h],
                                        "head " + std::to_string(h) + label + "\n" + theta, true,
                                        "logit"));
            probs.push_back(square_map(positions_only, group.probs[h],
                                       "head " + std::to_string(h) + label, false, "probability"));
            const std::string one =
                "fig6_tupe_correlation" + stem + "_head" + std::to_string(h) + ".png";
            plt::save_heatmap_png(totals.back(), figs.path(one), 560, 520);
            figs.add(one,
                     "Fig. 6, one head: " + what + " (" + scope +
                         "), taxonomy label and "
                         "theta1/theta2 in the title",
                     layer, h);
        }
        const int cols = static_cast<int>(std::min<int64_t>(H, 4));
        const std::string grid = "fig6_tupe_correlation" + stem + ".png";
        plt::save_heatmap_grid_png(totals, cols, figs.path(grid), kCellW, kCellH + 20,
                                   model_title(out) + ": " + what + " (" + scope + ")");
        figs.add(grid,
                 "Fig. 6: " + what + " per head (" + scope +
                     "), each titled with its taxonomy label and theta1/theta2",
                 layer);
        const std::string pgrid = "tupe_probs" + stem + ".png";
        plt::save_heatmap_grid_png(probs, cols, figs.path(pgrid), kCellW, kCellH,
                                   model_title(out) +
                                       ": row softmax of the positional "
                                       "correlation (" +
                                       scope + ")");
        figs.add(pgrid,
                 "row softmax of the positional correlation per head (what positions alone "
                 "would attend to; the taxonomy is computed on these)",
                 layer);
    }
}

void cls_figures(const analysis::AnalysisOutput& out, Figures& figs) {
    const analysis::ClsAttention& cls = out.cls;
    const int64_t L = cls.from_cls.size(0), H = cls.from_cls.size(1);
    const int64_t T = shown_positions(out);
    const int panel_h = static_cast<int>(std::clamp<int64_t>(140 + 26 * L, 260, 640));
    const int panel_w = static_cast<int>(std::clamp<int64_t>(300 + 8 * T, 620, 1100));
    const std::string mean = ", mean over heads, " + sentences_phrase(out);
    plt::save_heatmap_grid_png(
        {layer_map(out, cls.from_cls.mean(1), "attention from [CLS] to each key" + mean, "key"),
         layer_map(out, cls.to_cls.mean(1), "attention from each query to [CLS]" + mean, "query")},
        1, figs.path("cls_heatmaps.png"), panel_w, panel_h,
        model_title(out) + ": [CLS] attention" + shown_phrase(out));
    figs.add("cls_heatmaps.png",
             "[CLS] attention per layer x position, mean over heads: from "
             "[CLS] (top) and to [CLS] (bottom)");

    std::vector<plt::Heatmap> per_head;
    for (int64_t h = 0; h < H; ++h) {
        per_head.push_back(layer_map(out, cls.from_cls.select(1, h),
                                     "head " + std::to_string(h) + ": from [CLS]", "key"));
        per_head.push_back(layer_map(out, cls.to_cls.select(1, h),
                                     "head " + std::to_string(h) + ": to [CLS]", "query"));
    }
    plt::save_heatmap_grid_png(
        per_head, 2, figs.path("cls_heatmaps_heads.png"), panel_w, panel_h,
        model_title(out) + ": [CLS] attention per head (rows)" + shown_phrase(out));
    figs.add("cls_heatmaps_heads.png",
             "[CLS] attention per layer x position for each head: from [CLS] (left), to [CLS] "
             "(right)");

    for (const bool from : {true, false}) {
        const torch::Tensor& m = from ? cls.from_cls : cls.to_cls;
        std::vector<plt::LinePlot> plots;
        for (int64_t l = 0; l < L; ++l) {
            plt::LinePlot p;
            p.title = "layer " + std::to_string(l);
            p.x_label = from ? "key position" : "query position";
            p.y_label = from ? "attention from [CLS]" : "attention to [CLS]";
            if (!out.axis_labels.empty())
                p.x_tick_labels.assign(out.axis_labels.begin(), out.axis_labels.begin() + T);
            p.y_min = 0;
            for (int64_t h = 0; h < H; ++h) {
                plt::Series s;
                s.name = "head " + std::to_string(h);
                for (int64_t j = 0; j < T; ++j) s.x.push_back(static_cast<double>(j));
                s.y = to_values(m[l][h].slice(0, 0, T));
                p.series.push_back(std::move(s));
            }
            plots.push_back(std::move(p));
        }
        const std::string name = from ? "cls_from_lines.png" : "cls_to_lines.png";
        plt::save_line_plot_grid_png(plots, static_cast<int>(std::min<int64_t>(L, 3)),
                                     figs.path(name), 560, 380,
                                     model_title(out) +
                                         (from ? ": attention from [CLS], one "
                                                 "curve per head"
                                               : ": attention to [CLS], one "
                                                 "curve per head") +
                                         shown_phrase(out));
        figs.add(name, std::string("attention ") + (from ? "from" : "to") +
                           " [CLS] against position, one panel per layer, one curve per head");
    }

    auto stat_map = [&](const torch::Tensor& m, const std::string& title, const std::string& unit) {
        plt::Heatmap h = heatmap(m, title, false);
        for (int l = 0; l < h.rows; ++l) h.row_labels.push_back("layer " + std::to_string(l));
        h.x_label = "head";
        h.value_label = unit;
        return h;
    };
    plt::save_heatmap_grid_png(
        {stat_map(cls.entropy, "entropy of the [CLS] row", "nats"),
         stat_map(cls.mean_distance, "mean key position from [CLS]", "tokens"),
         stat_map(cls.first_k_mass,
                  "[CLS] mass on the first " + std::to_string(cls.k) + " positions",
                  "probability")},
        3, figs.path("cls_statistics.png"), 460, std::max(300, 120 + 30 * static_cast<int>(L)),
        model_title(out) + ": [CLS] statistics per layer and head");
    figs.add("cls_statistics.png",
             "[CLS] row statistics per layer (rows) and head (columns): entropy, mean key "
             "position, first-k mass");
}

/// Rollout, flow and value-weighted norms: the [CLS] row under each measure, and the maps.
void flow_figures(const analysis::AnalysisOutput& out, Figures& figs) {
    const analysis::FlowMaps& flow = *out.flow;
    const int64_t L = flow.rollout.size(0), H = flow.norm_head.size(1);
    const int64_t T = shown_positions(out);
    const int panel_h = static_cast<int>(std::clamp<int64_t>(140 + 26 * L, 240, 640));
    const int panel_w = static_cast<int>(std::clamp<int64_t>(300 + 8 * T, 860, 1100));
    // The colour scale is set by the positions after [CLS]: rollout and flow put 0.25-0.65 on
    // [CLS] itself (the residual), which would leave every word the same colour. [CLS]'s own
    // share is printed and in flow/cls_sources.csv.
    auto share = [&](const torch::Tensor& m, const std::string& title) {
        plt::Heatmap h = layer_map(out, m, title, "input / key");
        h.value_label = "share";
        if (T > 1) {
            h.range_min = 0;
            h.range_max = m.slice(-1, 1, T).max().item<double>();
        }
        return h;
    };
    plt::save_heatmap_grid_png(
        {share(flow.cls_attention, "attention from [CLS] (mean over heads)"),
         share(flow.cls_norm_share,
               "value-weighted: share of \u2016\u03a3_h \u03b1_0j f_h(x_j)\u2016 (Kobayashi "
               "et al. 2020)"),
         share(flow.rollout.select(1, 0), "attention rollout into [CLS] (Abnar & Zuidema 2020)"),
         share(flow.flow_cls, "attention flow into [CLS], first " +
                                  std::to_string(flow.flow_sentences) + " sentences")},
        1, figs.path("cls_flow.png"), panel_w, panel_h,
        model_title(out) + "\nwhere what [CLS] gathers comes from, " + sentences_phrase(out) +
            "\ncolour scales from the positions after [CLS]" + shown_phrase(out));
    figs.add("cls_flow.png",
             "the [CLS] row per layer x position under four measures: raw attention, "
             "value-weighted norm share, rollout, flow");

    std::vector<plt::Heatmap> rollouts, norms;
    for (int64_t l = 0; l < L; ++l) {
        rollouts.push_back(square_map(
            out, flow.rollout[l], "rollout through layer " + std::to_string(l), false, "share", T));
        norms.push_back(
            square_map(out, flow.norm_layer[l],
                       "layer " + std::to_string(l) + ": \u2016\u03a3_h \u03b1_ij f_h(x_j)\u2016",
                       false, "norm", T));
    }
    const int cols = static_cast<int>(std::min<int64_t>(L, 4));
    plt::save_heatmap_grid_png(
        rollouts, cols, figs.path("rollout.png"), kCellW, kCellH,
        model_title(out) + ": attention rollout, " + sentences_phrase(out) + shown_phrase(out));
    figs.add("rollout.png", "attention rollout through each layer (output x input position)");
    plt::save_heatmap_grid_png(norms, cols, figs.path("value_norms.png"), kCellW, kCellH,
                               model_title(out) + ": value-weighted attention norms per layer, " +
                                   sentences_phrase(out) + shown_phrase(out));
    figs.add("value_norms.png", "value-weighted attention norm of each layer (query x key)");

    std::vector<plt::Heatmap> heads;
    for (int64_t h = 0; h < H; ++h) {
        heads.push_back(share(flow.cls_attention_head.select(1, h),
                              "head " + std::to_string(h) + ": attention from [CLS]"));
        heads.push_back(
            share(flow.cls_norm_share_head.select(1, h),
                  "head " + std::to_string(h) + ": share of \u03b1_0j \u2016f_h(x_j)\u2016"));
    }
    plt::save_heatmap_grid_png(heads, 2, figs.path("cls_value_norms_heads.png"), panel_w, panel_h,
                               model_title(out) +
                                   ": [CLS] row per head, attention (left) and value-weighted "
                                   "(right)" +
                                   shown_phrase(out));
    figs.add("cls_value_norms_heads.png",
             "the [CLS] row per head and layer: attention (left) against its value-weighted "
             "share (right)");
}

/// The position vectors' cosine similarity and their PCA path, coloured by position.
void position_figures(const analysis::AnalysisOutput& out, Figures& figs) {
    const analysis::PositionVectors& p = *out.position_vectors;
    const int64_t P = p.cosine.size(0);
    plt::Heatmap cos = heatmap(p.cosine, "cosine similarity of the position vectors", true);
    cos.x_label = cos.y_label = "position";
    cos.value_label = "cosine";
    cos.range_min = -1;
    cos.range_max = 1;
    const std::string title = model_title(out) + "\n" + p.source;  // long: two lines
    plt::save_heatmap_grid_png({cos}, 1, figs.path("position_cosine.png"), 860, 760, title);
    figs.add("position_cosine.png", "cosine similarity of the position vectors (P x P)");

    // Coloured by position: bins of consecutive positions, each a series; more than ten get
    // hues in order around the colour wheel (plotting's series colours).
    const int64_t bins = std::min<int64_t>(P, 16), per = (P + bins - 1) / bins;
    plt::LinePlot plot;
    plot.title = "PCA of the position vectors: PC1 " + fmt(100 * p.explained[0], 2) + "%, PC2 " +
                 fmt(100 * p.explained[1], 2) + "% of the variance";
    plot.x_label = "PC1";
    plot.y_label = "PC2";
    plot.sequential_colors = true;
    for (int64_t b0 = 0; b0 < P; b0 += per) {
        const int64_t b1 = std::min(P, b0 + per);
        plt::Series s;
        s.name = "positions " + std::to_string(b0) + "-" + std::to_string(b1 - 1);
        s.scatter = true;
        s.x = to_values(p.pca.slice(0, b0, b1).select(1, 0));
        s.y = to_values(p.pca.slice(0, b0, b1).select(1, 1));
        plot.series.push_back(std::move(s));
    }
    plt::save_line_plot_grid_png({plot}, 1, figs.path("position_pca.png"), 860, 700, title);
    figs.add("position_pca.png",
             "the position vectors projected on their first two principal axes, coloured by "
             "position");
}

/// Loss and accuracy of the MLM head on each layer's hidden state, with their floors.
void lens_figure(const analysis::AnalysisOutput& out, Figures& figs) {
    const analysis::LogitLensReport& r = *out.lens;
    std::vector<std::string> ticks;
    plt::Series loss, accuracy, entropy, majority;
    for (const auto& row : r.rows) {
        const auto x = static_cast<double>(row.layer + 1);
        ticks.push_back(row.layer < 0 ? "emb." : "L" + std::to_string(row.layer));
        loss.x.push_back(x), loss.y.push_back(row.loss);
        accuracy.x.push_back(x), accuracy.y.push_back(row.accuracy);
        entropy.x.push_back(x), entropy.y.push_back(r.unigram_loss);
        majority.x.push_back(x), majority.y.push_back(r.majority_accuracy);
    }
    loss.name = "loss";
    accuracy.name = "accuracy";
    loss.markers = accuracy.markers = true;
    entropy.name = "unigram frequencies of the text";
    majority.name = "always its most frequent token";
    entropy.dashed = majority.dashed = true;
    plt::LinePlot a, b;
    a.title = "MLM loss at [MASK]";
    a.y_label = "nats";
    a.series = {loss, entropy};
    b.title = "accuracy at [MASK]";
    b.y_label = "accuracy";
    b.y_min = 0;
    b.series = {accuracy, majority};
    a.x_tick_labels = b.x_tick_labels = ticks;
    a.x_label = b.x_label = "hidden state after the embeddings (emb.) or layer l (Ll)";
    plt::save_line_plot_grid_png({a, b}, 2, figs.path("logit_lens.png"), 520, 380,
                                 model_title(out) + "\nlogit lens, " + std::to_string(r.masked) +
                                     " masked tokens of " + r.source);
    figs.add("logit_lens.png",
             "logit lens: loss and accuracy of the MLM head on each layer's hidden state at the "
             "masked tokens, with the context-free floors (unigram loss, majority accuracy)");
}

Figures model_figures(const analysis::AnalysisOutput& out, const fs::path& dir, int64_t head) {
    Figures figs{dir, {}};
    if (out.terms) term_figures(out, head, figs);
    if (out.tupe) tupe_figures(out, figs);
    cls_figures(out, figs);
    if (out.flow) flow_figures(out, figs);
    if (out.position_vectors) position_figures(out, figs);
    if (out.lens) lens_figure(out, figs);
    return figs;
}

/// The two models' [CLS] maps side by side, each row on one colour scale.
void compare_figure(const analysis::AnalysisOutput& a, const analysis::AnalysisOutput& b,
                    Figures& figs) {
    std::vector<plt::Heatmap> maps;
    for (const bool from : {true, false}) {
        const torch::Tensor ma = (from ? a.cls.from_cls : a.cls.to_cls).mean(1);
        const torch::Tensor mb = (from ? b.cls.from_cls : b.cls.to_cls).mean(1);
        const double hi = std::max(ma.max().item<double>(), mb.max().item<double>());
        const std::string what = from ? "from [CLS]" : "to [CLS]";
        for (const auto* out : {&a, &b}) {
            plt::Heatmap h =
                layer_map(*out, out == &a ? ma : mb,
                          model_title(*out) + "\nattention " + what + ", mean over heads",
                          from ? "key" : "query");
            h.range_min = 0;
            h.range_max = hi;
            maps.push_back(std::move(h));
        }
    }
    const int64_t L = std::max(a.cls.from_cls.size(0), b.cls.from_cls.size(0));
    const int64_t T = std::max(shown_positions(a), shown_positions(b));
    plt::save_heatmap_grid_png(maps, 2, figs.path("compare_cls.png"),
                               static_cast<int>(std::clamp<int64_t>(300 + 8 * T, 620, 1000)),
                               static_cast<int>(std::clamp<int64_t>(160 + 26 * L, 280, 640)),
                               "[CLS] attention: " + a.config.preset + " vs " + b.config.preset +
                                   " (shared colour scale per row)" + shown_phrase(a));
    figs.add("compare_cls.png",
             "[CLS] attention of both models side by side (left: this model, "
             "right: compare/), from [CLS] (top) and to [CLS] (bottom), one "
             "colour scale per row");
}

#endif  // TUPE_WITH_QT

struct Timing {
    double analysis = 0, files = 0, figures = 0;
};

/// Analyses one model, writes its files and figures under dir; returns the analysis.
analysis::AnalysisOutput analyze_one(const std::string& spec, const Args& args,
                                     const std::vector<std::string>& sentences,
                                     const analysis::AnalyzeOptions& options, const fs::path& dir,
                                     bool primary, bool figures, Timing& timing,
                                     std::vector<analysis::IndexEntry>& entries) {
    LoadedModel m = load_model(spec, args.get("vocab"), args.has("cased"), primary);
    auto t0 = Clock::now();
    // The probes run at the length the model was trained at, unless told otherwise.
    analysis::AnalyzeOptions own = options;
    if (own.property_options.length == 0 && m.train_length > 0)
        own.property_options.length =
            std::min<int64_t>(m.train_length, m.model->config().max_position_embeddings);
    // Position vectors up to the training length: later rows of a learned table were never
    // trained.
    if (m.train_length >= 2) own.position_rows = m.train_length;
    // The logit lens scores held-out text: a checkpoint's own validation documents (as `tupe
    // ablate`) when its corpus is at hand, else the sentences.
    std::vector<std::string> lens_notes;
    if (!m.has_mlm_head && (own.logit_lens || own.order_probe)) {
        own.logit_lens = own.order_probe = false;
        lens_notes.push_back(
            "logit lens and order probe skipped: they score MLM predictions and this folder "
            "has no MLM head");
    }
    if (own.logit_lens && m.config) {
        if (fs::is_regular_file(m.config->data.corpus)) {
            own.lens_stream = validation_stream(*m.config, *m.tokenizer);
            own.lens_options.source = m.config->data.corpus + " (held-out documents)";
        } else {
            lens_notes.push_back("logit lens: the checkpoint's corpus " + m.config->data.corpus +
                                 " is not here; it scores the sentences instead (not held out)");
        }
    }
    analysis::AnalysisOutput out = analysis::analyze_model(m.model, *m.tokenizer, sentences, own);
    out.notes.insert(out.notes.begin(), m.notes.begin(), m.notes.end());
    out.notes.insert(out.notes.end(), lens_notes.begin(), lens_notes.end());
    out.model_name = m.name;
    timing.analysis += seconds_since(t0);
    // Checked before anything is written: the head of the single-head Fig. 2 figure.
    const int64_t head = args.get_int("head"), H = out.config.num_attention_heads;
    if (head < 0 || head >= H)
        throw UsageError("--head " + std::to_string(head) + " outside 0.." + std::to_string(H - 1));
    t0 = Clock::now();
    entries = analysis::write_analysis(out, dir.string());
    timing.files += seconds_since(t0);
#if TUPE_WITH_QT
    if (figures) {
        t0 = Clock::now();
        Figures figs = model_figures(out, dir, head);
        entries.insert(entries.end(), figs.entries.begin(), figs.entries.end());
        analysis::write_analysis_index(out, dir.string(), entries);
        timing.figures += seconds_since(t0);
    }
#endif
    return out;
}

std::string cell(double x, int precision = 3) {
    return std::isnan(x) ? "-" : analysis::fixed_number(x, precision);
}

/// Per layer, the head means of the main properties; the per-head numbers are in the files.
void print_properties(const analysis::PropertiesReport& p) {
    std::cout << "properties (" << p.windows << " window(s) x " << p.length
              << " tokens; Delta_pos = logit at the true positions minus with all positions "
                 "equal; per-head values in properties/properties.csv):\n";
    std::cout << "  layer  pos.share  static  mono.L  mono.R  toeplitz  symmetry  rank90  "
                 "locality  distance  entropy  patterns\n";
    for (size_t l = 0; l < p.layers.size(); ++l) {
        const auto& m = p.layers[l].mean;
        std::map<std::string, int> patterns;
        for (const auto& h : p.layers[l].heads) ++patterns[analysis::to_string(h.pattern)];
        std::string pat;
        for (const auto& [name, count] : patterns)
            pat += (pat.empty() ? "" : " ") + std::to_string(count) + " " + name;
        std::cout << "  " << std::setw(5) << l << "  " << std::setw(9) << cell(m.positional_share)
                  << "  " << std::setw(6) << cell(m.static_share) << "  " << std::setw(6)
                  << cell(m.monotonicity_left, 2) << "  " << std::setw(6)
                  << cell(m.monotonicity_right, 2) << "  " << std::setw(8)
                  << cell(m.translation_invariance) << "  " << std::setw(8) << cell(m.symmetry)
                  << "  " << std::setw(6) << cell(m.rank90, 1) << "  " << std::setw(8)
                  << cell(m.locality) << "  " << std::setw(8) << cell(m.mean_distance) << "  "
                  << std::setw(7) << cell(m.entropy) << "  " << pat << "\n";
    }
}

void print_order_probe(const analysis::OrderProbeReport& r) {
    std::cout << "order probe (" << r.masked << " masked tokens in " << r.windows << " window(s) x "
              << r.length << "): unperturbed loss " << cell(r.loss, 4) << " nats; change with\n ";
    for (const auto& row : r.rows)
        std::cout << " "
                  << (row.kind == "ngram_shuffle"
                          ? std::string("shuffled ") + std::to_string(row.n) + "-grams"
                          : std::to_string(row.n) + " swaps")
                  << " " << (row.change >= 0 ? "+" : "") << cell(row.change, 4) << ";";
    std::cout << "\n";
}

/// Per layer, where the [CLS] row's mass lies under each measure (the per-head rows are in
/// flow/cls_sources.csv).
void print_cls_sources(const analysis::FlowMaps& flow) {
    std::cout << "[CLS] row: share on [CLS] / words / [SEP] (mean over sentences; flow over the "
                 "first "
              << flow.flow_sentences << "; per head in flow/cls_sources.csv):\n";
    std::cout << "  layer  attention           value-weighted      rollout             flow\n";
    std::map<int64_t, std::map<std::string, const analysis::ClsSources*>> rows;
    for (const auto& s : flow.sources)
        if (s.head < 0) rows[s.layer][s.measure] = &s;
    for (const auto& [layer, measures] : rows) {
        std::cout << "  " << std::setw(5) << layer;
        for (const char* m : {"attention", "value_norm", "rollout", "flow"}) {
            const auto it = measures.find(m);
            std::string c = "-";
            if (it != measures.end())
                c = cell(it->second->cls, 2) + " / " + cell(it->second->words, 2) + " / " +
                    cell(it->second->sep, 2);
            std::cout << "  " << std::left << std::setw(18) << c << std::right;
        }
        std::cout << "\n";
    }
}

void print_lens(const analysis::LogitLensReport& r) {
    std::cout << "logit lens (" << r.masked << " masked tokens, " << r.windows << " window(s) x "
              << r.length << " of " << r.source << "; floors: unigram " << cell(r.unigram_loss, 3)
              << " nats, majority " << cell(r.majority_accuracy, 3) << "):\n ";
    for (const auto& row : r.rows)
        std::cout << " "
                  << (row.layer < 0 ? std::string("embeddings") : "L" + std::to_string(row.layer))
                  << " " << cell(row.loss, 3) << " nats / " << cell(row.accuracy, 3) << ";";
    std::cout << "\n";
}

void print_summary(const analysis::AnalysisOutput& out, const fs::path& dir,
                   const std::vector<analysis::IndexEntry>& entries) {
    size_t figures = 0;
    for (const auto& e : entries) figures += e.what == "figure";
    std::cout << "wrote " << dir.string() << ": " << out.config.preset << ", " << out.tokens.size()
              << " sentence(s) x " << out.input_ids.size(1) << " tokens, "
              << entries.size() - figures << " data files, " << figures << " figures, "
              << out.forward_passes << " forward pass(es)\n";
    for (const auto& note : out.notes) std::cout << "  note: " << note << "\n";
    for (const auto& s : out.skipped)
        std::cout << "  skipped " << s.what << ": " << s.reason << "\n";
    if (out.terms && fs::exists(dir / "index.json")) {
        // The paper's Fig. 2 reading, decided as `tupe claims` decides claim 5 for a study.
        const analysis::AnalysisIndex index =
            analysis::read_index_json((dir / "index.json").string());
        const experiments::TermUniformityTest t = experiments::term_uniformity_test({&index});
        if (t.verdict != experiments::Verdict::kNotRun)
            std::cout << "Fig. 2, layer 0 (claim 5's test): " << t.evidence << ": "
                      << experiments::to_string(t.verdict) << "\n";
    }
    if (out.properties) print_properties(*out.properties);
    if (out.order) print_order_probe(*out.order);
    if (out.flow) print_cls_sources(*out.flow);
    if (out.lens) print_lens(*out.lens);
}

}  // namespace

int cmd_analyze(const Argv& argv) {
    Args args(argv, command_spec("analyze"));
    if (args.positionals().size() != 1) throw UsageError("expected one CHECKPOINT");
    const std::string spec = args.positionals()[0];
    const fs::path dir = args.required("out");
    if (args.has("text") == args.has("corpus"))
        throw UsageError("give exactly one of --text and --corpus");
    if (args.has("sentences") && !args.has("corpus"))
        throw UsageError("--sentences goes with --corpus");
    engine::apply_thread_count(args.get_int("threads"));
    const bool record = args.has("db") || args.has("experiment") || args.has("run");
    if (record && !(args.has("db") && args.has("experiment") && args.has("run")))
        throw UsageError("--db, --experiment and --run go together");
    // Checked before the analysis runs: the run to record against must exist.
    std::optional<experiments::ResultStore> store;
    int64_t run_id = 0;
    if (record) {
        if (!fs::exists(args.get("db")))
            throw engine::InputError(args.get("db"), "no results database");
        store.emplace(experiments::ResultStore::open(args.get("db")));
        run_id = experiments::find_run_id(*store, args.get("experiment"), args.get("run"));
    }

    analysis::AnalyzeOptions options;
    options.batch_size = args.get_int("batch");
    if (options.batch_size < 1) throw UsageError("--batch must be >= 1");
    options.max_tokens = args.get_int("max-tokens");
    if (options.max_tokens < 0 || (args.has("max-tokens") && options.max_tokens < 2))
        throw UsageError("--max-tokens must be >= 2 ([CLS] and [SEP])");
    options.properties = !args.has("no-properties");
    options.order_probe = args.has("order-probe");
    options.property_options.length = args.get_int("probe-length", 0);
    if (args.has("probe-length") && options.property_options.length < 4)
        throw UsageError("--probe-length must be >= 4 tokens ([CLS], [SEP] and two more)");
    options.property_options.windows = args.get_int("probe-windows");
    if (options.property_options.windows < 1) throw UsageError("--probe-windows must be >= 1");
    options.order_options.windows = options.property_options.windows;
    options.flow = !args.has("no-flow");
    options.flow_sentences = args.get_int("flow-sentences");
    if (options.flow_sentences < 0) throw UsageError("--flow-sentences must be >= 0");
    options.logit_lens = !args.has("no-lens");
    options.lens_options.windows = args.get_int("lens-windows");
    if (options.lens_options.windows < 1) throw UsageError("--lens-windows must be >= 1");
    std::vector<std::string> sentences;
    if (args.has("text")) {
        sentences = {args.get("text")};
        options.truncate = false;
        options.source = "--text";
    } else {
        const long long n = args.get_int("sentences");
        if (n < 1) throw UsageError("--sentences must be >= 1");
        sentences = analysis::read_sentences(args.get("corpus"), n);
        options.source = args.get("corpus");
    }

    bool figures = !args.has("no-figures");
#if TUPE_WITH_QT
    // Qt needs an application object for QCustomPlot; offscreen, created once for all figures.
    std::unique_ptr<plt::OffscreenSession> session;
    if (figures) session = std::make_unique<plt::OffscreenSession>();
#else
    if (figures)
        std::cerr << "tupe analyze: figures need the Qt build (configure with -DTUPE_WITH_QT=ON); "
                     "writing the data files only\n";
    figures = false;
#endif

    const auto start = Clock::now();
    Timing timing;
    std::vector<analysis::IndexEntry> entries;
    analysis::AnalysisOutput first =
        analyze_one(spec, args, sentences, options, dir, true, figures, timing, entries);
    print_summary(first, dir, entries);
    if (args.has("compare")) {
        std::vector<analysis::IndexEntry> compare_entries;
        analysis::AnalysisOutput second =
            analyze_one(args.get("compare"), args, sentences, options, dir / "compare", false,
                        figures, timing, compare_entries);
        print_summary(second, dir / "compare", compare_entries);
#if TUPE_WITH_QT
        if (figures) {
            const auto t0 = Clock::now();
            Figures figs{dir, {}};
            compare_figure(first, second, figs);
            entries.insert(entries.end(), figs.entries.begin(), figs.entries.end());
            analysis::write_analysis_index(first, dir.string(), entries);
            timing.figures += seconds_since(t0);
        }
#endif
    }
    if (store) {
        const auto recorded = experiments::record_analysis_artifacts(*store, run_id, dir.string());
        std::cout << "recorded " << recorded.size() << " artifacts in " << args.get("db")
                  << " (experiment " << args.get("experiment") << ", run " << args.get("run")
                  << ")\n";
    }
    std::cout << "time: analysis " << fmt(timing.analysis) << " s, files " << fmt(timing.files)
              << " s, figures " << fmt(timing.figures) << " s, total " << fmt(seconds_since(start))
              << " s (" << at::get_num_threads()
              << " threads, model loading included in the total)\n";
    return 0;
}

}  // namespace cli
