// Checkpoint formats of the HF ecosystem: safetensors reading and writing (format:
// github.com/huggingface/safetensors, "Format") and torch.save zip archives (pytorch_model.bin):
// PyTorchStreamReader for the zip and a minimal unpickler for the state dict, because LibTorch
// 1.13's pickle_load turns collections.OrderedDict into None.
#include "analysis/safetensors.h"

#include <caffe2/serialize/inline_container.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

#include "engine/errors.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors.cpp reads and writes host memory as little-endian data");
#endif

namespace analysis {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

namespace {

struct Dtype {
    const char* name;
    torch::ScalarType type;
};

// The safetensors dtype names (safetensors/src/tensor.rs, Dtype) supported here.
const Dtype kDtypes[] = {
    {"F32", torch::kFloat},  {"F16", torch::kHalf},  {"BF16", torch::kBFloat16},
    {"F64", torch::kDouble}, {"I64", torch::kLong},  {"I32", torch::kInt},
    {"U8", torch::kByte},    {"BOOL", torch::kBool},
};

const Dtype* dtype_by_name(const std::string& name) {
    for (const Dtype& d : kDtypes)
        if (name == d.name) return &d;
    return nullptr;
}

const Dtype* dtype_by_type(torch::ScalarType type) {
    for (const Dtype& d : kDtypes)
        if (type == d.type) return &d;
    return nullptr;
}

std::string shape_string(c10::IntArrayRef sizes) {
    std::ostringstream os;
    os << sizes;
    return os.str();
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

// ---- safetensors ------------------------------------------------------------------------------

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
        const Dtype* dtype = dtype_by_name(jd.get<std::string>());
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
        const Dtype* dtype = dtype_by_type(tensor.scalar_type());
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

// ---- torch.save archives ----------------------------------------------------------------------

namespace {

// A minimal unpickler for torch.save state dicts. LibTorch 1.13's torch::pickle_load turns
// collections.OrderedDict (what nn.Module.state_dict() returns, so every HF pytorch_model.bin)
// into None, so the subset a state dict uses is interpreted here: dicts (plain or ordered; a
// BUILD with _metadata is ignored), tuples, lists, scalars, strings, the storages of the zip
// archive (persistent ids) and torch._utils._rebuild_tensor_v2 / _rebuild_parameter.
struct PyValue;
using PyRef = std::shared_ptr<PyValue>;
struct PyValue {
    enum Kind {
        kNone,
        kBool,
        kInt,
        kFloat,
        kString,
        kTuple,
        kList,
        kDict,
        kGlobal,
        kTensor,
        kOpaque
    };
    Kind kind = kNone;
    int64_t i = 0;
    double f = 0;
    std::string s;                              // string, or "module.name" of a global
    std::vector<PyRef> items;                   // tuple, list
    std::vector<std::pair<PyRef, PyRef>> dict;  // in insertion order
    torch::Tensor tensor;
};

PyRef make(PyValue::Kind kind) {
    auto v = std::make_shared<PyValue>();
    v->kind = kind;
    return v;
}

torch::ScalarType storage_dtype(const std::string& global, const std::string& path) {
    static const std::pair<const char*, torch::ScalarType> kStorages[] = {
        {"torch.FloatStorage", torch::kFloat},       {"torch.HalfStorage", torch::kHalf},
        {"torch.BFloat16Storage", torch::kBFloat16}, {"torch.DoubleStorage", torch::kDouble},
        {"torch.LongStorage", torch::kLong},         {"torch.IntStorage", torch::kInt},
        {"torch.ShortStorage", torch::kShort},       {"torch.CharStorage", torch::kChar},
        {"torch.ByteStorage", torch::kByte},         {"torch.BoolStorage", torch::kBool},
        {"torch.UntypedStorage", torch::kByte}};
    for (const auto& [name, type] : kStorages)
        if (global == name) return type;
    throw engine::CheckpointError(path, "unsupported storage type " + global);
}

class StateDictUnpickler {
  public:
    StateDictUnpickler(const std::string& path, caffe2::serialize::PyTorchStreamReader& zip)
        : path_(path), zip_(zip) {
        auto [data, size] = zip_.getRecord("data.pkl");
        const char* p = static_cast<const char*>(data.get());
        bytes_.assign(p, p + size);
    }

    PyRef run() {
        while (true) {
            const auto op = static_cast<uint8_t>(byte());
            switch (op) {
                case 0x80: skip(1); break;  // PROTO
                case 0x95: skip(8); break;  // FRAME
                case '.': return pop();     // STOP
                case '(': marks_.push_back(stack_.size()); break;
                case '0': pop(); break;
                case '1': pop_mark(); break;
                case '2': stack_.push_back(stack_.at(stack_.size() - 1)); break;
                case 'N': stack_.push_back(make(PyValue::kNone)); break;
                case 0x88:
                case 0x89: {
                    auto v = make(PyValue::kBool);
                    v->i = op == 0x88;
                    stack_.push_back(v);
                    break;
                }
                case 'J': push_int(static_cast<int32_t>(le(4))); break;
                case 'K': push_int(static_cast<int64_t>(le(1))); break;
                case 'M': push_int(static_cast<int64_t>(le(2))); break;
                case 0x8a: {  // LONG1: little-endian two's complement of n bytes
                    const size_t n = le(1);
                    if (n > 8) fail("integer wider than 64 bits");
                    uint64_t u = n ? le(n) : 0;
                    if (n && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t(0) << (8 * n);
                    push_int(static_cast<int64_t>(u));
                    break;
                }
                case 'G': {  // BINFLOAT, big-endian double
                    uint64_t u = 0;
                    for (int k = 0; k < 8; ++k) u = (u << 8) | static_cast<uint8_t>(byte());
                    auto v = make(PyValue::kFloat);
                    std::memcpy(&v->f, &u, 8);
                    stack_.push_back(v);
                    break;
                }
                case 'X':
                case 'T':
                case 'B': push_string(le(4)); break;
                case 0x8c:
                case 'U':
                case 'C': push_string(le(1)); break;
                case 0x8d:
                case 0x8e: push_string(le(8)); break;
                case ')': stack_.push_back(make(PyValue::kTuple)); break;
                case 't': push_sequence(PyValue::kTuple, pop_mark()); break;
                case 0x85:
                case 0x86:
                case 0x87: {
                    const size_t n = op - 0x84;
                    if (stack_.size() < n) fail("stack underflow");
                    std::vector<PyRef> items(stack_.end() - n, stack_.end());
                    stack_.resize(stack_.size() - n);
                    push_sequence(PyValue::kTuple, std::move(items));
                    break;
                }
                case ']': stack_.push_back(make(PyValue::kList)); break;
                case 'l': push_sequence(PyValue::kList, pop_mark()); break;
                case 'a': {
                    auto v = pop();
                    top()->items.push_back(v);
                    break;
                }
                case 'e': {
                    auto items = pop_mark();
                    for (auto& v : items) top()->items.push_back(v);
                    break;
                }
                case '}': stack_.push_back(make(PyValue::kDict)); break;
                case 'd': {
                    auto d = make(PyValue::kDict);
                    set_items(d, pop_mark());
                    stack_.push_back(d);
                    break;
                }
                case 's': {
                    auto v = pop();
                    auto k = pop();
                    set_items(top(), {k, v});
                    break;
                }
                case 'u': {
                    auto items = pop_mark();
                    set_items(top(), items);
                    break;
                }
                case 'c': {
                    auto module = line();
                    auto name = line();
                    push_global(module + "." + name);
                    break;
                }
                case 0x93: {  // STACK_GLOBAL
                    auto name = pop(), module = pop();
                    push_global(module->s + "." + name->s);
                    break;
                }
                case 'R': {
                    auto args = pop();
                    auto fn = pop();
                    stack_.push_back(call(fn, args));
                    break;
                }
                case 0x81: {
                    auto args = pop();
                    auto cls = pop();
                    stack_.push_back(call(cls, args));
                    break;
                }
                case 'b': pop(); break;  // BUILD: its state (OrderedDict._metadata) is unused
                case 'q': memo(le(1)); break;
                case 'r': memo(le(4)); break;
                case 0x94: memo(memo_.size()); break;  // MEMOIZE
                case 'h': get(le(1)); break;
                case 'j': get(le(4)); break;
                case 'Q': stack_.push_back(persistent_load(pop())); break;
                default: {
                    std::ostringstream os;
                    os << "unsupported pickle opcode 0x" << std::hex << int(op) << " at byte "
                       << std::dec << pos_ - 1 << " of data.pkl";
                    fail(os.str());
                }
            }
        }
    }

  private:
    [[noreturn]] void fail(const std::string& why) const {
        throw engine::CheckpointError(path_, "cannot read the state dict: " + why);
    }
    char byte() {
        if (pos_ >= bytes_.size()) fail("data.pkl ends early");
        return bytes_[pos_++];
    }
    void skip(size_t n) {
        if (pos_ + n > bytes_.size()) fail("data.pkl ends early");
        pos_ += n;
    }
    uint64_t le(size_t n) {
        uint64_t u = 0;
        for (size_t k = 0; k < n; ++k)
            u |= static_cast<uint64_t>(static_cast<uint8_t>(byte())) << (8 * k);
        return u;
    }
    std::string line() {
        std::string s;
        for (char c = byte(); c != '\n'; c = byte()) s += c;
        return s;
    }
    PyRef pop() {
        if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
            fail("stack underflow");
        auto v = stack_.back();
        stack_.pop_back();
        return v;
    }
    PyRef top() {
        if (stack_.empty()) fail("stack underflow");
        return stack_.back();
    }
    std::vector<PyRef> pop_mark() {
        if (marks_.empty()) fail("no MARK");
        const size_t m = marks_.back();
        marks_.pop_back();
        std::vector<PyRef> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
        stack_.resize(m);
        return items;
    }
    void push_int(int64_t value) {
        auto v = make(PyValue::kInt);
        v->i = value;
        stack_.push_back(v);
    }
    void push_string(uint64_t n) {
        if (pos_ + n > bytes_.size()) fail("data.pkl ends early");
        auto v = make(PyValue::kString);
        v->s.assign(bytes_.data() + pos_, n);
        pos_ += n;
        stack_.push_back(v);
    }
    void push_sequence(PyValue::Kind kind, std::vector<PyRef> items) {
        auto v = make(kind);
        v->items = std::move(items);
        stack_.push_back(v);
    }
    void push_global(const std::string& name) {
        auto v = make(PyValue::kGlobal);
        v->s = name;
        stack_.push_back(v);
    }
    void set_items(const PyRef& dict, const std::vector<PyRef>& kv) {
        if (dict->kind != PyValue::kDict) return;  // e.g. SETITEMS on an opaque object
        for (size_t k = 0; k + 1 < kv.size(); k += 2) dict->dict.emplace_back(kv[k], kv[k + 1]);
    }
    void memo(uint64_t index) { memo_[index] = top(); }
    void get(uint64_t index) {
        auto it = memo_.find(index);
        if (it == memo_.end()) fail("memo entry " + std::to_string(index) + " missing");
        stack_.push_back(it->second);
    }

    PyRef call(const PyRef& fn, const PyRef& args) {
        const std::string name = fn->kind == PyValue::kGlobal ? fn->s : "";
        const auto& a = args->items;
        if (name == "collections.OrderedDict" || name == "builtins.dict")
            return make(PyValue::kDict);
        // LibTorch's torch::pickle_save (e.g. `tupe export --out FILE.pt`) wraps a typed dict
        // as restore_type_tag(dict, "Dict[str, Tensor]"); the value is the dict itself.
        if (name == "torch.jit._pickle.restore_type_tag") {
            if (a.empty()) fail(name + ": unexpected arguments");
            return a[0];
        }
        if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
            if (a.size() < 4 || a[0]->kind != PyValue::kTensor)
                fail(name + ": unexpected arguments");
            std::vector<int64_t> size, stride;
            for (const auto& x : a[2]->items) size.push_back(x->i);
            for (const auto& x : a[3]->items) stride.push_back(x->i);
            auto t = make(PyValue::kTensor);
            t->tensor = a[0]->tensor.as_strided(size, stride, a[1]->i);
            return t;
        }
        if (name == "torch._utils._rebuild_parameter") {
            if (a.empty() || a[0]->kind != PyValue::kTensor) fail(name + ": unexpected arguments");
            return a[0];
        }
        return make(PyValue::kOpaque);  // anything else: kept only as a placeholder
    }

    PyRef persistent_load(const PyRef& pid) {
        // ('storage', storage_type, key, location, numel), as torch.serialization writes it.
        const auto& a = pid->items;
        if (pid->kind != PyValue::kTuple || a.size() < 3 || a[0]->s != "storage")
            fail("unexpected persistent id");
        const std::string& key = a[2]->s;
        auto cached = storages_.find(key);
        if (cached != storages_.end()) return cached->second;
        const auto dtype = storage_dtype(a[1]->s, path_);
        auto [data, size] = zip_.getRecord("data/" + key);
        auto tensor = torch::empty({0}, torch::TensorOptions().dtype(dtype));
        const auto item = static_cast<size_t>(tensor.element_size());
        if (size % item != 0) fail("storage " + key + " has a partial element");
        tensor = torch::empty({static_cast<int64_t>(size / item)}, tensor.options());
        if (size) std::memcpy(tensor.data_ptr(), data.get(), size);
        auto v = make(PyValue::kTensor);
        v->tensor = tensor;
        storages_[key] = v;
        return v;
    }

    std::string path_;
    caffe2::serialize::PyTorchStreamReader& zip_;
    std::vector<char> bytes_;
    size_t pos_ = 0;
    std::vector<PyRef> stack_;
    std::vector<size_t> marks_;
    std::unordered_map<uint64_t, PyRef> memo_;
    std::unordered_map<std::string, PyRef> storages_;
};
}  // namespace

NamedTensors read_torch_state_dict(const std::string& path) {
    if (!fs::is_regular_file(path)) throw engine::CheckpointError(path, "no such file");
    PyRef root;
    try {
        caffe2::serialize::PyTorchStreamReader zip(path);
        root = StateDictUnpickler(path, zip).run();
    } catch (const engine::CheckpointError&) {
        throw;
    } catch (const std::exception& e) {
        std::string why = e.what();
        why = why.substr(0, why.find('\n'));
        throw engine::CheckpointError(
            path, "cannot read as a torch.save archive (zip format, torch >= 1.6): " + why);
    }
    if (!root || root->kind != PyValue::kDict)
        throw engine::CheckpointError(path, "not a state dict (expected a dict of tensors)");
    NamedTensors out;
    for (const auto& [key, value] : root->dict) {
        if (key->kind != PyValue::kString)
            throw engine::CheckpointError(path, "state dict key is not a string");
        if (value->kind != PyValue::kTensor)
            throw engine::CheckpointError(path, "entry '" + key->s + "' is not a tensor");
        out.emplace_back(key->s, value->tensor);
    }
    return out;
}

}  // namespace analysis
