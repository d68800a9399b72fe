// Helpers shared by the experiments-layer tests that drive the real `tupe` executable
// (TUPE_CLI) or a tiny study: shell quoting, reading a file, running the CLI with its stderr
// captured, and a toy corpus + vocabulary that tiny pretraining and the built-in tasks can use.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace test_support {

/// `s` in single quotes for /bin/sh.
inline std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

/// The whole file (empty when missing).
inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct CliResult {
    int status = -1;  ///< Exit status; -1 when killed by a signal.
    std::string out, err;
};

/// Runs `TUPE_CLI ARGS` through the shell; stderr goes through `stderr_file`.
inline CliResult run_tupe(const std::string& args, const std::filesystem::path& stderr_file) {
    CliResult r;
    const std::string cmd = std::string(TUPE_CLI) + " " + args + " 2>" + quote(stderr_file.string());
    FILE* pipe = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(pipe);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = slurp(stderr_file);
    return r;
}

/// Writes dir/corpus.txt (`documents` documents of `sentences` pseudo-random sentences of
/// min_words..min_words+5 words over 16 words, from `seed`) and dir/vocab.txt (the specials,
/// "." and the 16 words).
inline void write_toy_corpus(const std::filesystem::path& dir, int documents, int sentences,
                             int min_words, unsigned seed) {
    const char* words[] = {"the", "a", "old", "red", "cat", "dog", "man", "house", "saw",
                           "liked", "found", "near", "river", "with", "small", "bird"};
    std::ofstream corpus(dir / "corpus.txt");
    unsigned state = seed;
    auto next = [&]() { return state = state * 1103515245u + 12345u, (state >> 16) % 16; };
    for (int d = 0; d < documents; ++d) {
        for (int s = 0; s < sentences; ++s) {
            const int n = min_words + static_cast<int>(next() % 6);
            for (int w = 0; w < n; ++w) corpus << (w ? " " : "") << words[next()];
            corpus << " .\n";
        }
        corpus << "\n";
    }
    std::ofstream vocab(dir / "vocab.txt");
    for (const char* t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."}) vocab << t << "\n";
    for (const char* w : words) vocab << w << "\n";
}

/// A fresh scratch directory, temp/<prefix>_<pid> (a leftover from a killed run is removed),
/// holding the toy corpus and vocabulary of write_toy_corpus above.
inline std::filesystem::path toy_corpus_dir(const std::string& prefix, int documents,
                                            int sentences, int min_words, unsigned seed) {
    const auto dir = std::filesystem::temp_directory_path() /
                     (prefix + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    write_toy_corpus(dir, documents, sentences, min_words, seed);
    return dir;
}

}  // namespace test_support
