// Checkpoint formats of the HF ecosystem, as name -> tensor lists: safetensors
// (huggingface/safetensors: an 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets}} with an optional "__metadata__" map of strings, then the
// raw little-endian C-order bytes), read and written, and torch.save zip archives, read.
// Errors are engine::CheckpointError naming the file.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace analysis {

/// Name -> tensor, in file order.
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// Reads every tensor of a .safetensors file as a CPU tensor of its stored dtype. Supported
/// dtypes: F32, F16, BF16, F64, I64, I32, U8, BOOL. Throws engine::CheckpointError(path, ...)
/// for a missing or truncated file, a malformed header, an unsupported dtype, or data offsets
/// that do not match the shape.
NamedTensors read_safetensors(const std::string& path);

/// Writes tensors (any device, any layout; copied to contiguous CPU first) as .safetensors, in
/// the given order, header padded with spaces to a multiple of 8 bytes. Dtypes: float32,
/// float16, bfloat16, float64, int64, int32, uint8, bool. `metadata` goes to "__metadata__".
/// Atomic (temporary file + rename). Throws engine::CheckpointError(path, ...) on failure.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Reads the state dict of a torch.save zip archive (torch >= 1.6, e.g. an HF pytorch_model.bin):
/// a dict or OrderedDict of tensors (pickle protocols 2 to 5 without out-of-band buffers; BUILD
/// state such as _metadata is ignored; tied tensors share their storage), also the archives that
/// LibTorch's torch::pickle_save writes for a c10::Dict. Tensors keep their stored
/// dtype. Throws engine::CheckpointError(path, ...) for a missing file, a legacy (pre-1.6) or
/// non-zip file, an unsupported pickle construct, or an entry that is not a tensor.
NamedTensors read_torch_state_dict(const std::string& path);

}  // namespace analysis
