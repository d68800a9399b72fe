// The traced forward pass, the logit lens at [MASK] and the position vectors (representations.h).
#include "analysis/representations.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "analysis/extrapolate.h"
#include "engine/errors.h"
#include "engine/eval_mode.h"
#include "tensor_util.h"

namespace analysis {

using detail::check_probe_stream;
using detail::cpu_dbl;
using detail::require;
using detail::shape_of;

EncoderTrace trace_encoder(engine::BertModel& model, const torch::Tensor& input_ids,
                           const torch::Tensor& attention_mask) {
    require(input_ids.defined() && input_ids.dim() == 2,
            "trace_encoder: input_ids must be (B, T), got " + shape_of(input_ids));
    const int64_t B = input_ids.size(0), T = input_ids.size(1);
    auto& position = model->position;
    // As BertModelImpl::forward: the terms once, before the layer loop, at the true positions
    // (the caller's eval mode: no randomized positions), tables in the words' dtype.
    engine::PositionTerms terms =
        position->forward(position->positions(T, input_ids.device()),
                          model->embeddings->word_embeddings->weight.scalar_type());
    auto x = model->embeddings->forward(input_ids, {}, terms.input);  // (B, T, C)
    torch::Tensor mask_bias;
    if (attention_mask.defined())
        // (B, T) -> (B, 1, 1, T): 0 for tokens, a large negative number for padding.
        mask_bias = (1.0 - attention_mask.to(x.device(), x.dtype())).view({B, 1, 1, T}) * -1e9;
    EncoderTrace out;
    out.hidden_states.push_back(x);
    const size_t L = model->encoder->layer->size();
    for (size_t l = 0; l < L; ++l) {
        auto* layer = model->encoder->layer[l]->as<engine::BertLayerImpl>();
        torch::Tensor attention_input = x;
        if (layer->pre_layernorm && layer->attention_norm) {
            auto& ln = layer->attention->output->LayerNorm;
            attention_input = ln(x.to(ln->weight.scalar_type()));
        }
        out.attention_inputs.push_back(attention_input);
        torch::Tensor logits, probs;
        x = layer->forward(x, mask_bias, terms.for_layer(l), &logits, &probs);
        out.encoded.attention_logits.push_back(logits);
        out.encoded.attention_probs.push_back(probs);
        out.hidden_states.push_back(x);
    }
    auto& final_norm = model->encoder->final_layer_norm;
    out.encoded.last_hidden_state =
        final_norm.is_empty() ? x : final_norm(x.to(final_norm->weight.scalar_type()));
    return out;
}

// ---- the logit lens
// ------------------------------------------------------------------------------

LogitLensReport logit_lens(engine::BertForMaskedLM& model, const std::vector<int64_t>& stream,
                           const engine::Vocab& vocab, const LogitLensOptions& options) {
    const int64_t T = options.length, W = T - 2;
    require(T >= 4, "logit lens: length must be >= 4 tokens, got " + std::to_string(T));
    require(options.windows >= 1 && options.batch_size >= 1,
            "logit lens: windows and batch_size must be >= 1");
    const engine::ModelConfig& config = model->config();
    require(
        T <= config.max_position_embeddings || model->bert->position->description().extrapolates,
        "logit lens: length " + std::to_string(T) + " exceeds the position table (" +
            std::to_string(config.max_position_embeddings) + ")");
    require(vocab.size() <= config.vocab_size, "logit lens: the vocabulary does not fit the model");
    check_probe_stream(stream, W, config.vocab_size, options.source, "the logit lens");
    const int64_t nwin = std::min(options.windows, static_cast<int64_t>(stream.size()) / W);

    engine::EvalModeGuard eval(*model);
    torch::NoGradGuard no_grad;
    const auto device = model->bert->embeddings->word_embeddings->weight.device();
    auto& final_norm = model->bert->encoder->final_layer_norm;
    auto& head = model->cls->predictions;
    const int64_t L = config.num_hidden_layers;
    std::vector<double> loss_sum(static_cast<size_t>(L + 1), 0.0);
    std::vector<int64_t> correct(static_cast<size_t>(L + 1), 0);
    std::vector<int64_t> targets;
    int64_t masked = 0;
    for (int64_t first = 0; first < nwin; first += options.batch_size) {
        const int64_t B = std::min(options.batch_size, nwin - first);
        std::vector<int64_t> ids(static_cast<size_t>(B * T)), labels(ids.size(), -100);
        for (int64_t b = 0; b < B; ++b) {
            detail::fill_masked_window(
                stream, vocab, T, [&](int64_t t) { return (first + b) * W + t; }, options.seed,
                options.mask_prob, ids.data() + b * T, labels.data() + b * T);
        }
        auto opts = torch::TensorOptions().dtype(torch::kLong);
        auto input = torch::tensor(ids, opts).view({B, T}).to(device);
        auto target = torch::tensor(labels, opts).view({B * T});
        auto index = target.ne(-100).nonzero().squeeze(1);  // (M)
        if (index.numel() == 0) continue;
        target = target.index_select(0, index);
        targets.insert(targets.end(), target.data_ptr<int64_t>(),
                       target.data_ptr<int64_t>() + target.numel());
        masked += target.size(0);
        const EncoderTrace trace = trace_encoder(model->bert, input);
        for (int64_t l = 0; l <= L; ++l) {
            auto h = trace.hidden_states[static_cast<size_t>(l)];  // (B, T, C)
            if (!final_norm.is_empty()) h = final_norm(h.to(final_norm->weight.scalar_type()));
            // As BertForMaskedLMImpl::forward: the masked rows, the transform, the tied decoder.
            auto selected = h.reshape({B * T, h.size(2)}).index_select(0, index.to(device));
            auto logits =
                torch::linear(head->transform(selected),
                              model->bert->embeddings->word_embeddings->weight, head->bias)
                    .to(torch::kCPU, torch::kDouble);  // (M, V)
            loss_sum[static_cast<size_t>(l)] +=
                torch::nn::functional::cross_entropy(
                    logits, target,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
            correct[static_cast<size_t>(l)] += logits.argmax(-1).eq(target).sum().item<int64_t>();
        }
    }
    if (masked == 0)
        throw engine::InputError(options.source, "no masked token in the logit lens' windows");
    LogitLensReport report;
    report.source = options.source;
    report.length = T;
    report.windows = nwin;
    report.masked = masked;
    report.final_norm = !final_norm.is_empty();
    // The unigram floors: the stream's own token frequencies (specials never occur in it).
    std::unordered_map<int64_t, int64_t> counts;
    for (int64_t id : stream) ++counts[id];
    int64_t majority = 0, most = 0;
    for (const auto& [id, count] : counts)
        if (count > most || (count == most && id < majority)) majority = id, most = count;
    const auto n = static_cast<double>(stream.size());
    int64_t hits = 0;
    for (int64_t id : targets) {
        report.unigram_loss -= std::log(static_cast<double>(counts[id]) / n);
        hits += id == majority;
    }
    report.unigram_loss /= static_cast<double>(masked);
    report.majority_accuracy = static_cast<double>(hits) / static_cast<double>(masked);
    for (int64_t l = 0; l <= L; ++l)
        report.rows.push_back(
            {l - 1, loss_sum[static_cast<size_t>(l)] / static_cast<double>(masked),
             static_cast<double>(correct[static_cast<size_t>(l)]) / static_cast<double>(masked)});
    return report;
}

// ---- position vectors
// ----------------------------------------------------------------------------

PositionVectors describe_position_vectors(const torch::Tensor& vectors, const std::string& source) {
    require(
        vectors.defined() && vectors.dim() == 2 && vectors.size(0) >= 2,
        "describe_position_vectors: vectors must be (P, C) with P >= 2, got " + shape_of(vectors));
    const auto v = cpu_dbl(vectors);
    PositionVectors out;
    out.source = source;
    out.vectors = v.to(torch::kFloat);
    auto unit = v / v.norm(2, 1, /*keepdim=*/true).clamp_min(1e-300);
    out.cosine = torch::mm(unit, unit.t()).to(torch::kFloat);  // (P, P)
    // PCA by the SVD of the centred vectors: X = U S V^T, the projection on axis k is U_k S_k.
    auto centred = v - v.mean(0, /*keepdim=*/true);
    // at::linalg_svd, not torch::linalg::svd: LibTorch 2.6 ships no torch/linalg.h.
    auto svd = torch::linalg_svd(centred, /*full_matrices=*/false);
    auto u = std::get<0>(svd), s = std::get<1>(svd);
    const int64_t k = std::min<int64_t>(2, s.size(0));
    auto pca = torch::zeros({v.size(0), 2}, torch::kDouble);
    pca.slice(1, 0, k).copy_(u.slice(1, 0, k) * s.slice(0, 0, k).unsqueeze(0));
    const double total = s.pow(2).sum().item<double>();
    for (int64_t a = 0; a < k; ++a) {
        // An SVD's signs are arbitrary: the last position at or above the first on each axis.
        if (pca[-1][a].item<double>() < pca[0][a].item<double>()) pca.select(1, a).neg_();
        out.explained[a] = total > 0 ? s[a].item<double>() * s[a].item<double>() / total : 0.0;
    }
    out.pca = pca.to(torch::kFloat);
    return out;
}

std::optional<PositionVectors> position_vectors(engine::BertModel& model, int64_t positions) {
    torch::NoGradGuard no_grad;
    const engine::PositionDescription& scheme = model->position->description();
    const int64_t table = model->config().max_position_embeddings;
    require(positions == 0 || (positions >= 2 && positions <= table),
            "position_vectors: positions " + std::to_string(positions) + " outside 2.." +
                std::to_string(table) + " (0 = the whole table)");
    const int64_t P = positions > 0 ? positions : table;
    auto& position = model->position;
    if (scheme.learned_input && !model->embeddings->position_embeddings.is_empty())
        return describe_position_vectors(
            model->embeddings->position_embeddings->weight.slice(0, 0, P),
            "learned input table bert.embeddings.position_embeddings, positions 0.." +
                std::to_string(P - 1));
    if (scheme.untied && !position->pos.is_empty()) {
        // Token t reads row t + 1 (row 0 is the [CLS]-to-others row of the reset), through
        // pos_ln before U^Q and U^K (TUPE, Eq. 7).
        auto rows = position->pos->weight.slice(0, 1, P + 1);
        return describe_position_vectors(
            position->pos_ln(rows.to(position->pos_ln->weight.scalar_type())),
            "TUPE's shared table as attention reads it, p' = LayerNorm(p), positions 0.." +
                std::to_string(P - 1) + " (rows 1.." + std::to_string(P) + ")");
    }
    if (scheme.qk_offsets && !position->pos.is_empty()) {
        auto rows = position->pos->weight.slice(0, 0, P);
        return describe_position_vectors(
            position->pos_ln(rows.to(position->pos_ln->weight.scalar_type())),
            "BERT-Ad's table as its q/k offsets read it, p' = LayerNorm(p), positions 0.." +
                std::to_string(P - 1));
    }
    return std::nullopt;
}

}  // namespace analysis
