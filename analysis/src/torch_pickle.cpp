// torch.save zip archives (see torch_pickle.h): PyTorchStreamReader for the zip and a minimal
// unpickler for the state dict in data.pkl, because LibTorch 1.13's pickle_load turns
// collections.OrderedDict into None. Storages are copied from the archive as host memory.
#include "analysis/torch_pickle.h"

#include <caffe2/serialize/inline_container.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "engine/errors.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "torch_pickle.cpp reads torch.save storages (little-endian) as host memory");
#endif

namespace analysis {

namespace fs = std::filesystem;

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
/// True for torch.save's legacy (pre-1.6, _use_new_zipfile_serialization=False) format: a
/// pickle stream that opens with torch's magic number 0x1950a86a20f9469cfc6c as a LONG1
/// (torch/serialization.py, MAGIC_NUMBER), possibly after a protocol 4+ FRAME.
bool legacy_torch_save(const std::string& path) {
    static const unsigned char kMagic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                           0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    std::ifstream in(path, std::ios::binary);
    unsigned char head[32] = {};
    in.read(reinterpret_cast<char*>(head), sizeof head);
    const auto n = static_cast<size_t>(in.gcount());
    if (n < 2 + sizeof kMagic || head[0] != 0x80) return false;  // PROTO opcode
    for (size_t at = 2; at + sizeof kMagic <= n && at <= 11; ++at)
        if (std::memcmp(head + at, kMagic, sizeof kMagic) == 0) return true;
    return false;
}

}  // namespace

NamedTensors read_torch_state_dict(const std::string& path) {
    if (!fs::is_regular_file(path)) throw engine::CheckpointError(path, "no such file");
    if (legacy_torch_save(path)) {
        throw engine::CheckpointError(
            path,
            "legacy (pre-1.6, non-zip) torch.save format, which LibTorch cannot read; convert it "
            "once with python -c \"import torch; torch.save(torch.load('" +
                path + "'), '" + path + "', _use_new_zipfile_serialization=True)\"");
    }
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
