// The .npy header and its checks (see npy_format.h), after numpy/lib/format.py.
#include "analysis/npy_format.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include "engine/errors.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "npy_format.cpp reads and writes host memory as little-endian data");
#endif

namespace analysis {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes, then major and minor version
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;  // numpy's ARRAY_ALIGN

struct NpyDtype {
    const char* descr;
    size_t itemsize;
};

const NpyDtype kNpyDtypes[] = {{"<f4", 4}, {"<f8", 8}, {"<i8", 8},
                               {"<i4", 4}, {"|u1", 1}, {"|b1", 1}};

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

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

template <typename T>
void to_double(const std::vector<char>& raw, std::vector<double>& out) {
    const size_t n = raw.size() / sizeof(T);
    out.resize(n);
    for (size_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
        out[i] = static_cast<double>(v);
    }
}

}  // namespace

const std::vector<std::string>& npy_dtypes() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (const NpyDtype& d : kNpyDtypes) v.emplace_back(d.descr);
        return v;
    }();
    return names;
}

size_t npy_itemsize(const std::string& descr) {
    for (const NpyDtype& d : kNpyDtypes)
        if (descr == d.descr) return d.itemsize;
    return 0;
}

std::string npy_dtype_list() {
    std::string s;
    for (const NpyDtype& d : kNpyDtypes)
        s += (s.empty() ? "'" : ", '") + std::string(d.descr) + "'";
    return s;
}

NpyHeader parse_npy_header(const std::string& dict, const std::string& path) {
    return HeaderParser(path, dict).parse();
}

std::string encode_npy_header(const std::string& descr, const std::vector<int64_t>& shape,
                              const std::string& path) {
    std::string dims = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) dims += ", ";
        dims += std::to_string(shape[i]);
    }
    if (shape.size() == 1) dims += ",";
    dims += ")";
    std::string header =
        "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + dims + ", }";
    // Magic (6) + version (2) + length (2) + header + "\n" is a multiple of kAlign.
    const size_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
    header.append((kAlign - unpadded % kAlign) % kAlign, ' ');
    header += '\n';
    if (header.size() > std::numeric_limits<uint16_t>::max())
        throw engine::InputError(path, "header too long for .npy version 1.0 (" +
                                           std::to_string(shape.size()) + " dimensions)");
    const auto len = static_cast<uint16_t>(header.size());
    // Version 1.0, then the header length as a little-endian uint16.
    std::string out(kMagic, kMagicLen);
    out += {'\x01', '\x00', static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    return out + header;
}

NpyFile::NpyFile(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw engine::InputError(path, std::string("cannot open: ") + std::strerror(errno));
    std::error_code ec;
    const uintmax_t file_size = fs::file_size(path, ec);
    if (ec) throw engine::InputError(path, "cannot read its size: " + ec.message());

    unsigned char prefix[12] = {};
    in_.read(reinterpret_cast<char*>(prefix), 8);
    if (in_.gcount() < 8 || std::memcmp(prefix, kMagic, kMagicLen) != 0)
        throw engine::InputError(path, "not a .npy file (bad magic; expected \\x93NUMPY)");
    const int major = prefix[6];
    if (major < 1 || major > 3) {
        throw engine::InputError(path, "unsupported .npy format version " + std::to_string(major) +
                                           "." + std::to_string(prefix[7]));
    }
    // Version 1.0 stores the header length in 2 bytes, 2.0 and 3.0 in 4.
    const int len_bytes = major == 1 ? 2 : 4;
    in_.read(reinterpret_cast<char*>(prefix + 8), len_bytes);
    if (in_.gcount() < len_bytes) throw engine::InputError(path, "truncated .npy header");
    const uint32_t header_len = read_le(prefix + 8, len_bytes);
    const uintmax_t data_offset = 8u + static_cast<uintmax_t>(len_bytes) + header_len;
    if (data_offset > file_size) throw engine::InputError(path, "truncated .npy header");
    std::string dict(header_len, '\0');
    in_.read(dict.data(), header_len);
    if (static_cast<uintmax_t>(in_.gcount()) != header_len)
        throw engine::InputError(path, "truncated .npy header");
    while (!dict.empty() && (dict.back() == '\n' || dict.back() == ' ')) dict.pop_back();

    header_ = parse_npy_header(dict, path);
    if (header_.fortran_order)
        throw engine::InputError(path, "Fortran-ordered arrays are not supported (C order only)");
    itemsize_ = npy_itemsize(header_.descr);
    if (itemsize_ == 0) {
        const bool big = !header_.descr.empty() && header_.descr[0] == '>';
        throw engine::InputError(path, "unsupported dtype '" + header_.descr + "'" +
                                           (big ? " (big-endian)" : "") +
                                           "; supported: " + npy_dtype_list());
    }

    // Size check before anything is allocated: the product of the dimensions must fit in the
    // bytes the file has, checked one factor at a time so that it cannot overflow.
    const uintmax_t available = file_size - data_offset;
    uintmax_t numel = 1;
    bool too_big = false;
    for (int64_t d : header_.shape) {
        if (d == 0) {
            numel = 0;
            too_big = false;
            break;
        }
        if (!too_big && numel > available / static_cast<uintmax_t>(d)) too_big = true;
        if (!too_big) numel *= static_cast<uintmax_t>(d);
    }
    const uintmax_t expected = numel * itemsize_;
    if (too_big || expected > available) {
        throw engine::InputError(path, "truncated data: shape " + shape_string(header_.shape) +
                                           " of '" + header_.descr + "' needs more than the " +
                                           std::to_string(available) + " bytes in the file");
    }
    if (expected < available) {
        throw engine::InputError(path, std::to_string(available - expected) +
                                           " unexpected bytes after the data of shape " +
                                           shape_string(header_.shape));
    }
    numel_ = numel;
    data_bytes_ = expected;
}

void NpyFile::read_data(void* dst) {
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(data_bytes_));
    if (static_cast<uint64_t>(in_.gcount()) != data_bytes_)
        throw engine::InputError(path_, "read failed: " + std::string(std::strerror(errno)));
}

NpyArray read_npy_array(const std::string& path) {
    NpyFile file(path);
    std::vector<char> raw(static_cast<size_t>(file.data_bytes()));
    file.read_data(raw.data());
    NpyArray a;
    a.dtype = file.header().descr;
    a.shape = file.header().shape;
    const std::string& t = a.dtype;
    if (t == "<f4")
        to_double<float>(raw, a.values);
    else if (t == "<f8")
        to_double<double>(raw, a.values);
    else if (t == "<i8")
        to_double<int64_t>(raw, a.values);
    else if (t == "<i4")
        to_double<int32_t>(raw, a.values);
    else if (t == "|u1" || t == "|b1")  // a bool byte is 0 or 1
        to_double<uint8_t>(raw, a.values);
    else
        throw engine::InputError(path, "no conversion to double for dtype '" + t + "'");
    return a;
}

}  // namespace analysis
