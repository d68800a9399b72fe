// torch.save zip archives (torch >= 1.6, e.g. an HF pytorch_model.bin), read as a name -> tensor
// list: PyTorchStreamReader for the zip and a minimal unpickler for the state dict in data.pkl,
// because LibTorch 1.13's pickle_load turns collections.OrderedDict into None. Errors are
// engine::CheckpointError naming the file. The safetensors format is analysis/safetensors.h.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace analysis {

/// Name -> tensor, in file order (the same alias as in analysis/safetensors.h).
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// Reads the state dict of a torch.save zip archive (torch >= 1.6, e.g. an HF pytorch_model.bin):
/// a dict or OrderedDict of tensors (pickle protocols 2 to 5 without out-of-band buffers; BUILD
/// state such as _metadata is ignored; tied tensors share their storage), also the archives that
/// LibTorch's torch::pickle_save writes for a c10::Dict. Tensors keep their stored
/// dtype. Throws engine::CheckpointError(path, ...) for a missing file, a non-zip file, an
/// unsupported pickle construct, or an entry that is not a tensor; a legacy (pre-1.6) torch.save
/// file is recognised by its magic number and refused with the one-line python command that
/// rewrites it in the zip format.
NamedTensors read_torch_state_dict(const std::string& path);

}  // namespace analysis
