// `tupe fill-mask`: the MLM head's log-probabilities at the [MASK] tokens of one sentence (the
// head as BertForMaskedLMImpl::forward applies it: transform, then the decoder tied to the word
// embeddings plus cls.predictions.bias; log-softmax over the vocabulary).
#include "analysis/fill_mask.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/errors.h"
#include "engine/eval_mode.h"

namespace analysis {

FillMaskResult fill_mask(engine::BertForMaskedLM& model,
                         const engine::WordPieceTokenizer& tokenizer, const std::string& text,
                         int64_t top_k) {
    if (top_k < 1)
        throw std::invalid_argument("--top-k must be >= 1, got " + std::to_string(top_k));
    const engine::Vocab& vocab = tokenizer.vocab();
    // The text split at each literal [MASK], each piece tokenized on its own (BertTokenizer
    // splits on its special tokens the same way).
    static const std::string kMask = "[MASK]";
    FillMaskResult out;
    std::vector<int64_t> ids{vocab.cls_id()};
    out.tokens.push_back(vocab.token(vocab.cls_id()));
    size_t start = 0;
    while (true) {
        const size_t at = text.find(kMask, start);
        const std::string piece = text.substr(start, at == std::string::npos ? at : at - start);
        for (const auto& t : tokenizer.tokenize(piece)) {
            ids.push_back(vocab.id(t));
            out.tokens.push_back(t);
        }
        if (at == std::string::npos) break;
        out.masks.push_back({static_cast<int64_t>(ids.size()), {}});
        ids.push_back(vocab.mask_id());
        out.tokens.push_back(kMask);
        start = at + kMask.size();
    }
    ids.push_back(vocab.sep_id());
    out.tokens.push_back(vocab.token(vocab.sep_id()));
    if (out.masks.empty())
        throw engine::InputError("--text", "no [MASK] in \"" + text + "\" (write [MASK] where a " +
                                               "token is to be predicted)");
    const engine::ModelConfig& config = model->bert->config();
    const auto T = static_cast<int64_t>(ids.size());
    if (!engine::describe_position(config).extrapolates && T > config.max_position_embeddings)
        throw engine::InputError("--text", std::to_string(T) + " tokens, more than the model's " +
                                               "max_position_embeddings = " +
                                               std::to_string(config.max_position_embeddings));

    engine::EvalModeGuard eval(*model);
    torch::NoGradGuard no_grad;
    const auto& words = model->bert->embeddings->word_embeddings->weight;
    auto input = torch::tensor(ids, torch::kLong).view({1, T}).to(words.device());
    auto hidden = model->bert->forward(input).last_hidden_state[0];  // (T, C)
    std::vector<int64_t> positions;
    for (const auto& m : out.masks) positions.push_back(m.position);
    auto at_masks =
        hidden.index_select(0, torch::tensor(positions, torch::kLong).to(hidden.device()));
    auto& pred = model->cls->predictions;
    // (M, C) x (V, C)^T + b -> (M, V), the decoder tied to the word embeddings.
    auto logits = torch::linear(pred->transform(at_masks), words, pred->bias);
    auto logprobs = torch::log_softmax(logits.to(torch::kFloat), -1).cpu();
    const int64_t k = std::min<int64_t>(top_k, logprobs.size(1));
    auto [values, indices] = logprobs.topk(k, -1);  // (M, k) each, best first
    for (size_t m = 0; m < out.masks.size(); ++m) {
        for (int64_t r = 0; r < k; ++r) {
            const int64_t id = indices[static_cast<int64_t>(m)][r].item<int64_t>();
            out.masks[m].top.push_back(
                {id < vocab.size() ? vocab.token(id) : "[unused" + std::to_string(id) + "]", id,
                 values[static_cast<int64_t>(m)][r].item<double>()});
        }
    }
    return out;
}

std::string fill_mask_json(const FillMaskResult& result) {
    nlohmann::json masks = nlohmann::json::array();
    for (const auto& m : result.masks) {
        nlohmann::json top = nlohmann::json::array();
        for (const auto& c : m.top)
            top.push_back({{"token", c.token}, {"id", c.id}, {"logprob", c.logprob}});
        masks.push_back({{"position", m.position}, {"top", top}});
    }
    return nlohmann::json{{"masks", masks}}.dump() + "\n";
}

}  // namespace analysis
