// The safetensors checkpoint format of the HF ecosystem, as name -> tensor lists
// (huggingface/safetensors: an 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets}} with an optional "__metadata__" map of strings, then the
// raw little-endian C-order bytes), read and written. Errors are engine::CheckpointError naming
// the file. torch.save archives are analysis/torch_pickle.h (included here for older callers).
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/torch_pickle.h"  // read_torch_state_dict, for callers from before the split

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

}  // namespace analysis
