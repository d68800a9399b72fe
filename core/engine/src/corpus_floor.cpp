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
    double uni_sum = 0, bi_sum = 0;
    for (const auto& block : data.validation)
        for (size_t i = 0; i < block.ids.size(); ++i) {
            const int64_t id = block.ids[i];
            if (vocab.is_special(id)) continue;
            const double pu = p_unigram(id);
            uni_sum -= std::log(pu);
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
    }
    return floor;
}

std::string floor_path(const std::string& out_dir) {
    return (std::filesystem::path(out_dir) / "floor.txt").string();
}

std::string floor_warning(double final_loss, const CorpusFloor& floor) {
    if (floor.validation_tokens == 0 || !std::isfinite(final_loss)) return "";
    if (final_loss > floor.unigram_nats - kFloorMargin) {
        std::ostringstream os;
        os << std::fixed << std::setprecision(3) << "warning: final validation loss " << final_loss
           << " is not " << kFloorMargin << " nats below the unigram floor " << floor.unigram_nats
           << ": the model has learned word frequencies only (train longer or raise the lr)";
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
