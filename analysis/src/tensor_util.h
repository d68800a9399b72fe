// Small helpers shared by the analysis sources (private to analysis/src): argument checks that
// throw std::invalid_argument, shape text for messages, and CPU float32/float64 copies.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/extrapolate.h"
#include "engine/errors.h"
#include "engine/tokenizer.h"

namespace analysis::detail {

inline void require(bool condition, const std::string& message) {
    if (!condition) throw std::invalid_argument(message);
}

/// A probe's token stream: at least `window` tokens (one window without [CLS] and [SEP]) and
/// every id inside a model of `vocab_size`; else engine::InputError naming `source`. `probe`
/// names the caller in the message ("the order probe").
inline void check_probe_stream(const std::vector<int64_t>& stream, int64_t window,
                               int64_t vocab_size, const std::string& source,
                               const std::string& probe) {
    const auto S = static_cast<int64_t>(stream.size());
    if (S < window)
        throw engine::InputError(source, "holds " + std::to_string(S) + " tokens; " + probe +
                                             " needs at least " + std::to_string(window) +
                                             " for one window");
    for (int64_t id : stream)
        if (id < 0 || id >= vocab_size)
            throw engine::InputError(source,
                                     "token id " + std::to_string(id) + " outside the vocabulary");
}

/// One probe window of T tokens into ids and labels (T each): [CLS], the stream tokens at
/// indices source(0) .. source(T - 3), [SEP]; a token stream_masked draws (on its stream index,
/// special tokens never) becomes [MASK] with the token as its label, every other label -100.
/// The windows of the ablation, the order probe (source: a permutation) and the logit lens.
template <typename Source>
void fill_masked_window(const std::vector<int64_t>& stream, const engine::Vocab& vocab, int64_t T,
                        Source source, uint64_t seed, double mask_prob, int64_t* ids,
                        int64_t* labels) {
    std::fill(labels, labels + T, -100);
    ids[0] = vocab.cls_id();
    ids[T - 1] = vocab.sep_id();
    for (int64_t t = 0; t < T - 2; ++t) {
        const int64_t src = source(t);
        const int64_t id = stream[static_cast<size_t>(src)];
        const bool m =
            !vocab.is_special(id) && stream_masked(seed, static_cast<uint64_t>(src), mask_prob);
        ids[t + 1] = m ? vocab.mask_id() : id;
        if (m) labels[t + 1] = id;
    }
}

/// "[2, 3, 4]" for messages.
inline std::string shape_string(c10::IntArrayRef sizes) {
    std::ostringstream os;
    os << sizes;
    return os.str();
}

/// shape_string, or "undefined" for an undefined tensor.
inline std::string shape_of(const torch::Tensor& t) {
    return t.defined() ? shape_string(t.sizes()) : std::string("undefined");
}

inline torch::Tensor to_cpu_float(const torch::Tensor& t) {
    return t.detach().to(torch::kCPU, torch::kFloat);
}

/// float64 on the tensor's own device (the decomposition runs where the model lives).
inline torch::Tensor dbl(const torch::Tensor& t) { return t.detach().to(torch::kDouble); }

/// float64 on the CPU (statistics and accumulators).
inline torch::Tensor cpu_dbl(const torch::Tensor& t) {
    return t.detach().to(torch::kCPU, torch::kDouble);
}

}  // namespace analysis::detail
