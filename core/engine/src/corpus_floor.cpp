// The floor under a validation-loss curve (corpus.h, CorpusFloor): cross-entropies of the
// validation MLM targets under unigram and bigram models estimated on the training blocks.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "engine/corpus.h"
#include "engine/errors.h"

namespace engine {

CorpusFloor corpus_floor(const BlockDataset& data, const Vocab& vocab) {
    CorpusFloor floor;
    const auto V = static_cast<size_t>(vocab.size());
    std::vector<double> unigram(V, 0.0);
    size_t maskable_types = 0;
    for (size_t id = 0; id < V; ++id)
        if (!vocab.is_special(static_cast<int64_t>(id))) ++maskable_types;
    if (maskable_types == 0) return floor;
    // Bigram counts keyed by (previous, next); the previous token may be a special ([CLS]).
    std::unordered_map<uint64_t, double> bigram;
    std::vector<double> context_count(V, 0.0), context_types(V, 0.0);
    for (const auto& block : data.train)
        for (size_t i = 0; i < block.ids.size(); ++i) {
            const int64_t id = block.ids[i];
            if (vocab.is_special(id)) continue;
            unigram[static_cast<size_t>(id)] += 1.0;
            ++floor.train_tokens;
            if (i == 0) continue;
            const auto prev = static_cast<uint64_t>(block.ids[i - 1]);
            double& c = bigram[prev * V + static_cast<uint64_t>(id)];
            if (c == 0) context_types[prev] += 1.0;
            c += 1.0;
            context_count[prev] += 1.0;
        }
    // add-1/2 over the maskable vocabulary
    const double denominator = static_cast<double>(floor.train_tokens) + 0.5 * maskable_types;
    auto p_unigram = [&](int64_t id) {
        return (unigram[static_cast<size_t>(id)] + 0.5) / denominator;
    };
    // The context-free floor (corpus.h), with V' maskable types and q the unigram, for a
    // target t: -log q(t) under [MASK] (80%); kept(t) = -log((q(t) + q(t)/V') / (q(t) + 1/V'))
    // when kept (10%); when replaced by a uniform x (10%), -log q(t) + log(1 + V' q(x)) for
    // x != t and kept(t) for x = t, i.e. ((V' - 1)(-log q(t)) + S - log(1 + V' q(t)) + kept(t))
    // / V' with S the sum of log(1 + V' q(x)) over the maskable x.
    const double types = static_cast<double>(maskable_types);
    double log_terms = 0;
    for (size_t id = 0; id < V; ++id)
        if (!vocab.is_special(static_cast<int64_t>(id)))
            log_terms += std::log1p(types * p_unigram(static_cast<int64_t>(id)));
    double uni_sum = 0, bi_sum = 0, free_sum = 0;
    for (const auto& block : data.validation)
        for (size_t i = 0; i < block.ids.size(); ++i) {
            const int64_t id = block.ids[i];
            if (vocab.is_special(id)) continue;
            const double pu = p_unigram(id);
            uni_sum -= std::log(pu);
            const double kept = -std::log(pu * (1.0 + 1.0 / types) / (pu + 1.0 / types));
            const double replaced =
                ((types - 1.0) * -std::log(pu) + log_terms - std::log1p(types * pu) + kept) / types;
            free_sum += 0.8 * -std::log(pu) + 0.1 * kept + 0.1 * replaced;
            double pb = pu;
            if (i > 0) {
                // Witten-Bell: p = (c(v,w) + T(v) pu) / (c(v) + T(v)), pu alone for unseen v.
                const auto prev = static_cast<uint64_t>(block.ids[i - 1]);
                const double n = context_count[prev], t = context_types[prev];
                if (n > 0) {
                    auto it = bigram.find(prev * V + static_cast<uint64_t>(id));
                    const double c = it == bigram.end() ? 0.0 : it->second;
                    pb = (c + t * pu) / (n + t);
                }
            }
            bi_sum -= std::log(pb);
            ++floor.validation_tokens;
        }
    if (floor.validation_tokens > 0) {
        floor.unigram_nats = uni_sum / static_cast<double>(floor.validation_tokens);
        floor.bigram_nats = bi_sum / static_cast<double>(floor.validation_tokens);
        floor.context_free_nats = free_sum / static_cast<double>(floor.validation_tokens);
    }
    return floor;
}

std::string floor_path(const std::string& out_dir) {
    return (std::filesystem::path(out_dir) / "floor.txt").string();
}

std::string floor_warning(double final_loss, const CorpusFloor& floor) {
    if (floor.validation_tokens == 0 || !std::isfinite(final_loss)) return "";
    std::ostringstream os;
    os << std::fixed << std::setprecision(3);
    if (final_loss > floor.unigram_nats - kFloorMargin) {
        os << "warning: final validation loss " << final_loss << " is not " << kFloorMargin
           << " nats below the unigram floor " << floor.unigram_nats
           << ": the model has learned word frequencies only (train longer or raise the lr)";
        return os.str();
    }
    // Below the unigram floor but not below the context-free one (where the file has it):
    // frequencies and copying the tokens it sees, still no context.
    if (floor.context_free_nats > 0 && final_loss > floor.context_free_nats - kFloorMargin) {
        os << "warning: final validation loss " << final_loss << " is not " << kFloorMargin
           << " nats below the context-free floor " << floor.context_free_nats
           << ": the model has learned word frequencies and to copy the tokens it sees, no "
              "context (train longer or raise the lr)";
        return os.str();
    }
    return "";
}

void write_floor(const std::string& path, const CorpusFloor& floor) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << std::setprecision(10)
            << "# cross-entropy (nats/token) of the validation MLM targets "
            << "under the training blocks' unigram (add-1/2) and Witten-Bell bigram models\n"
            << "unigram_nats = " << floor.unigram_nats << "\n"
            << "bigram_nats = " << floor.bigram_nats << "\n"
            << "# the same targets under BERT's 80/10/10 masking for a model that sees only the\n"
            << "# token at the scored position (frequencies and copying, no context)\n"
            << "context_free_nats = " << floor.context_free_nats << "\n"
            << "validation_tokens = " << floor.validation_tokens << "\n"
            << "train_tokens = " << floor.train_tokens << "\n";
        if (!out) throw InputError(path, "cannot write the floor file");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
        throw InputError(path, "cannot write the floor file");
}

bool read_floor(const std::string& path, CorpusFloor& floor) {
    std::ifstream in(path);
    if (!in) return false;
    std::string line;
    long line_no = 0;
    bool have_unigram = false;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty() || line[0] == '#') continue;
        std::istringstream row(line);
        std::string key, eq;
        double value = 0;
        if (!(row >> key >> eq >> value) || eq != "=" || !std::isfinite(value))
            throw InputError(path, "malformed floor line (expected 'key = number')", line_no);
        if (key == "unigram_nats")
            floor.unigram_nats = value, have_unigram = true;
        else if (key == "bigram_nats")
            floor.bigram_nats = value;
        else if (key == "context_free_nats")
            floor.context_free_nats = value;
        else if (key == "validation_tokens")
            floor.validation_tokens = static_cast<int64_t>(value);
        else if (key == "train_tokens")
            floor.train_tokens = static_cast<int64_t>(value);
        else
            throw InputError(path, "unknown key '" + key + "'", line_no);
    }
    if (!have_unigram) throw InputError(path, "no unigram_nats line");
    return true;
}

}  // namespace engine
