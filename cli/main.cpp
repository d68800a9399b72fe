// `tupe`: the headless face of TUPE Workbench (servers, clusters, CI). Every failure ends as
// one line on stderr naming the file, key or line, and a non-zero exit status.
#include <dlfcn.h>
#include <sys/prctl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli_util.h"
#include "command_table.h"
#include "commands.h"
#include "engine/errors.h"
#include "engine/threads.h"
#include "experiments/build_info.h"
#include "experiments/config_loader.h"
#include "experiments/process_pool.h"
#include "experiments/result_store.h"

namespace {

void print_help() {
    std::cout << "tupe " << experiments::project_version() << " (" << experiments::git_commit()
              << ", LibTorch " << TORCH_VERSION << "): positional-encoding research workbench\n\n"
              << "usage: tupe COMMAND [options]\n\ncommands:\n";
    for (const auto& c : cli::command_table())
        std::cout << "  " << c.name << std::string(14 - std::min<size_t>(13, c.name.size()), ' ')
                  << c.summary << "\n";
    std::cout << "\n`tupe COMMAND --help` lists a command's options with their defaults.\n";
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

// A child of a runner (ProcessPool::spawn names its parent in TUPE_PARENT_PID) dies with it:
// a runner killed with SIGKILL leaves no analysis, fine-tuning or worker process behind to
// write into its run folders or its store. The variable is removed at once, so nothing this
// process starts (sbatch, srun, its own children) inherits it.
void die_with_parent() {
    const char* parent = std::getenv(experiments::kParentPidEnv);
    if (parent == nullptr) return;
    const std::string expected = parent;
    ::unsetenv(experiments::kParentPidEnv);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // Checked after the request: a parent that died before it can no longer signal us.
    if (std::to_string(::getppid()) != expected) {
        std::cerr << "tupe: the process that started this one (pid " << expected
                  << ") is gone; stopping\n";
        std::exit(1);
    }
}

int main(int argc, char** argv) {
    die_with_parent();
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
    const cli::CommandSpec* command = cli::find_command(name);
    if (!command) {
        std::cerr << "tupe: unknown command '" << name << "' (see `tupe --help`)\n";
        return 2;
    }
    cli::Argv args(argv + 2, argv + argc);
    // A store locked by another writer for more than a moment says so, once per operation.
    experiments::set_default_wait_notice(
        [name](const std::string& line) { std::cerr << "tupe " << name << ": " << line << "\n"; });
    for (const auto& a : args)
        if (a == "--help" || a == "-h") {
            std::cout << cli::help_text(*command);
            return 0;
        }
    try {
        return command->run(args);
    } catch (const cli::UsageError& e) {
        std::cerr << "tupe " << name << ": " << e.what() << "\nusage: tupe "
                  << cli::usage_line(*command) << "\n";
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
