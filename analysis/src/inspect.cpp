// Attention inspection: one text through the encoder with output_attentions on, the maps
// copied to the CPU as float32, and their .npy export (one file per layer and kind).
#include "analysis/inspect.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "analysis/npy.h"
#include "engine/errors.h"
#include "engine/eval_mode.h"

namespace analysis {

namespace fs = std::filesystem;

namespace {

using engine::EvalModeGuard;

torch::Tensor to_long_tensor(const std::vector<int64_t>& values) {
    return torch::tensor(values, torch::TensorOptions().dtype(torch::kLong));
}

}  // namespace

Inspection inspect_text(engine::BertForMaskedLM& model, const engine::WordPieceTokenizer& tokenizer,
                        const std::string& text_a, const std::string& text_b) {
    const int64_t max_len = model->config().max_position_embeddings;
    const bool pair = !text_b.empty();
    // Encode without a length limit first: truncating a text the user asked to inspect would
    // show attention over a sequence they did not write. When it fits, this is the encoding.
    engine::Encoding enc =
        tokenizer.encode(text_a, text_b, std::numeric_limits<int64_t>::max(), pair);
    const auto n = static_cast<int64_t>(enc.input_ids.size());
    if (n > max_len) {
        throw engine::InputError(
            "--text", "the text encodes to " + std::to_string(n) +
                          " tokens, longer than the model's position table (max " +
                          std::to_string(max_len) + " tokens incl. [CLS]/[SEP]); shorten it");
    }

    Inspection out;
    out.tokens = enc.tokens;
    out.input_ids = to_long_tensor(enc.input_ids);            // (T)
    out.token_type_ids = to_long_tensor(enc.token_type_ids);  // (T)

    torch::NoGradGuard no_grad;
    EvalModeGuard eval_mode(*model);
    const auto params = model->parameters();
    const torch::Device device = params.empty() ? torch::Device(torch::kCPU) : params[0].device();
    // (T) -> (1, T): a batch of one, no padding, so no attention mask.
    const torch::Tensor ids = out.input_ids.unsqueeze(0).to(device);
    const torch::Tensor types = out.token_type_ids.unsqueeze(0).to(device);
    const engine::EncoderOutput enc_out = model->bert->forward(ids, {}, types, true);

    out.logits.reserve(enc_out.attention_logits.size());
    out.probs.reserve(enc_out.attention_probs.size());
    for (const torch::Tensor& l : enc_out.attention_logits)  // (1, H, T, T) -> (H, T, T)
        out.logits.push_back(l.squeeze(0).to(torch::kCPU, torch::kFloat).contiguous());
    for (const torch::Tensor& p : enc_out.attention_probs)  // (1, H, T, T) -> (H, T, T)
        out.probs.push_back(p.squeeze(0).to(torch::kCPU, torch::kFloat).contiguous());
    return out;
}

void write_inspection(const Inspection& inspection, const std::string& out_dir) {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) throw engine::InputError(out_dir, "cannot create the directory: " + ec.message());
    const fs::path dir(out_dir);

    const std::string tokens_path = (dir / "tokens.txt").string();
    {
        std::ofstream tokens(tokens_path, std::ios::trunc);
        if (!tokens)
            throw engine::InputError(
                tokens_path, std::string("cannot open for writing: ") + std::strerror(errno));
        for (const std::string& token : inspection.tokens) tokens << token << '\n';
        tokens.flush();
        if (!tokens) throw engine::InputError(tokens_path, "write failed");
    }
    write_npy((dir / "input_ids.npy").string(), inspection.input_ids.to(torch::kLong));
    for (size_t layer = 0; layer < inspection.logits.size(); ++layer) {
        const std::string stem = "layer" + std::to_string(layer);
        write_npy((dir / (stem + "_logits.npy")).string(),
                  inspection.logits[layer].to(torch::kFloat));
    }
    for (size_t layer = 0; layer < inspection.probs.size(); ++layer) {
        const std::string stem = "layer" + std::to_string(layer);
        write_npy((dir / (stem + "_probs.npy")).string(),
                  inspection.probs[layer].to(torch::kFloat));
    }
}

}  // namespace analysis
