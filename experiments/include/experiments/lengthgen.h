// One run of a length-generalisation study (experiments/lengthgen_study.h): an encoder built
// fresh from its preset, trained from scratch on one Chomsky-hierarchy task at the study's
// training lengths with engine::finetune ([CLS] pooler + classifier), and its accuracy on a
// test set at every test length. Ruoss et al. (ACL 2023), sec. 4; tasks of Deletang et al.
// (ICLR 2023).
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "experiments/lengthgen_study.h"

namespace experiments {

struct LengthgenCallbacks {
    /// After every optimizer step: steps done (1-based), all steps, the step's loss.
    std::function<void(int64_t step, int64_t total_steps, double loss)> on_step;
    const std::atomic<bool>* stop = nullptr;  ///< Checked before every step.
};

/// Trains and tests one job. The train set is drawn from task_stream_seed(seed, 1, 0), the
/// test set of length L from task_stream_seed(seed, 2, L), so every scheme of a seed sees the
/// same examples; the encoder's init and the dropout stream follow the seed too. Throws
/// std::runtime_error when stopped, and what engine::finetune throws.
LengthgenResult run_lengthgen_job(const LengthgenStudy& study, const LengthgenJob& job,
                                  const LengthgenCallbacks& callbacks = {});

}  // namespace experiments
