// Small helpers shared by the analysis sources (private to analysis/src): argument checks that
// throw std::invalid_argument, shape text for messages, and CPU float32/float64 copies.
#pragma once

#include <torch/torch.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace analysis::detail {

inline void require(bool condition, const std::string& message) {
    if (!condition) throw std::invalid_argument(message);
}

/// "[2, 3, 4]" for messages.
inline std::string shape_string(c10::IntArrayRef sizes) {
    std::ostringstream os;
    os << sizes;
    return os.str();
}

/// shape_string, or "undefined" for an undefined tensor.
inline std::string shape_of(const torch::Tensor& t) {
    return t.defined() ? shape_string(t.sizes()) : std::string("undefined");
}

inline torch::Tensor to_cpu_float(const torch::Tensor& t) {
    return t.detach().to(torch::kCPU, torch::kFloat);
}

/// float64 on the tensor's own device (the decomposition runs where the model lives).
inline torch::Tensor dbl(const torch::Tensor& t) { return t.detach().to(torch::kDouble); }

/// float64 on the CPU (statistics and accumulators).
inline torch::Tensor cpu_dbl(const torch::Tensor& t) {
    return t.detach().to(torch::kCPU, torch::kDouble);
}

}  // namespace analysis::detail
