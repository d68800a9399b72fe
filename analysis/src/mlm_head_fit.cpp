// An MLM head fitted on a frozen encoder (mlm_head_fit.h): the encoder's hidden states at the
// masked tokens are computed once, then only the head's parameters train.
#include "analysis/mlm_head_fit.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "analysis/extrapolate.h"
#include "engine/errors.h"
#include "engine/eval_mode.h"
#include "tensor_util.h"

namespace analysis {

using detail::check_probe_stream;
using detail::require;

namespace {

// A seed stream of its own for the head's init and the row order, apart from the masked set's.
constexpr uint64_t kFitStream = 0x6d6c6d5f66697421ULL;  // "mlm_fit!"

// The head's logits for hidden rows (M, C): transform, then the tied decoder and the bias.
torch::Tensor head_logits(engine::BertForMaskedLM& model, const torch::Tensor& hidden,
                          const torch::Tensor& words) {
    auto& pred = model->cls->predictions;
    return torch::matmul(pred->transform->forward(hidden), words.t()) + pred->bias;  // (M, V)
}

}  // namespace

MlmHeadFit fit_mlm_head(engine::BertForMaskedLM& model, const std::vector<int64_t>& stream,
                        const engine::Vocab& vocab, const MlmHeadFitOptions& options) {
    const int64_t T = options.length;
    require(T >= 4, "length must be >= 4");
    require(T <= model->config().max_position_embeddings,
            "length " + std::to_string(T) + " exceeds max_position_embeddings = " +
                std::to_string(model->config().max_position_embeddings));
    require(options.windows >= 10 && options.steps >= 1 && options.batch_rows >= 1 &&
                options.eval_every >= 1,
            "windows must be >= 10, steps, batch_rows and eval_every >= 1");
    require(options.lr > 0, "lr must be > 0");
    const int64_t W = T - 2;
    check_probe_stream(stream, W, model->config().vocab_size, options.source,
                       "fitting an MLM head");
    const int64_t count =
        std::min<int64_t>(options.windows, static_cast<int64_t>(stream.size()) / W);
    if (count < 10)
        throw engine::InputError(options.source, "holds " + std::to_string(count) +
                                                     " window(s) of " + std::to_string(T) +
                                                     " tokens; fitting an MLM head needs 10");
    const int64_t train_windows = count - std::max<int64_t>(1, count / 10);
    const torch::Device device = model->parameters().front().device();

    // 1. The frozen encoder's last hidden state at every masked token, once.
    std::vector<torch::Tensor> rows, targets, held_rows, held_targets;
    {
        engine::EvalModeGuard eval(*model);
        torch::NoGradGuard no_grad;
        constexpr int64_t kBatch = 16;
        // Batches never straddle the split: [0, train_windows) trains, the rest is held back.
        for (int64_t first = 0; first < count;) {
            const int64_t end = first < train_windows ? train_windows : count;
            const int64_t B = std::min(kBatch, end - first);
            std::vector<int64_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
            for (int64_t b = 0; b < B; ++b)
                detail::fill_masked_window(
                    stream, vocab, T, [&](int64_t t) { return (first + b) * W + t; }, options.seed,
                    options.mask_prob, ids.data() + b * T, labels.data() + b * T);
            const auto opts = torch::TensorOptions().dtype(torch::kLong);
            const auto input = torch::tensor(ids, opts).view({B, T}).to(device);
            const auto target = torch::tensor(labels, opts).view({B, T}).to(device);
            const auto masked = target.ne(-100);
            const bool train = first < train_windows;
            first += B;
            if (masked.sum().item<int64_t>() == 0) continue;
            const auto hidden = model->bert->forward(input).last_hidden_state;   // (B, T, C)
            (train ? rows : held_rows).push_back(hidden.index({masked}));        // (m, C)
            (train ? targets : held_targets).push_back(target.index({masked}));  // (m)
        }
    }
    if (rows.empty() || held_rows.empty())
        throw engine::InputError(
            options.source, "no masked token in the " +
                                std::string(rows.empty() ? "first nine tenths" : "last tenth") +
                                " of its " + std::to_string(count) +
                                " window(s): too little text to fit and check an MLM head");
    const torch::Tensor H = torch::cat(rows);     // (M, C), the model's dtype
    const torch::Tensor Y = torch::cat(targets);  // (M)
    const torch::Tensor H_held = torch::cat(held_rows);
    const torch::Tensor Y_held = torch::cat(held_targets);
    const int64_t M = H.size(0);

    // 2. A fresh head: BERT's init for the transform, the bias at the rows' log-unigram
    //    frequencies (add-one), so that the fit starts from the unigram floor.
    auto& pred = model->cls->predictions;
    const torch::Tensor words = model->bert->embeddings->word_embeddings->weight.detach();
    torch::manual_seed(options.seed ^ kFitStream);
    {
        torch::NoGradGuard no_grad;
        engine::init_bert_weights(*pred->transform, model->config());
        const int64_t V = model->config().vocab_size;
        const auto counts =
            torch::bincount(Y.to(torch::kCPU), {}, V).to(torch::kDouble) + 1.0;  // (V)
        pred->bias.copy_(torch::log(counts / counts.sum()).to(pred->bias.dtype()));
    }
    std::vector<torch::Tensor> params = pred->transform->parameters();
    params.push_back(pred->bias);
    torch::optim::AdamW optimizer(
        params, torch::optim::AdamWOptions(options.lr).weight_decay(options.weight_decay));
    model->train();  // the head has no dropout; the mode only matters to autograd's bookkeeping

    auto mean_loss = [&](const torch::Tensor& hidden, const torch::Tensor& y) {
        torch::NoGradGuard no_grad;
        const int64_t n_rows = hidden.size(0);
        double sum = 0;
        for (int64_t first = 0; first < n_rows; first += options.batch_rows) {
            const int64_t n = std::min(options.batch_rows, n_rows - first);
            const auto logits = head_logits(model, hidden.narrow(0, first, n), words);
            sum += torch::nn::functional::cross_entropy(
                       logits, y.narrow(0, first, n),
                       torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                       .item<double>();
        }
        return sum / static_cast<double>(n_rows);
    };
    // The kept head: a copy of the parameters at the best check.
    std::vector<torch::Tensor> best;
    auto keep = [&]() {
        best.clear();
        for (const auto& p : params) best.push_back(p.detach().clone());
    };

    MlmHeadFit fit;
    fit.windows = count;
    fit.held_back = H_held.size(0);
    fit.masked = M + fit.held_back;
    {
        // The unigram reference: the bias alone, on the held-back rows.
        torch::NoGradGuard no_grad;
        const auto logits = pred->bias.unsqueeze(0).expand({H_held.size(0), pred->bias.size(0)});
        fit.start_loss = torch::nn::functional::cross_entropy(logits, Y_held).item<double>();
    }
    double best_loss = mean_loss(H_held, Y_held);
    keep();
    // 3. AdamW on minibatches of rows, a fresh permutation per pass.
    torch::Tensor order;
    int64_t next = M;
    for (int64_t step = 0; step < options.steps; ++step) {
        if (next >= M) {
            order = torch::randperm(M, torch::TensorOptions().dtype(torch::kLong)).to(device);
            next = 0;
        }
        const int64_t n = std::min(options.batch_rows, M - next);
        const auto idx = order.narrow(0, next, n);
        next += n;
        optimizer.zero_grad();
        const auto loss = torch::nn::functional::cross_entropy(
            head_logits(model, H.index_select(0, idx), words), Y.index_select(0, idx));
        if (!std::isfinite(loss.item<double>()))
            throw engine::InputError(options.source, "fitting the MLM head diverged at step " +
                                                         std::to_string(step + 1));
        loss.backward();
        optimizer.step();
        if ((step + 1) % options.eval_every == 0 || step + 1 == options.steps) {
            const double held = mean_loss(H_held, Y_held);
            if (held < best_loss) {
                best_loss = held;
                fit.best_step = step + 1;
                keep();
            }
        }
    }
    {
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < params.size(); ++i) params[i].copy_(best[i]);
    }
    fit.end_loss = best_loss;
    fit.train_loss = mean_loss(H, Y);
    model->eval();
    return fit;
}

}  // namespace analysis
