// `tupe bench --profile`: where a training step's time goes, per op class (matmul, softmax,
// LayerNorm, GELU, dropout, element-wise, embedding, loss, copies, other ops, and the time no
// ATen op accounts for: the fused AdamW, clipping loops, dispatch between ops). Recorded with
// LibTorch's autograd profiler (RecordProfile, a Chrome trace) and reduced to self times.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace cli {

/// Self time of one op class, averaged per step.
struct OpClassTime {
    std::string op_class;
    double ms_per_step = 0;
    double share = 0;  ///< of the step's wall time
    long ops_per_step = 0;
};

/// A profile: op classes, largest first, with the unaccounted remainder as "not in an ATen
/// op", and the ops themselves (op_class = the op's name), most calls first.
struct StepProfile {
    std::vector<OpClassTime> classes;
    std::vector<OpClassTime> ops;
    double wall_ms_per_step = 0;  ///< the profiled steps' mean (the profiler's overhead included)
};

/// Runs `step` `steps` times under the profiler. With a `trace_path`, the Chrome trace is also
/// written there (open it in Perfetto or chrome://tracing).
StepProfile profile_step(const std::function<void()>& step, int steps,
                         const std::string& trace_path = "");

/// The class of an op or autograd-node name: "aten::addmm" -> "matmul",
/// "SoftmaxBackward0" -> "softmax", "aten::native_layer_norm" -> "layer_norm", ...
std::string op_class_of(const std::string& name);

}  // namespace cli
