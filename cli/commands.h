// The `tupe` subcommands. Each takes the arguments after its name and returns the exit
// status; errors are thrown and turned into one line by main().
#pragma once

#include <string>
#include <vector>

namespace cli {

using Argv = std::vector<std::string>;

int cmd_prepare_data(const Argv& args);  // cmd_data.cpp
int cmd_build_vocab(const Argv& args);
int cmd_tokenize(const Argv& args);
int cmd_info(const Argv& args);  // cmd_model.cpp
int cmd_export(const Argv& args);
int cmd_inspect(const Argv& args);
int cmd_fill_mask(const Argv& args);
int cmd_classify(const Argv& args);
int cmd_analyze(const Argv& args);      // cmd_analyze.cpp
int cmd_extrapolate(const Argv& args);  // cmd_extrapolate.cpp
int cmd_ablate(const Argv& args);       // cmd_ablate.cpp
int cmd_heads(const Argv& args);        // cmd_heads.cpp
int cmd_lengthgen(const Argv& args);    // cmd_lengthgen.cpp
int cmd_pretrain(const Argv& args);     // cmd_pretrain.cpp
int cmd_curves(const Argv& args);
int cmd_bench(const Argv& args);   // cmd_bench.cpp
int cmd_doctor(const Argv& args);  // cmd_doctor.cpp
int cmd_run(const Argv& args);     // cmd_experiment.cpp
int cmd_status(const Argv& args);
int cmd_gather(const Argv& args);  // cmd_experiment.cpp
int cmd_cancel(const Argv& args);
int cmd_report(const Argv& args);
int cmd_claims(const Argv& args);
int cmd_rank(const Argv& args);
int cmd_factors(const Argv& args);
int cmd_score(const Argv& args);
int cmd_glue(const Argv& args);
int cmd_submit(const Argv& args);      // cmd_submit.cpp
int cmd_completion(const Argv& args);  // command_table.cpp

}  // namespace cli
