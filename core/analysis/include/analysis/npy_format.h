// The NumPy .npy format without torch (numpy/lib/format.py): magic "\x93NUMPY", version,
// little-endian header length, a Python dict literal padded to a multiple of 64 bytes, the raw
// data. One implementation of the header and its checks, shared by analysis/npy.h (tensors) and
// the desktop app (read_npy_array). Versions 1.0-3.0 read, 1.0 written; little-endian, C order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace analysis {

/// The dtypes read and written ('|' marks byte-sized types, whose order does not matter):
/// "<f4", "<f8", "<i8", "<i4", "|u1", "|b1".
const std::vector<std::string>& npy_dtypes();

/// Bytes per element of `descr`; 0 when it is not one of npy_dtypes().
size_t npy_itemsize(const std::string& descr);

/// npy_dtypes() quoted for messages: "'<f4', '<f8', '<i8', '<i4', '|u1', '|b1'".
std::string npy_dtype_list();

/// The header dict of a .npy file.
struct NpyHeader {
    std::string descr;  ///< e.g. "<f4"
    bool fortran_order = false;
    std::vector<int64_t> shape;  ///< empty for a scalar
};

/// Parses the header dict (single or double quotes, any key order, trailing padding allowed).
/// Throws engine::InputError(path, "malformed .npy header (...): DICT") when it is not a dict
/// or lacks 'descr', 'fortran_order' or 'shape', or a dimension is not a non-negative integer.
NpyHeader parse_npy_header(const std::string& dict, const std::string& path);

/// Everything before the data of a version 1.0 file, exactly as numpy writes it: magic,
/// version, length, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" padded with
/// spaces and "\n" to a multiple of 64 bytes; a 1-d shape keeps its trailing comma: "(5,)".
/// Throws engine::InputError(path, ...) when the header does not fit version 1.0.
std::string encode_npy_header(const std::string& descr, const std::vector<int64_t>& shape,
                              const std::string& path);

/// A .npy file opened and checked up to its data, which is then read with read_data().
/// The constructor throws engine::InputError(path, ...) for a missing file, bad magic, a
/// version other than 1.0-3.0, a truncated or malformed header, Fortran order, a big-endian or
/// unsupported dtype, and data shorter or longer than the shape needs (checked against the
/// file size before anything is allocated, so a corrupt shape cannot ask for terabytes).
class NpyFile {
  public:
    explicit NpyFile(const std::string& path);

    /// The parsed header: a supported descr, C order, the shape.
    const NpyHeader& header() const { return header_; }
    /// Bytes per element (npy_itemsize of the descr).
    size_t itemsize() const { return itemsize_; }
    /// Elements: the product of the shape (1 for a scalar).
    uint64_t numel() const { return numel_; }
    /// numel() * itemsize(): exactly the bytes after the header.
    uint64_t data_bytes() const { return data_bytes_; }
    /// Reads the data_bytes() bytes into `dst` (host order = little-endian). Once only.
    void read_data(void* dst);

  private:
    std::string path_;
    std::ifstream in_;
    NpyHeader header_;
    size_t itemsize_ = 0;
    uint64_t numel_ = 0, data_bytes_ = 0;
};

/// A C-order array of any supported dtype, converted to double (bool as 0 / 1).
struct NpyArray {
    std::string dtype;           ///< the file's descr, e.g. "<f4"
    std::vector<int64_t> shape;  ///< empty for a scalar
    std::vector<double> values;  ///< row-major, product of shape
};

/// Reads a .npy file into doubles. Throws engine::InputError(path, ...) as NpyFile.
NpyArray read_npy_array(const std::string& path);

}  // namespace analysis
