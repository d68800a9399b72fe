// Shared fixtures of the layer tests (tests/<layer>/test_*.cpp): temporary directories and files,
// reading and writing small files, tiny model configs, toy corpora with their vocabularies, and
// running the `tupe` CLI with its output captured. Torch-free (engine_core only), so the app's
// tests link it too; torch-side helpers live in support/torch_support.h.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/config.h"

namespace test_support {

// ---- names -----------------------------------------------------------------------------------

/// This process's id in decimal.
std::string process_id();

/// A decimal number from std::random_device, for names no other process picks.
std::string random_tag();

/// The running test's name ("BehaviourName"; "" outside a test).
std::string test_name();

/// The running test's suite ("SuiteName"; "" outside a test).
std::string test_suite_name();

/// `<prefix>_<pid>_<test name>`: a name unique to this process and the running test.
std::string per_test_name(const std::string& prefix);

// ---- temporary directories and files ---------------------------------------------------------

/// Removes `dir` with everything in it (a leftover of a killed run), creates it empty and
/// returns it.
/// Every model.* key of `c` with its text form (engine::get_config_value): two configs are the
/// same model when these are equal.
std::vector<std::pair<std::string, std::string>> model_values(const engine::ModelConfig& c);

/// Whether `text` contains `part` (messages and outputs in assertions).
bool has(const std::string& text, const std::string& part);

std::filesystem::path fresh_dir(const std::filesystem::path& dir);

/// A directory under the system temp dir (std::filesystem::temp_directory_path()), removed with
/// everything in it by the destructor (errors ignored).
class TempDir {
  public:
    /// temp/<name>, emptied of a leftover; created unless `create` is false (for tests of code
    /// that must create the directory itself).
    explicit TempDir(const std::string& name, bool create = true);
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    /// The directory.
    const std::filesystem::path& path() const { return path_; }
    /// path()/name as a string.
    std::string file(const std::string& name) const { return (path_ / name).string(); }
    /// Writes path()/name (see write_file) and returns its path.
    std::filesystem::path write(const std::string& name, const std::string& text) const;

  private:
    std::filesystem::path path_;
};

/// A file temp/<name> holding `content`, removed by the destructor (errors ignored).
class TempFile {
  public:
    TempFile(const std::string& name, const std::string& content);
    ~TempFile();
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;

    /// The file's path.
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

/// A GoogleTest fixture with a TempDir per test: `dir_` exists (unless `create` is false) from
/// the constructor on and is removed after TearDown().
class TempDirTest : public ::testing::Test {
  protected:
    /// A TempDir named `name`, e.g. per_test_name("tupe_cli").
    explicit TempDirTest(const std::string& name, bool create = true);

    /// dir_/name as a string.
    std::string file(const std::string& name) const { return temp_.file(name); }
    /// Writes dir_/name (see write_file) and returns its path.
    std::filesystem::path write(const std::string& name, const std::string& text) const {
        return temp_.write(name, text);
    }

    TempDir temp_;               ///< Owns the directory.
    std::filesystem::path dir_;  ///< temp_.path().
};

// ---- small files -----------------------------------------------------------------------------

/// Writes `text` to `path` byte for byte (truncating), creating missing parent directories;
/// returns `path`.
std::filesystem::path write_file(const std::filesystem::path& path, const std::string& text);

/// The whole file, byte for byte ("" when it is missing).
std::string read_file(const std::filesystem::path& path);

/// Writes a vocab.txt: one token per line, in order.
void write_vocab(const std::filesystem::path& path, const std::vector<std::string>& tokens);

// ---- tiny models -----------------------------------------------------------------------------

/// make_model_config(preset, "tiny") (hidden 32, 2 layers, 2 heads, intermediate 64, 128
/// positions) with `vocab_size` tokens.
engine::ModelConfig tiny_config(const std::string& preset, int64_t vocab_size);

/// tiny_config narrowed to hidden 16 and intermediate 32 (still 2 layers, 2 heads) with
/// `max_positions` positions; without `dropout` both dropout probabilities are 0.
engine::ModelConfig tiny16_config(const std::string& preset, int64_t vocab_size,
                                  int64_t max_positions, bool dropout = true);

// ---- toy corpora -----------------------------------------------------------------------------

/// Writes dir/corpus.txt (`documents` documents of `sentences` pseudo-random sentences of
/// min_words..min_words+5 words over 16 words, from `seed`) and dir/vocab.txt (the specials,
/// "." and the 16 words).
void write_toy_corpus(const std::filesystem::path& dir, int documents, int sentences, int min_words,
                      unsigned seed);

/// The parts of the subject-verb-object sentences of write_phrase_corpus.
struct PhraseLists {
    std::vector<std::string> subjects, verbs, objects;
};

/// Writes dir/corpus.txt: `documents` documents, document d holding sentences_in(d) sentences
/// "<subject> <verb> <object> .", each part drawn as list[rng() % size] with std::mt19937(seed);
/// and dir/vocab.txt: the specials, "." and every word of the lists once, in order of appearance.
void write_phrase_corpus(const std::filesystem::path& dir, const PhraseLists& lists, unsigned seed,
                         int documents, const std::function<int(int)>& sentences_in);

/// The CLI tests' tiny pretraining: dir/vocab.txt (the specials, "the cat sat on mat a dog ran
/// .", "##s", "un", "##able"), dir/corpus.txt (12 documents of 4 sentences) and dir/tiny.yaml
/// (tupe-r, tiny, 32 positions, 3 steps of batch 4, one thread, cache under dir/cache).
void write_tiny_pretraining(const std::filesystem::path& dir);

/// The shared-plan study of the runner-claims and store-concurrency tests, as `tag`.yaml in
/// `dir` over dir/corpus.txt and dir/vocab.txt (write_toy_corpus): bert-a and tupe-r, tiny, 32
/// positions, `steps` steps (checkpoints every 4), then 2 built-in tasks x 1 lr x 2 seeds: 10
/// jobs, into dir/`tag`.sqlite with cache-`tag` and runs-`tag` folders. Returns the file.
std::filesystem::path write_claims_study(const std::filesystem::path& dir, const std::string& tag,
                                         int steps);

// ---- the tupe CLI ----------------------------------------------------------------------------

/// `s` in single quotes for /bin/sh.
std::string quote(const std::string& s);

/// What a CLI run printed and returned.
struct CliResult {
    int status = -1;  ///< Exit status; -1 when killed by a signal.
    std::string out, err;
};

/// Runs `program ARGS` through /bin/sh; stdout is captured, stderr goes through `stderr_file`.
CliResult run_cli(const std::string& program, const std::string& args,
                  const std::filesystem::path& stderr_file);

/// Variables set on top of this process's environment: (name, value) pairs.
using EnvVars = std::vector<std::pair<std::string, std::string>>;

/// Starts argv[0] (a path) with `argv` and `env`, stdout and stderr to `log` (truncated), and
/// returns its pid without waiting (-1 when fork fails). Everything the child needs is built
/// before fork(), so that the child only calls async-signal-safe functions.
pid_t start_process(const std::vector<std::string>& argv, const std::filesystem::path& log,
                    const EnvVars& env = {});

/// Waits for the child `pid` to end: its exit status, or 128 + the signal that ended it.
int wait_process(pid_t pid);

/// True while the child `pid` runs; false once it has ended (it is reaped then).
bool process_running(pid_t pid);

/// The `tupe` executable of this build directory.
const char* tupe_cli();
#ifndef TUPE_CLI
#define TUPE_CLI (::test_support::tupe_cli())
#endif

#ifdef TUPE_CLI
/// run_cli with the `tupe` executable the test was built against (TUPE_CLI).
inline CliResult run_tupe(const std::string& args, const std::filesystem::path& stderr_file) {
    return run_cli(TUPE_CLI, args, stderr_file);
}
#endif

}  // namespace test_support
