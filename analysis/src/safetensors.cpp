// The safetensors format (github.com/huggingface/safetensors, "Format"), read and written:
// an 8-byte little-endian header length, a JSON header of {dtype, shape, data_offsets} per
// tensor, then the raw bytes. torch.save archives (pytorch_model.bin) are torch_pickle.cpp.
#include "analysis/safetensors.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/errors.h"
#include "tensor_util.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors.cpp reads and writes host memory as little-endian data");
#endif

namespace analysis {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

using detail::shape_string;

namespace {

struct SafetensorsDtype {
    const char* name;
    torch::ScalarType type;
};

// The safetensors dtype names (safetensors/src/tensor.rs, SafetensorsDtype) supported here.
const SafetensorsDtype kSafetensorsDtypes[] = {
    {"F32", torch::kFloat},  {"F16", torch::kHalf},  {"BF16", torch::kBFloat16},
    {"F64", torch::kDouble}, {"I64", torch::kLong},  {"I32", torch::kInt},
    {"U8", torch::kByte},    {"BOOL", torch::kBool},
};

const SafetensorsDtype* dtype_by_name(const std::string& name) {
    for (const SafetensorsDtype& d : kSafetensorsDtypes)
        if (name == d.name) return &d;
    return nullptr;
}

const SafetensorsDtype* dtype_by_type(torch::ScalarType type) {
    for (const SafetensorsDtype& d : kSafetensorsDtypes)
        if (type == d.type) return &d;
    return nullptr;
}

std::vector<char> read_bytes(const std::string& path) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw engine::CheckpointError(path, "no such file");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw engine::CheckpointError(path, std::string("cannot open: ") + std::strerror(errno));
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw engine::CheckpointError(path, "read failed");
    return bytes;
}

}  // namespace

NamedTensors read_safetensors(const std::string& path) {
    const std::vector<char> bytes = read_bytes(path);
    if (bytes.size() < 8) {
        throw engine::CheckpointError(path, "truncated: " + std::to_string(bytes.size()) +
                                                " bytes, not even the 8-byte header length");
    }
    uint64_t header_len = 0;
    std::memcpy(&header_len, bytes.data(), 8);  // little-endian u64
    const uint64_t available = bytes.size() - 8;
    if (header_len > available) {
        throw engine::CheckpointError(path, "truncated or not safetensors: header length " +
                                                std::to_string(header_len) + " exceeds the " +
                                                std::to_string(available) + " bytes that follow");
    }
    ordered_json header;
    try {
        header = ordered_json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_len);
    } catch (const nlohmann::json::exception& e) {
        throw engine::CheckpointError(path, std::string("malformed JSON header: ") + e.what());
    }
    if (!header.is_object()) throw engine::CheckpointError(path, "header is not a JSON object");

    const char* data = bytes.data() + 8 + header_len;
    const uint64_t data_len = available - header_len;
    NamedTensors out;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        if (name == "__metadata__") continue;
        const ordered_json& entry = it.value();
        auto bad = [&](const std::string& why) {
            return engine::CheckpointError(path, "tensor '" + name + "': " + why);
        };
        if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
            !entry.contains("data_offsets"))
            throw bad("entry needs dtype, shape and data_offsets");
        const ordered_json& jd = entry["dtype"];
        const ordered_json& js = entry["shape"];
        const ordered_json& jo = entry["data_offsets"];
        if (!jd.is_string()) throw bad("dtype is not a string");
        const SafetensorsDtype* dtype = dtype_by_name(jd.get<std::string>());
        if (!dtype) {
            throw bad("unsupported dtype '" + jd.get<std::string>() +
                      "' (supported: F32, F16, BF16, F64, I64, I32, U8, BOOL)");
        }
        if (!js.is_array()) throw bad("shape is not an array");
        std::vector<int64_t> shape;
        for (const auto& s : js) {
            if (!s.is_number_unsigned()) throw bad("shape holds a non-integer or negative size");
            shape.push_back(s.get<int64_t>());
        }
        if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() ||
            !jo[1].is_number_unsigned())
            throw bad("data_offsets must be [begin, end]");
        const uint64_t begin = jo[0].get<uint64_t>(), end = jo[1].get<uint64_t>();
        if (begin > end || end > data_len) {
            throw bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") outside the " + std::to_string(data_len) + " data bytes (truncated?)");
        }
        auto tensor = torch::empty(shape, torch::TensorOptions().dtype(dtype->type));
        const uint64_t expected = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
        if (end - begin != expected) {
            throw bad(std::to_string(end - begin) + " data bytes for shape " +
                      shape_string(tensor.sizes()) + " of " + dtype->name + " (expected " +
                      std::to_string(expected) + ")");
        }
        if (expected > 0) std::memcpy(tensor.data_ptr(), data + begin, expected);
        out.emplace_back(name, std::move(tensor));
    }
    return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
    ordered_json header = ordered_json::object();
    if (!metadata.empty()) {
        ordered_json meta = ordered_json::object();
        for (const auto& [k, v] : metadata) meta[k] = v;
        header["__metadata__"] = meta;
    }
    std::vector<torch::Tensor> contiguous;
    std::set<std::string> names;
    uint64_t offset = 0;
    for (const auto& [name, tensor] : tensors) {
        if (name == "__metadata__" || !names.insert(name).second)
            throw engine::CheckpointError(path, "duplicate or reserved tensor name '" + name + "'");
        const SafetensorsDtype* dtype = dtype_by_type(tensor.scalar_type());
        if (!dtype) {
            throw engine::CheckpointError(path,
                                          "tensor '" + name + "': dtype " +
                                              std::string(c10::toString(tensor.scalar_type())) +
                                              " has no safetensors writer here");
        }
        auto t = tensor.detach().to(torch::kCPU).contiguous();
        const uint64_t n = static_cast<uint64_t>(t.numel()) * t.element_size();
        header[name] = {{"dtype", dtype->name},
                        {"shape", t.sizes().vec()},
                        {"data_offsets", {offset, offset + n}}};
        offset += n;
        contiguous.push_back(t);
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // the format allows trailing spaces

    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) {
            throw engine::CheckpointError(
                path, "cannot open '" + tmp + "' for writing: " + std::strerror(errno));
        }
        const uint64_t len = text.size();
        out.write(reinterpret_cast<const char*>(&len), 8);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        for (const auto& t : contiguous)
            out.write(static_cast<const char*>(t.data_ptr()),
                      static_cast<std::streamsize>(t.numel() * t.element_size()));
        out.flush();
        if (!out) {
            std::error_code ignored;
            fs::remove(tmp, ignored);
            throw engine::CheckpointError(path, "write failed");
        }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        throw engine::CheckpointError(path, "cannot rename the temporary file: " + ec.message());
    }
}

}  // namespace analysis
