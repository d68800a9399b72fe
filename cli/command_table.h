// Every `tupe` command with every option it takes: the one source for argument parsing
// (cli::Args), `tupe COMMAND --help`, `tupe --help` and the bash completion script. A command
// reads its options through `Args args(argv, command_spec("NAME"))`, so an option that is not
// in this table cannot be parsed, and one that is in it always shows in the help with its
// default.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "commands.h"

namespace cli {

struct OptionSpec {
    std::string name;                  // without the leading "--"
    std::string value;                 // the value's placeholder ("N", "FILE"); empty for a flag
    std::string fallback;              // the value used when the option is absent (Args::get)
    std::string help;                  // one line of meaning
    std::string default_note;          // the default in words when it depends on other inputs
    std::vector<std::string> choices;  // allowed values; checked by Args, offered by completion
    bool repeatable = false;           // may be given many times (`--set k=v --set k2=v2`)
    std::optional<long long> min;      // the smallest value Args::get_int accepts
    bool required = false;
};

struct CommandSpec {
    std::string name;
    int (*run)(const Argv&) = nullptr;
    std::string positionals;  // what comes besides the options: "CHECKPOINT", "RUN_DIR ..."
    std::string summary;      // one line for `tupe --help`
    std::vector<OptionSpec> options;
    std::string details;  // further paragraphs for `tupe COMMAND --help`
    // The kind of file the positionals complete to in bash: "yaml", "pt", "dir" or "" (any).
    std::string complete_positionals;
};

/// Every command, in the order `tupe --help` lists them.
const std::vector<CommandSpec>& command_table();
/// The command named `name`, or nullptr.
const CommandSpec* find_command(const std::string& name);
/// The command named `name`; a name missing from the table is a programming error.
const CommandSpec& command_spec(const std::string& name);

/// "run EXPERIMENT.yaml [--set key=value ...] [--jobs N] ...": generated from the table.
std::string usage_line(const CommandSpec& spec);
/// The whole `tupe COMMAND --help` text: usage, summary, every option with default and meaning.
std::string help_text(const CommandSpec& spec);
/// A bash completion script for `tupe` (commands, each command's options, their choices and
/// file kinds), generated from the table: `tupe completion bash`, installed by the build.
std::string bash_completion_script();

}  // namespace cli
