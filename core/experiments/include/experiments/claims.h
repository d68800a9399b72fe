// The paper's claims as functions of stored results (`tupe claims`): each returns supported /
// contradicted / inconclusive / not run, with the numbers, the seeds and the test behind the
// verdict. Ke, He, Liu, "Rethinking Positional Encoding in Language Pre-training" (ICLR 2021):
// Table 1, Fig. 2, Fig. 5, Fig. 6 and Sec. 3.3; claim 8 asks whether claims 1 and 3b carry
// over to ModernBERT's backbone (Warner et al. 2024). Decision rules are fixed here, before any
// result is looked at, and stated in each claim's `test`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "analysis/analysis_index.h"
#include "engine/config.h"
#include "experiments/result_store.h"

namespace experiments {

/// kPartlyTested: every comparison that was run agrees with the paper, but some of the
/// comparisons the claim is about were not run (3a with one of its three adjacent pairs): not
/// evidence for the whole claim.
enum class Verdict { kSupported, kContradicted, kInconclusive, kNotRun, kPartlyTested };
/// "supported", "contradicted", "inconclusive", "not run", "partly tested".
std::string to_string(Verdict verdict);

/// Where the app shows a claim's runs: the curves, the GLUE results or the correlation maps;
/// kNone for a claim that reads no runs (7).
enum class AppView { kNone, kCurves, kGlue, kMaps };
/// "", "curves", "glue", "maps": the "view" of the JSON that the app reads.
std::string to_string(AppView view);

struct Claim {
    std::string id;     ///< "1", "2", "2b", "3a", "3b", "4", "5", "6", "7", "8".
    std::string title;  ///< What the paper says, in one line.
    Verdict verdict = Verdict::kNotRun;
    std::string evidence;              ///< The numbers behind the verdict, one line.
    std::string test;                  ///< The test and the decision rule.
    std::vector<std::string> details;  ///< One line per pair, seed or head.
    AppView view = AppView::kNone;     ///< Where the app shows it.
    std::vector<std::string> runs;     ///< Pretrain run names the claim reads.
    /// With an lr grid (variants "<preset>,lr=<x>" at two or more lrs), claims 1-4 and 8 are judged
    /// at every lr too: one entry per lr in numeric order, and lr_summary says whether the
    /// verdict (judged at each variant's best lr) holds at every lr, only at the best lrs, or
    /// depends on the lr. Empty otherwise.
    struct AtLr {
        std::string lr;  ///< As written in the grid ("2.0e-3").
        Verdict verdict = Verdict::kNotRun;
        std::string evidence;
    };
    std::vector<AtLr> by_lr;
    std::string lr_summary;
};

/// Counts the parameters of a model of this config. Supplied by the caller (the CLI builds
/// the model with the engine), so that this library stays free of tensors.
using ParameterCounter = std::function<int64_t(const engine::ModelConfig& config)>;

/// Evaluates every claim on experiment `name` of the store. A claim whose variants or data
/// are missing is kNotRun with what is missing in its evidence. Throws
/// std::invalid_argument for an unknown experiment, StoreError for a store problem.
std::vector<Claim> evaluate_claims(ResultStore& store, const std::string& name,
                                   const ParameterCounter& count_parameters = {});

/// Claim 5's test (Fig. 2) on the analyses of one model, each an index.json: per head, the
/// spread across keys ('uniformity') of layer 0's word_pos and pos_word terms against
/// word_word; a two-sided sign test over those (head, term, analysis) comparisons. Supported if
/// p < 0.05 and most are flatter, contradicted if p < 0.05 and most are less flat, else
/// inconclusive; kNotRun without such terms. `tupe claims` runs it on a study's seeds (with
/// step 0 as the control), `tupe analyze` on the model it analyses.
struct TermUniformityTest {
    int64_t flatter = 0, steeper = 0;  ///< comparisons with x < word_word, x > word_word
    std::vector<double> ratios;        ///< x / word_word, per comparison
    double median_ratio = 0, p = 1;
    Verdict verdict = Verdict::kNotRun;
    /// "k of n (head, term) comparisons flatter than word-word, median spread ratio r (sign
    /// test p=...)".
    std::string evidence;
};
TermUniformityTest term_uniformity_test(const std::vector<const analysis::AnalysisIndex*>& indexes);

enum class ClaimsFormat { kTable, kMarkdown, kJson };
/// "table", "markdown", "json"; throws std::invalid_argument otherwise.
ClaimsFormat claims_format_from_string(const std::string& name);
std::string render_claims(const std::string& experiment, const std::vector<Claim>& claims,
                          ClaimsFormat format);

}  // namespace experiments
