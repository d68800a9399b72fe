// Pseudo-log-likelihood scoring (experiments/zero_shot.h).
#include "experiments/zero_shot.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace experiments {

std::vector<double> pseudo_log_likelihoods(engine::BertForMaskedLM& model,
                                           const engine::WordPieceTokenizer& tokenizer,
                                           const std::vector<std::string>& texts, int64_t max_len,
                                           int64_t batch_tokens) {
    if (max_len < 3) throw std::invalid_argument("pseudo_log_likelihoods: max_len must be >= 3");
    std::vector<std::vector<int64_t>> ids(texts.size());
    for (size_t i = 0; i < texts.size(); ++i)
        ids[i] = tokenizer.encode(texts[i], {}, max_len).input_ids;
    // Texts by length, so a batch pads little.
    std::vector<size_t> order(texts.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });

    std::vector<double> pll(texts.size(), 0.0);
    const bool was_training = model->is_training();
    model->eval();
    torch::NoGradGuard no_grad;
    const torch::Device device = model->parameters().front().device();
    const int64_t pad = tokenizer.vocab().pad_id(), mask = tokenizer.vocab().mask_id();

    size_t next = 0;
    while (next < order.size()) {
        // Texts [next, end) of the sorted order: their masked copies (one per wordpiece, the
        // [CLS] and [SEP] around it never masked) padded to the longest, within the budget.
        size_t end = next;
        int64_t rows = 0, width = 0;
        while (end < order.size()) {
            const auto len = static_cast<int64_t>(ids[order[end]].size());
            const int64_t copies = std::max<int64_t>(0, len - 2);
            if (end > next && (rows + copies) * std::max(width, len) > batch_tokens) break;
            rows += copies;
            width = std::max(width, len);
            ++end;
        }
        if (rows > 0) {
            auto input = torch::full({rows, width}, pad, torch::kLong);
            auto attention = torch::zeros({rows, width}, torch::kLong);
            auto labels = torch::full({rows, width}, int64_t{-100}, torch::kLong);
            auto in = input.accessor<int64_t, 2>();
            auto am = attention.accessor<int64_t, 2>();
            auto lb = labels.accessor<int64_t, 2>();
            std::vector<size_t> owner;  // text of each row
            int64_t r = 0;
            for (size_t k = next; k < end; ++k) {
                const auto& seq = ids[order[k]];
                const auto len = static_cast<int64_t>(seq.size());
                for (int64_t p = 1; p + 1 < len; ++p, ++r) {
                    for (int64_t t = 0; t < len; ++t) {
                        in[r][t] = seq[static_cast<size_t>(t)];
                        am[r][t] = 1;
                    }
                    in[r][p] = mask;
                    lb[r][p] = seq[static_cast<size_t>(p)];
                    owner.push_back(order[k]);
                }
            }
            auto out = model->forward(input.to(device), attention.to(device), labels.to(device));
            // Logits of the masked positions in row-major order: one per row, row order.
            const auto targets = labels.masked_select(labels.ne(-100)).to(device);
            const auto logp = torch::log_softmax(out.logits.to(torch::kFloat), -1)
                                  .gather(1, targets.unsqueeze(1))
                                  .squeeze(1)
                                  .to(torch::kDouble)
                                  .cpu();
            const auto lp = logp.accessor<double, 1>();
            for (int64_t i = 0; i < rows; ++i) pll[owner[static_cast<size_t>(i)]] += lp[i];
        }
        next = end;
    }
    if (was_training) model->train();
    return pll;
}

std::vector<double> prefer_pairs(const std::vector<double>& pll_a,
                                 const std::vector<double>& pll_b) {
    if (pll_a.size() != pll_b.size())
        throw std::invalid_argument("prefer_pairs: " + std::to_string(pll_a.size()) + " vs " +
                                    std::to_string(pll_b.size()) + " scores");
    std::vector<double> out(pll_a.size());
    for (size_t i = 0; i < out.size(); ++i) {
        const double tie = kPairTieNats * (1.0 + std::max(std::abs(pll_a[i]), std::abs(pll_b[i])));
        out[i] = pll_b[i] - pll_a[i] > tie ? 1.0 : 0.0;
    }
    return out;
}

}  // namespace experiments
