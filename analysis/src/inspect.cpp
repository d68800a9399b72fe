// Attention inspection: one text through the encoder with output_attentions on, the maps
// copied to the CPU as float32, their .npy export (one file per layer and kind) and the JSON /
// HTML layout bertviz's head_view and model_view read (Vig 2019, jessevig/bertviz).
#include "analysis/inspect.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

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

// float32 as the JSON number type: dump() then writes the shortest digits that read back as the
// same float ("0.25", not "0.25000000372529"), a third of the text of double's.
using FloatJson = nlohmann::basic_json<std::map, std::vector, std::string, bool, std::int64_t,
                                       std::uint64_t, float>;

FloatJson bertviz_document(const Inspection& inspection, const std::string& model,
                           const std::string& variant) {
    const auto t = static_cast<int64_t>(inspection.tokens.size());
    const int64_t heads = inspection.probs.empty() ? 0 : inspection.probs[0].size(0);
    FloatJson doc;
    doc["tokens"] = inspection.tokens;
    const torch::Tensor types = inspection.token_type_ids.to(torch::kLong).contiguous();
    std::vector<int64_t> type_ids(types.data_ptr<int64_t>(),
                                  types.data_ptr<int64_t>() + types.numel());
    doc["token_type_ids"] = type_ids;
    FloatJson layers = FloatJson::array();
    for (const torch::Tensor& layer : inspection.probs) {
        TORCH_CHECK(
            layer.dim() == 3 && layer.size(0) == heads && layer.size(1) == t && layer.size(2) == t,
            "bertviz_json: expected probabilities of shape (", heads, ", ", t, ", ", t, "), got ",
            layer.sizes());
        const torch::Tensor p = layer.to(torch::kCPU, torch::kFloat).contiguous();  // (H, T, T)
        const float* data = p.data_ptr<float>();
        FloatJson per_head = FloatJson::array();
        for (int64_t h = 0; h < heads; ++h) {
            FloatJson rows = FloatJson::array();
            for (int64_t i = 0; i < t; ++i) {
                const float* row = data + (h * t + i) * t;
                rows.push_back(FloatJson(std::vector<float>(row, row + t)));
            }
            per_head.push_back(std::move(rows));
        }
        layers.push_back(std::move(per_head));
    }
    doc["attention"] = std::move(layers);
    doc["layers"] = static_cast<int64_t>(inspection.probs.size());
    doc["heads"] = heads;
    doc["model"] = model;
    doc["variant"] = variant;
    return doc;
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
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
    write_npy((dir / "token_type_ids.npy").string(), inspection.token_type_ids.to(torch::kLong));
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

std::string bertviz_json(const Inspection& inspection, const std::string& model,
                         const std::string& variant) {
    // Invalid UTF-8 in a token (a byte-level piece) becomes U+FFFD rather than an exception.
    return bertviz_document(inspection, model, variant)
        .dump(-1, ' ', false, FloatJson::error_handler_t::replace);
}

std::string bertviz_html(const Inspection& inspection, const std::string& model,
                         const std::string& variant) {
    // Inside <script> only "</" could end the element early; escaping every <, > and & as
    // \u00XX (still valid JSON, and what JSON.parse and json.loads read back) rules it out.
    std::string embedded;
    for (char c : bertviz_json(inspection, model, variant)) {
        if (c == '<')
            embedded += "\\u003c";
        else if (c == '>')
            embedded += "\\u003e";
        else if (c == '&')
            embedded += "\\u0026";
        else
            embedded += c;
    }
    std::string tokens;
    for (const std::string& token : inspection.tokens) tokens += html_escape(token) + " ";
    const int64_t heads = inspection.probs.empty() ? 0 : inspection.probs[0].size(0);
    const std::string title =
        "Attention of " + html_escape(model) + " (" + html_escape(variant) + ")";
    return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
           title + "</title>\n</head>\n<body>\n<h1>" + title + "</h1>\n<p>" +
           std::to_string(inspection.probs.size()) + " layers, " + std::to_string(heads) +
           " heads, " + std::to_string(inspection.tokens.size()) + " tokens: <code>" + tokens +
           "</code></p>\n<p>The softmax attention of every layer and head is in the "
           "<code>&lt;script type=\"application/json\" id=\"attention\"&gt;</code> element "
           "below, in the layout of bertviz's <code>head_view</code> and <code>model_view</code> "
           "(keys tokens, attention [layer][head][query][key], token_type_ids, layers, heads, "
           "model, variant). To view it with bertviz in a notebook, F being the path of this "
           "page:</p>\n<pre>import json, re, torch; from bertviz import head_view\n"
           "d = json.loads(re.search(r'id=\"attention\"&gt;(.*?)&lt;/script&gt;', "
           "open(F).read(), re.S).group(1))\n"
           "head_view([torch.tensor(a).unsqueeze(0) for a in d[\"attention\"]], "
           "d[\"tokens\"])</pre>\n<p>With <code>tupe inspect ... --bertviz FILE.json</code> the "
           "same text is a file of its own: <code>d = json.load(open(F))</code>.</p>\n"
           "<script type=\"application/json\" id=\"attention\">" +
           embedded + "</script>\n</body>\n</html>\n";
}

void write_bertviz(const Inspection& inspection, const std::string& model,
                   const std::string& variant, const std::string& path) {
    const fs::path target(path);
    const std::string ext = target.extension().string();
    const bool html = ext == ".html" || ext == ".htm";
    const std::string text =
        html ? bertviz_html(inspection, model, variant) : bertviz_json(inspection, model, variant);
    std::error_code ec;
    if (target.has_parent_path()) {
        fs::create_directories(target.parent_path(), ec);
        if (ec) throw engine::InputError(path, "cannot create its directory: " + ec.message());
    }
    // Written beside the target and renamed over it, like write_npy: a failed write leaves
    // the old file as it was.
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out)
            throw engine::InputError(
                path, std::string("cannot open for writing: ") + std::strerror(errno));
        out << text;
        out.flush();
        if (!out) {
            fs::remove(tmp, ec);
            throw engine::InputError(path, "write failed");
        }
    }
    fs::rename(tmp, target, ec);
    if (ec) {
        const std::string why = ec.message();
        fs::remove(tmp, ec);
        throw engine::InputError(path, "cannot move the written file into place: " + why);
    }
}

}  // namespace analysis
