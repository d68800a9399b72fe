// Tensors to and from files other tools read: NumPy .npy (format version 1.0, as specified in
// numpy/lib/format.py) and plain CSV matrices. Little-endian, C order only; writes are atomic
// (a temporary file renamed over the target), failures throw engine::InputError naming the file.
#pragma once

#include <torch/torch.h>

#include <string>

namespace analysis {

/// Writes `tensor` as .npy version 1.0. Supported dtypes: float32 ('<f4'), float64 ('<f8'),
/// int64 ('<i8'), int32 ('<i4'), uint8 ('|u1'), bool ('|b1'); float16 and bfloat16 are written
/// as float32. Any device and layout: the data is copied to a contiguous CPU tensor first.
/// Throws engine::InputError(path, ...) for an unsupported dtype or an I/O failure; the target
/// is then left as it was.
void write_npy(const std::string& path, const torch::Tensor& tensor);

/// Reads a .npy file (versions 1.0-3.0) written with one of the dtypes write_npy produces, in
/// C order. Returns a CPU tensor of that dtype and shape. Throws engine::InputError(path, ...)
/// for a missing file, bad magic, a malformed header, Fortran order, big-endian or unsupported
/// dtypes, and truncated or over-long data.
torch::Tensor read_npy(const std::string& path);

/// Writes a 2-d tensor as CSV: one line per row, values separated by commas, printed with
/// "%.6g" (so integers beyond 6 digits are rounded). Atomic like write_npy. Throws
/// std::invalid_argument when the tensor is not 2-d and engine::InputError on I/O failure.
void write_csv(const std::string& path, const torch::Tensor& matrix2d);

}  // namespace analysis
