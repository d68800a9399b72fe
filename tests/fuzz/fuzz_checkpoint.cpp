// libFuzzer target for the checkpoint loader (engine::load_checkpoint on a file). Seeds are
// tiny checkpoints written by `tupe pretrain`; the fuzzer mutates the zip container, the
// records and the config text inside. A bad file must end in engine::CheckpointError (or
// another std::exception with a message). Run with a bounded -max_len (see scripts/fuzz.sh):
// the seeds are a few KB and each input builds a model.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "engine/errors.h"
#include "engine/trainer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    torch::set_num_threads(1);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string& path = fuzz::scratch_path(".pt");
    fuzz::write_file(path, data, size);
    try {
        engine::LoadedCheckpoint ckpt = engine::load_checkpoint(path);
        if (!ckpt.model) __builtin_trap();
    } catch (const engine::CheckpointError&) {
    } catch (const std::exception&) {
    }
    return 0;
}
