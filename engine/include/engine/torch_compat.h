// The LibTorch API differences between Debian's 1.13 and the 2.x releases the GPU machines use,
// in one place: each shim picks its spelling from TORCH_VERSION_MAJOR/MINOR. Checked against
// 2.6's headers by scripts/torch2_check.sh (and against 1.13 by every build here).
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include <string>
#include <type_traits>
#include <utility>

namespace engine::compat {

// The key of a parameter's entry in torch::optim::Optimizer::state() is its TensorImpl: the
// address as a string (c10::guts::to_string) up to LibTorch 2.1, the pointer itself from 2.2 on,
// where c10::guts::to_string is gone (pytorch#108748).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
inline void* optimizer_state_key(const torch::Tensor& p) { return p.unsafeGetTensorImpl(); }
#else
inline std::string optimizer_state_key(const torch::Tensor& p) {
    return c10::guts::to_string(p.unsafeGetTensorImpl());
}
#endif
static_assert(
    std::is_same_v<decltype(optimizer_state_key(std::declval<const torch::Tensor&>())),
                   std::remove_reference_t<
                       decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type>,
    "engine::compat::optimizer_state_key: this LibTorch keys optimizer state by another type; "
    "move the version boundary in engine/torch_compat.h");

}  // namespace engine::compat
