// The shared test fixtures of support/test_support.h (temporary directories, small files, tiny
// configs, toy corpora, running the CLI).
#include "support/test_support.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

extern char** environ;

namespace fs = std::filesystem;

namespace test_support {

const char* tupe_cli() { return TUPE_CLI_PATH; }

std::string process_id() { return std::to_string(::getpid()); }

std::string random_tag() { return std::to_string(std::random_device{}()); }

std::string test_name() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return info ? info->name() : "";
}

std::string test_suite_name() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return info ? info->test_suite_name() : "";
}

std::string per_test_name(const std::string& prefix) {
    return prefix + "_" + process_id() + "_" + test_name();
}

std::vector<std::pair<std::string, std::string>> model_values(const engine::ModelConfig& c) {
    engine::PretrainConfig p;
    p.model = c;
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::string& key : engine::config_keys())
        if (key.rfind("model.", 0) == 0) out.emplace_back(key, engine::get_config_value(p, key));
    return out;
}

bool has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

fs::path fresh_dir(const fs::path& dir) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

TempDir::TempDir(const std::string& name, bool create) : path_(fs::temp_directory_path() / name) {
    fs::remove_all(path_);
    if (create) fs::create_directories(path_);
}

TempDir::~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
}

fs::path TempDir::write(const std::string& name, const std::string& text) const {
    return write_file(path_ / name, text);
}

TempFile::TempFile(const std::string& name, const std::string& content)
    : path_((fs::temp_directory_path() / name).string()) {
    std::ofstream(path_, std::ios::binary) << content;
}

TempFile::~TempFile() {
    std::error_code ignored;
    fs::remove(path_, ignored);
}

TempDirTest::TempDirTest(const std::string& name, bool create)
    : temp_(name, create), dir_(temp_.path()) {}

fs::path write_file(const fs::path& path, const std::string& text) {
    if (!path.parent_path().empty()) fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void write_vocab(const fs::path& path, const std::vector<std::string>& tokens) {
    std::ofstream out(path, std::ios::binary);
    for (const auto& t : tokens) out << t << "\n";
}

engine::ModelConfig tiny_config(const std::string& preset, int64_t vocab_size) {
    engine::ModelConfig c = engine::make_model_config(preset, "tiny");
    c.vocab_size = vocab_size;
    return c;
}

engine::ModelConfig tiny16_config(const std::string& preset, int64_t vocab_size,
                                  int64_t max_positions, bool dropout) {
    engine::ModelConfig c = tiny_config(preset, vocab_size);
    c.hidden_size = 16;
    c.intermediate_size = 32;
    c.max_position_embeddings = max_positions;
    if (!dropout) c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.0;
    return c;
}

fs::path write_claims_study(const fs::path& dir, const std::string& tag, int steps) {
    const fs::path path = dir / (tag + ".yaml");
    std::ofstream(path) << "name: claims\nvariants: [bert-a, tupe-r]\n"
                           "model: {size: tiny, max_position_embeddings: 32}\n"
                           "data: {corpus: "
                        << (dir / "corpus.txt").string()
                        << ", vocab: " << (dir / "vocab.txt").string()
                        << ", cache_dir: " << (dir / ("cache-" + tag)).string()
                        << ", max_seq_len: 32, validation_fraction: 0.25}\n"
                           "train: {steps: "
                        << steps
                        << ", batch_size: 8, eval_interval: 4, checkpoint_interval: 4, "
                           "log_interval: 2, threads: 1}\n"
                           "checkpoints: [1.0]\n"
                           "glue: {data: builtin, tasks: [syn-cola, syn-stsb], "
                           "synthetic_train: 32, synthetic_dev: 16}\n"
                           "finetune: {lrs: [1.0e-3], seeds: [1, 2], batch_size: 8, "
                           "epochs: 2, max_seq_len: 32}\n"
                           "database: "
                        << (dir / (tag + ".sqlite")).string()
                        << "\nruns_dir: " << (dir / ("runs-" + tag)).string() << "\n";
    return path;
}

void write_tiny_pretraining(const fs::path& dir) {
    write_vocab(dir / "vocab.txt",
                {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
                 "a", "dog", "ran", ".", "##s", "un", "##able"});
    std::ofstream corpus(dir / "corpus.txt");
    for (int d = 0; d < 12; ++d) {
        for (int s = 0; s < 4; ++s)
            corpus << (s % 2 ? "the cat sat on the mat ." : "a dog ran .") << "\n";
        corpus << "\n";
    }
    std::ofstream cfg(dir / "tiny.yaml");
    cfg << "model:\n  preset: tupe-r\n  size: tiny\n  max_position_embeddings: 32\n"
        << "data:\n  corpus: " << (dir / "corpus.txt").string()
        << "\n  vocab: " << (dir / "vocab.txt").string()
        << "\n  cache_dir: " << (dir / "cache").string()
        << "\n  max_seq_len: 32\n  validation_fraction: 0.2\n"
        << "train:\n  steps: 3\n  batch_size: 4\n  eval_interval: 3\n  threads: 1\n";
}

void write_toy_corpus(const fs::path& dir, int documents, int sentences, int min_words,
                      unsigned seed) {
    const std::vector<std::string> words = {"the",   "a",     "old",   "red",   "cat",   "dog",
                                            "man",   "house", "saw",   "liked", "found", "near",
                                            "river", "with",  "small", "bird"};
    std::ofstream corpus(dir / "corpus.txt");
    unsigned state = seed;
    // A linear congruential generator: the same corpus on every platform.
    auto next = [&]() { return state = state * 1103515245u + 12345u, (state >> 16) % 16; };
    for (int d = 0; d < documents; ++d) {
        for (int s = 0; s < sentences; ++s) {
            const int n = min_words + static_cast<int>(next() % 6);
            for (int w = 0; w < n; ++w) corpus << (w ? " " : "") << words[next()];
            corpus << " .\n";
        }
        corpus << "\n";
    }
    std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."};
    tokens.insert(tokens.end(), words.begin(), words.end());
    write_vocab(dir / "vocab.txt", tokens);
}

void write_phrase_corpus(const fs::path& dir, const PhraseLists& lists, unsigned seed,
                         int documents, const std::function<int(int)>& sentences_in) {
    std::mt19937 rng(seed);
    std::ofstream corpus(dir / "corpus.txt");
    for (int d = 0; d < documents; ++d) {
        for (int s = 0; s < sentences_in(d); ++s)
            corpus << lists.subjects[rng() % lists.subjects.size()] << " "
                   << lists.verbs[rng() % lists.verbs.size()] << " "
                   << lists.objects[rng() % lists.objects.size()] << " .\n";
        corpus << "\n";
    }
    std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."};
    for (const auto* list : {&lists.subjects, &lists.verbs, &lists.objects})
        for (const auto& phrase : *list) {
            std::istringstream words(phrase);
            std::string w;
            while (words >> w)
                if (std::find(tokens.begin(), tokens.end(), w) == tokens.end()) tokens.push_back(w);
        }
    write_vocab(dir / "vocab.txt", tokens);
}

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

CliResult run_cli(const std::string& program, const std::string& args,
                  const fs::path& stderr_file) {
    CliResult r;
    const std::string cmd = program + " " + args + " 2>" + quote(stderr_file.string());
    FILE* pipe = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(pipe);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = read_file(stderr_file);
    return r;
}

pid_t start_process(const std::vector<std::string>& argv, const fs::path& log, const EnvVars& env) {
    std::vector<std::string> args = argv, vars;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        bool replaced = false;
        for (const auto& [name, value] : env) replaced |= entry.rfind(name + "=", 0) == 0;
        if (!replaced) vars.push_back(entry);
    }
    for (const auto& [name, value] : env) vars.push_back(name + "=" + value);
    std::vector<char*> arg_ptrs, env_ptrs;
    for (auto& a : args) arg_ptrs.push_back(a.data());
    arg_ptrs.push_back(nullptr);
    for (auto& v : vars) env_ptrs.push_back(v.data());
    env_ptrs.push_back(nullptr);
    const std::string log_path = log.string();
    const pid_t pid = fork();
    if (pid == 0) {
        const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execve(arg_ptrs[0], arg_ptrs.data(), env_ptrs.data());
        _exit(127);
    }
    return pid;
}

int wait_process(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool process_running(pid_t pid) {
    int status = 0;
    return waitpid(pid, &status, WNOHANG) == 0;
}

}  // namespace test_support
