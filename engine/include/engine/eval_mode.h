// EvalModeGuard: evaluation mode for the lifetime of a scope (analysis and evaluation code),
// restoring the module's previous train/eval mode afterwards, also when a forward pass throws.
#pragma once

#include <torch/torch.h>

namespace engine {

class EvalModeGuard {
  public:
    explicit EvalModeGuard(torch::nn::Module& module)
        : module_(module), was_training_(module.is_training()) {
        module_.eval();
    }
    ~EvalModeGuard() { module_.train(was_training_); }
    EvalModeGuard(const EvalModeGuard&) = delete;
    EvalModeGuard& operator=(const EvalModeGuard&) = delete;

  private:
    torch::nn::Module& module_;
    bool was_training_;
};

}  // namespace engine
