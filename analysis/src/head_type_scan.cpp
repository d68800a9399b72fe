// Head types of a model on text (head_type_scan.h).
#include "analysis/head_type_scan.h"

#include <algorithm>

#include "engine/eval_mode.h"
#include "engine/position.h"
#include "tensor_util.h"

namespace analysis {

using detail::check_probe_stream;
using detail::require;

HeadTypeScan scan_head_types(engine::BertModel& model, const std::vector<int64_t>& stream,
                             const engine::Vocab& vocab, const HeadTypeScanOptions& options) {
    const engine::ModelConfig& config = model->config();
    const int64_t T = options.length > 0 ? options.length
                                         : std::min<int64_t>(128, config.max_position_embeddings);
    require(T >= 3, "head types: length must be >= 3 tokens, got " + std::to_string(T));
    require(options.windows >= 1 && options.batch_size >= 1,
            "head types: windows and batch_size must be >= 1");
    require(vocab.size() <= config.vocab_size, "head types: the vocabulary does not fit the model");
    const int64_t W = T - 2;
    check_probe_stream(stream, W, config.vocab_size, options.source, "the head-type scan");
    const int64_t nwin = std::min(options.windows, static_cast<int64_t>(stream.size()) / W);
    const int64_t L = config.num_hidden_layers, H = config.num_attention_heads;

    engine::EvalModeGuard eval(*model);
    torch::NoGradGuard no_grad;
    const auto device = model->embeddings->word_embeddings->weight.device();
    std::vector<HeadTypeAccumulator> acc(static_cast<size_t>(L * H),
                                         HeadTypeAccumulator(options.thresholds.local_window));
    for (int64_t first = 0; first < nwin; first += options.batch_size) {
        const int64_t B = std::min(options.batch_size, nwin - first);
        std::vector<int64_t> ids(static_cast<size_t>(B * T));
        for (int64_t b = 0; b < B; ++b) {
            int64_t* row = ids.data() + b * T;
            row[0] = vocab.cls_id();
            row[T - 1] = vocab.sep_id();
            std::copy_n(stream.begin() + (first + b) * W, W, row + 1);
        }
        const auto input = torch::tensor(ids).view({B, T}).to(device);  // (B, T)
        const engine::EncoderOutput out = model->forward(input, {}, {}, true);
        require(static_cast<int64_t>(out.attention_probs.size()) == L,
                "head types: the model returned no attention maps");
        for (int64_t l = 0; l < L; ++l) {
            // (B, H, T, T), float32 row-major on the CPU
            const torch::Tensor probs =
                detail::to_cpu_float(out.attention_probs[static_cast<size_t>(l)]).contiguous();
            const float* p = probs.data_ptr<float>();
            for (int64_t b = 0; b < B; ++b)
                for (int64_t h = 0; h < H; ++h)
                    acc[static_cast<size_t>(l * H + h)].add(p + ((b * H + h) * T * T), T,
                                                            ids.data() + b * T);
        }
    }

    HeadTypeScan scan;
    scan.summary = model->position->description().summary;
    scan.rule = describe(options.thresholds);
    scan.length = T;
    scan.windows = nwin;
    for (int64_t l = 0; l < L; ++l)
        for (int64_t h = 0; h < H; ++h) {
            HeadTypeRow row;
            row.layer = l;
            row.head = h;
            row.scores = acc[static_cast<size_t>(l * H + h)].scores();
            row.type = classify_head_type(row.scores, options.thresholds);
            scan.rows.push_back(row);
        }
    return scan;
}

}  // namespace analysis
