// Small helpers shared by the `tupe` subcommands: argument parsing, a terminal progress bar
// and plain-text tables. Kept in the CLI so the libraries never print.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/tokenizer.h"

namespace cli {

/// A usage error: main() prints it with the command's usage line and exits with status 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct CommandSpec;

/// `--name value`, `--name=value`, flags, repeated options and positionals, as the command's
/// entry in the command table (command_table.h) declares them. Unknown options, a value outside
/// an option's choices and a missing required option are UsageErrors naming the option.
class Args {
  public:
    Args(const std::vector<std::string>& argv, const CommandSpec& spec);

    bool has(const std::string& name) const;
    /// The value given, else the table's default for the option.
    std::string get(const std::string& name) const;
    /// The value given, else `fallback` (for defaults that depend on other inputs).
    std::string get(const std::string& name, const std::string& fallback) const;
    /// Throws UsageError "missing --name" when absent.
    std::string required(const std::string& name) const;
    /// As get(), parsed as an integer: a UsageError naming the option when it is not one.
    long long get_int(const std::string& name) const;
    long long get_int(const std::string& name, long long fallback) const;
    std::vector<std::string> all(const std::string& name) const;
    const std::vector<std::string>& positionals() const { return positionals_; }

  private:
    long long parse_int(const std::string& name, const std::string& value) const;

    const CommandSpec* spec_;
    std::map<std::string, std::vector<std::string>> values_;
    std::vector<std::string> positionals_;
};

/// Seconds as "1h02m", "3m05s" or "12.3s".
std::string format_duration(double seconds);
/// 12345.6 -> "12,346".
std::string format_count(double value);

/// A one-line progress bar on stderr when it is a terminal; otherwise a plain line every
/// `plain_every` steps and at least every 15 seconds (logs and CI stay readable).
class ProgressBar {
  public:
    ProgressBar(long long total, long long plain_every = 10);
    /// `eta_seconds`: the caller's own estimate (NaN = unknown); without it the bar
    /// extrapolates done/total linearly.
    void update(long long done, const std::string& status);
    void update(long long done, const std::string& status, double eta_seconds);
    void finish();

  private:
    long long total_, plain_every_;
    bool tty_;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_draw_{};
    bool drawn_ = false;
    long long last_done_ = -1;
};

/// From now on SIGUSR1 (the warning a Slurm job gets before its time limit, sbatch
/// --signal=B:USR1@N) sets the stop flag of StopOnSignal, and warning_signal_caught() says so.
/// Installed first thing by a cluster job, so a warning during start-up is not fatal.
void catch_warning_signal();
bool warning_signal_caught();

/// While alive, SIGINT and SIGTERM set a flag instead of killing the process, so a long
/// command can checkpoint and stop cleanly; the default handlers come back on destruction.
class StopOnSignal {
  public:
    StopOnSignal();
    ~StopOnSignal();
    StopOnSignal(const StopOnSignal&) = delete;
    StopOnSignal& operator=(const StopOnSignal&) = delete;
    const std::atomic<bool>* flag() const;
};

/// Prints rows as an aligned text table (first row = header).
std::string format_table(const std::vector<std::vector<std::string>>& rows);

/// Creates `dir` and its parents when absent; throws engine::InputError naming it.
void create_output_dir(const std::string& dir);

/// The --out files of a report command: DIR/STEM.json and DIR/STEM.csv (DIR created when
/// absent), then one "wrote ..." line on stderr, so that stdout stays one document.
void write_report_files(const std::string& dir, const std::string& stem, const std::string& json,
                        const std::string& csv);

/// Writes `text` to `path` (replacing it); throws engine::InputError naming the file.
void write_text_file(const std::string& path, const std::string& text);

/// Throws engine::InputError when `path` does not exist or is a directory: checked before a
/// model is loaded, so that a typo costs no load.
void require_corpus_file(const std::string& path);

/// The tokenizer of a pretraining checkpoint whose config is `config`: the vocabulary from
/// `vocab_flag` when not empty, else the copy the run directory keeps beside the checkpoint,
/// else the config's data.vocab (as `tupe export`); its size checked against the model's.
engine::WordPieceTokenizer checkpoint_tokenizer(const std::string& vocab_flag,
                                                const std::string& checkpoint,
                                                const engine::PretrainConfig& config);

/// The held-out documents of a checkpoint's own corpus (make_blocks' validation split, as the
/// trainer draws it) as one token stream without special tokens: the text `tupe ablate` and
/// `tupe analyze`'s logit lens score. Throws engine::InputError naming the corpus when it has
/// no validation document.
std::vector<int64_t> validation_stream(const engine::PretrainConfig& config,
                                       const engine::WordPieceTokenizer& tokenizer);

}  // namespace cli
