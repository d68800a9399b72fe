// libFuzzer target for the experiment YAML loader (experiments/experiment.h, which reads the
// pretraining part through config_loader.h). The input is the text of an experiment file; it
// is also read as a plain pretraining config from a string. Bad files must end in ConfigError
// (or another std::exception with a message); crashes, hangs and std::terminate are bugs.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "experiments/config_loader.h"
#include "experiments/experiment.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string& path = fuzz::scratch_path(".yaml");
    fuzz::write_file(path, data, size);
    try {
        const experiments::ExperimentSpec spec = experiments::load_experiment(path);
        for (const auto& v : spec.variants) (void)spec.checkpoint_steps(v);
    } catch (const experiments::ConfigError&) {
    } catch (const std::exception&) {
    }
    try {
        const std::string text(reinterpret_cast<const char*>(data), size);
        (void)experiments::load_pretrain_config_from_string(text, "fuzz.yaml");
    } catch (const experiments::ConfigError&) {
    } catch (const std::exception&) {
    }
    return 0;
}
