// Zero-shot scoring of minimal pairs by a pretrained masked language model: the
// pseudo-log-likelihood of a text (Salazar, Liang, Nguyen, Kirchhoff 2020, "Masked Language
// Model Scoring"): the sum over its wordpieces of log p(wordpiece | the text with that one
// wordpiece replaced by [MASK]). The pair tasks of synthetic_tasks.h ask which of two orders
// of the same words the model prefers; no classifier is trained, so there is no learning
// rate, no fine-tuning seed and no recipe between the pretrained model and the number.
#pragma once

#include <string>
#include <vector>

#include "engine/bert.h"
#include "engine/tokenizer.h"

namespace experiments {

/// The pseudo-log-likelihood (nats) of every text: encoded as [CLS] text [SEP] (truncated to
/// max_len tokens), each of its wordpieces masked in turn, all masked copies of a batch of
/// texts of similar length run through the model in one forward pass of at most
/// batch_tokens tokens. A text of no wordpieces scores 0. Runs on the model's device, without
/// gradients, in eval mode (the caller's mode is restored).
std::vector<double> pseudo_log_likelihoods(engine::BertForMaskedLM& model,
                                           const engine::WordPieceTokenizer& tokenizer,
                                           const std::vector<std::string>& texts, int64_t max_len,
                                           int64_t batch_tokens = 16384);

/// Two pseudo-log-likelihoods closer than kPairTieNats * (1 + the larger magnitude) are a tie:
/// float sums over the same terms in another order differ by about 1e-7 of their size, while
/// two orders a trained model tells apart differ by hundredths of a nat or more.
inline constexpr double kPairTieNats = 1e-5;

/// One prediction per pair (a[i], b[i]): 1 when b's pseudo-log-likelihood is higher, else 0.
/// A tie, as every pair gets from a model blind to order, predicts 0, so on the balanced
/// pair tasks such a model scores exactly chance.
std::vector<double> prefer_pairs(const std::vector<double>& pll_a,
                                 const std::vector<double>& pll_b);

}  // namespace experiments
