// .npy and CSV output for attention maps and statistics. The .npy header, its parsing and its
// checks are analysis/npy_format.h's (torch-free, shared with the desktop app); this file maps
// the dtypes to torch and moves the data in and out of tensors.
#include "analysis/npy.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "analysis/npy_format.h"
#include "engine/errors.h"
#include "tensor_util.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "npy.cpp writes and reads host memory as little-endian data");
#endif

namespace analysis {

namespace fs = std::filesystem;
using detail::shape_string;

namespace {

struct DtypeInfo {
    const char* descr;
    torch::ScalarType type;
};

// npy_format's dtypes (analysis::npy_dtypes()) as torch types.
const DtypeInfo kNpyTorchDtypes[] = {
    {"<f4", torch::kFloat}, {"<f8", torch::kDouble}, {"<i8", torch::kLong},
    {"<i4", torch::kInt},   {"|u1", torch::kByte},   {"|b1", torch::kBool},
};

/// Writes `path` through `path.tmp` and a rename, so readers never see a half-written file.
void write_atomically(const std::string& path, const std::function<void(std::ostream&)>& fill) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) {
            throw engine::InputError(
                path, "cannot open '" + tmp + "' for writing: " + std::strerror(errno));
        }
        fill(out);
        out.flush();
        if (!out) {
            const std::string why = std::strerror(errno);
            out.close();
            std::error_code ignored;
            fs::remove(tmp, ignored);
            throw engine::InputError(path, "write failed: " + why);
        }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        throw engine::InputError(path, "cannot move '" + tmp + "' into place: " + ec.message());
    }
}

}  // namespace

void write_npy(const std::string& path, const torch::Tensor& tensor) {
    TORCH_CHECK(tensor.defined(), "write_npy: undefined tensor for ", path);
    torch::Tensor t = tensor.detach();
    if (t.is_sparse()) t = t.to_dense();
    if (t.scalar_type() == torch::kHalf || t.scalar_type() == torch::kBFloat16)
        t = t.to(torch::kFloat);
    const DtypeInfo* info = nullptr;
    for (const DtypeInfo& d : kNpyTorchDtypes)
        if (d.type == t.scalar_type()) info = &d;
    if (info == nullptr) {
        throw engine::InputError(
            path, std::string("cannot write dtype ") + c10::toString(t.scalar_type()) +
                      " as .npy (supported: " + npy_dtype_list() + ", float16/bfloat16 as '<f4')");
    }
    t = t.to(torch::kCPU).contiguous();

    const std::string header = encode_npy_header(info->descr, t.sizes().vec(), path);
    write_atomically(path, [&](std::ostream& out) {
        out.write(header.data(), static_cast<std::streamsize>(header.size()));
        out.write(static_cast<const char*>(t.data_ptr()),
                  static_cast<std::streamsize>(t.numel() * t.element_size()));
    });
}

torch::Tensor read_npy(const std::string& path) {
    NpyFile file(path);  // every check of the header and the data size
    const DtypeInfo* info = nullptr;
    for (const DtypeInfo& d : kNpyTorchDtypes)
        if (file.header().descr == d.descr) info = &d;
    if (info == nullptr)
        throw engine::InputError(path, "no torch dtype for '" + file.header().descr + "'");
    torch::Tensor t = torch::empty(file.header().shape, torch::TensorOptions().dtype(info->type));
    TORCH_CHECK(static_cast<uint64_t>(t.numel() * t.element_size()) == file.data_bytes(),
                "read_npy: ", path, " holds ", file.data_bytes(), " bytes for ", t.numel(),
                " elements");
    file.read_data(t.data_ptr());
    return t;
}

void write_csv(const std::string& path, const torch::Tensor& matrix2d) {
    if (!matrix2d.defined() || matrix2d.dim() != 2) {
        throw std::invalid_argument(
            "write_csv: expected a 2-d tensor for " + path + ", got shape " +
            (matrix2d.defined() ? shape_string(matrix2d.sizes()) : std::string("undefined")));
    }
    const torch::Tensor m = matrix2d.detach().to(torch::kCPU, torch::kDouble).contiguous();
    const int64_t rows = m.size(0), cols = m.size(1);
    const double* data = m.data_ptr<double>();
    write_atomically(path, [&](std::ostream& out) {
        std::string line;
        char buf[32];
        for (int64_t r = 0; r < rows; ++r) {
            line.clear();
            for (int64_t c = 0; c < cols; ++c) {
                if (c > 0) line += ',';
                std::snprintf(buf, sizeof(buf), "%.6g", data[r * cols + c]);
                line += buf;
            }
            line += '\n';
            out << line;
        }
    });
}

}  // namespace analysis
