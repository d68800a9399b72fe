// .npy and CSV output for attention maps and statistics. The .npy layout follows
// numpy/lib/format.py: magic "\x93NUMPY", version, little-endian header length, a Python dict
// literal padded with spaces to a multiple of 64 bytes (newline included), then the raw data.
#include "analysis/npy.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <vector>

#include "engine/errors.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "npy.cpp writes and reads host memory as little-endian data");
#endif

namespace analysis {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes, then major and minor version
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;  // numpy's ARRAY_ALIGN

struct DtypeInfo {
    const char* descr;
    torch::ScalarType type;
    size_t itemsize;
};

// The dtypes written and read; '|' marks byte-sized types, whose order does not matter.
const DtypeInfo kDtypes[] = {
    {"<f4", torch::kFloat, 4}, {"<f8", torch::kDouble, 8}, {"<i8", torch::kLong, 8},
    {"<i4", torch::kInt, 4},   {"|u1", torch::kByte, 1},   {"|b1", torch::kBool, 1},
};

std::string supported_descrs() {
    std::string s;
    for (const DtypeInfo& d : kDtypes) s += (s.empty() ? "'" : ", '") + std::string(d.descr) + "'";
    return s;
}

std::string shape_string(c10::IntArrayRef sizes) {
    std::ostringstream os;
    os << sizes;
    return os.str();
}

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

/// The header dict, exactly as numpy writes it: "{'descr': '<f4', 'fortran_order': False,
/// 'shape': (2, 3), }", spaces, "\n"; a 1-d shape keeps its trailing comma: "(5,)".
std::string make_header(const std::string& descr, c10::IntArrayRef sizes) {
    std::string shape = "(";
    for (size_t i = 0; i < sizes.size(); ++i) {
        if (i > 0) shape += ", ";
        shape += std::to_string(sizes[i]);
    }
    if (sizes.size() == 1) shape += ",";
    shape += ")";
    std::string header =
        "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    // Magic (6) + version (2) + length (2) + header + "\n" is a multiple of kAlign.
    const size_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
    header.append((kAlign - unpadded % kAlign) % kAlign, ' ');
    header += '\n';
    return header;
}

// ---- header parsing ---------------------------------------------------------------------------

struct NpyHeader {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
};

/// A small reader for the Python dict literal numpy writes; errors name the file.
class HeaderParser {
  public:
    HeaderParser(const std::string& path, const std::string& text) : path_(path), text_(text) {}

    NpyHeader parse() {
        const size_t open = text_.find_first_not_of(" \t");
        if (open == std::string::npos || text_[open] != '{') fail("header is not a dict");
        NpyHeader h;
        seek_value("descr");
        h.descr = read_string();
        seek_value("fortran_order");
        h.fortran_order = read_bool();
        seek_value("shape");
        h.shape = read_shape();
        return h;
    }

  private:
    [[noreturn]] void fail(const std::string& what) const {
        throw engine::InputError(path_, "malformed .npy header (" + what + "): " + text_);
    }

    void skip_spaces() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
    }

    /// Places pos_ at the value of 'key' (single or double quotes around the key).
    void seek_value(const std::string& key) {
        size_t at = text_.find("'" + key + "'");
        if (at == std::string::npos) at = text_.find("\"" + key + "\"");
        if (at == std::string::npos) fail("no '" + key + "' key");
        pos_ = at + key.size() + 2;
        skip_spaces();
        if (pos_ >= text_.size() || text_[pos_] != ':') fail("no ':' after '" + key + "'");
        ++pos_;
        skip_spaces();
    }

    std::string read_string() {
        if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
            fail("'descr' is not a string");
        const char quote = text_[pos_];
        const size_t end = text_.find(quote, pos_ + 1);
        if (end == std::string::npos) fail("unterminated string");
        return text_.substr(pos_ + 1, end - pos_ - 1);
    }

    bool read_bool() {
        if (text_.compare(pos_, 4, "True") == 0) return true;
        if (text_.compare(pos_, 5, "False") == 0) return false;
        fail("'fortran_order' is not True or False");
    }

    std::vector<int64_t> read_shape() {
        if (pos_ >= text_.size() || text_[pos_] != '(') fail("'shape' is not a tuple");
        const size_t end = text_.find(')', pos_);
        if (end == std::string::npos) fail("unterminated 'shape' tuple");
        std::vector<int64_t> shape;
        std::stringstream items(text_.substr(pos_ + 1, end - pos_ - 1));
        std::string item;
        while (std::getline(items, item, ',')) {
            const size_t b = item.find_first_not_of(" \t");
            if (b == std::string::npos) continue;  // the trailing comma of "(5,)"
            const size_t e = item.find_last_not_of(" \t");
            const std::string digits = item.substr(b, e - b + 1);
            if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18)
                fail("bad dimension '" + digits + "'");
            shape.push_back(std::stoll(digits));
        }
        return shape;
    }

    const std::string& path_;
    const std::string& text_;
    size_t pos_ = 0;
};

uint32_t read_le(const unsigned char* p, int bytes) {
    uint32_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

}  // namespace

void write_npy(const std::string& path, const torch::Tensor& tensor) {
    TORCH_CHECK(tensor.defined(), "write_npy: undefined tensor for ", path);
    torch::Tensor t = tensor.detach();
    if (t.is_sparse()) t = t.to_dense();
    if (t.scalar_type() == torch::kHalf || t.scalar_type() == torch::kBFloat16)
        t = t.to(torch::kFloat);
    const DtypeInfo* info = nullptr;
    for (const DtypeInfo& d : kDtypes)
        if (d.type == t.scalar_type()) info = &d;
    if (info == nullptr) {
        throw engine::InputError(path, std::string("cannot write dtype ") +
                                           c10::toString(t.scalar_type()) +
                                           " as .npy (supported: " + supported_descrs() +
                                           ", float16/bfloat16 as '<f4')");
    }
    t = t.to(torch::kCPU).contiguous();

    const std::string header = make_header(info->descr, t.sizes());
    if (header.size() > std::numeric_limits<uint16_t>::max())
        throw engine::InputError(path, "header too long for .npy version 1.0 (" +
                                           std::to_string(t.dim()) + " dimensions)");
    write_atomically(path, [&](std::ostream& out) {
        const auto len = static_cast<uint16_t>(header.size());
        // Version 1.0, then the header length as a little-endian uint16.
        const char version_and_len[] = {1, 0, static_cast<char>(len & 0xff),
                                        static_cast<char>(len >> 8)};
        out.write(kMagic, kMagicLen);
        out.write(version_and_len, sizeof(version_and_len));
        out.write(header.data(), static_cast<std::streamsize>(header.size()));
        out.write(static_cast<const char*>(t.data_ptr()),
                  static_cast<std::streamsize>(t.numel() * info->itemsize));
    });
}

torch::Tensor read_npy(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw engine::InputError(path, std::string("cannot open: ") + std::strerror(errno));
    std::error_code ec;
    const uintmax_t file_size = fs::file_size(path, ec);
    if (ec) throw engine::InputError(path, "cannot read its size: " + ec.message());

    unsigned char prefix[12] = {};
    in.read(reinterpret_cast<char*>(prefix), 8);
    if (in.gcount() < 8 || std::memcmp(prefix, kMagic, kMagicLen) != 0)
        throw engine::InputError(path, "not a .npy file (bad magic; expected \\x93NUMPY)");
    const int major = prefix[6];
    if (major < 1 || major > 3) {
        throw engine::InputError(path, "unsupported .npy format version " + std::to_string(major) +
                                           "." + std::to_string(prefix[7]));
    }
    // Version 1.0 stores the header length in 2 bytes, 2.0 and 3.0 in 4.
    const int len_bytes = major == 1 ? 2 : 4;
    in.read(reinterpret_cast<char*>(prefix + 8), len_bytes);
    if (in.gcount() < len_bytes) throw engine::InputError(path, "truncated .npy header");
    const uint32_t header_len = read_le(prefix + 8, len_bytes);
    const uintmax_t data_offset = 8u + static_cast<uintmax_t>(len_bytes) + header_len;
    if (data_offset > file_size) throw engine::InputError(path, "truncated .npy header");
    std::string header(header_len, '\0');
    in.read(header.data(), header_len);
    while (!header.empty() && (header.back() == '\n' || header.back() == ' ')) header.pop_back();

    const NpyHeader h = HeaderParser(path, header).parse();
    if (h.fortran_order)
        throw engine::InputError(path, "Fortran-ordered arrays are not supported (C order only)");
    const DtypeInfo* info = nullptr;
    for (const DtypeInfo& d : kDtypes)
        if (h.descr == d.descr) info = &d;
    if (info == nullptr) {
        const bool big = !h.descr.empty() && h.descr[0] == '>';
        throw engine::InputError(path, "unsupported dtype '" + h.descr + "'" +
                                           (big ? " (big-endian)" : "") +
                                           "; supported: " + supported_descrs());
    }

    // Size check before allocating, so a corrupt shape cannot ask for terabytes.
    const uintmax_t available = file_size - data_offset;
    uintmax_t numel = 1;
    bool too_big = false;
    for (int64_t d : h.shape) {
        if (d == 0) {
            numel = 0;
            too_big = false;
            break;
        }
        if (!too_big && numel > available / static_cast<uintmax_t>(d)) too_big = true;
        if (!too_big) numel *= static_cast<uintmax_t>(d);
    }
    const uintmax_t expected = numel * info->itemsize;
    if (too_big || expected > available) {
        throw engine::InputError(path, "truncated data: shape " + shape_string(h.shape) + " of '" +
                                           h.descr + "' needs more than the " +
                                           std::to_string(available) + " bytes in the file");
    }
    if (expected < available) {
        throw engine::InputError(path, std::to_string(available - expected) +
                                           " unexpected bytes after the data of shape " +
                                           shape_string(h.shape));
    }

    torch::Tensor t = torch::empty(h.shape, torch::TensorOptions().dtype(info->type));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(expected));
    if (static_cast<uintmax_t>(in.gcount()) != expected)
        throw engine::InputError(path, "read failed: " + std::string(std::strerror(errno)));
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
