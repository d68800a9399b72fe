// libFuzzer target for TensorBoard event files (engine/tensorboard.h). The first byte picks one
// of three modes. 0: the rest is an events file for read_tensorboard_events, which must return
// events or throw engine::InputError (a truncated record, a CRC mismatch, a malformed message).
// 1: the rest is cut into messages (a length byte, then that many bytes), each framed as a
// TFRecord with correct CRCs (engine::tfrecord), so that the Event parser itself sees arbitrary
// bytes; the same promise. 2: the rest is cut into scalars (tag, step, value, wall time) that
// TensorBoardWriter writes and read_tensorboard_events reads back, which must give the same
// scalars, bit for bit (NaN as NaN), after the file-version record. Crashes, sanitizer reports,
// hangs and mismatches are bugs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "engine/errors.h"
#include "engine/tensorboard.h"
#include "fuzz_util.h"

namespace {

// Reads `n` bytes of the input into `out` (zero-padded past its end).
void take(const uint8_t*& data, size_t& size, void* out, size_t n) {
    std::memset(out, 0, n);
    const size_t k = n < size ? n : size;
    std::memcpy(out, data, k);
    data += k;
    size -= k;
}

// Equal bits, or both NaN (a float -> double -> float trip may quiet a signalling NaN).
template <class T>
bool same_bits(T a, T b) {
    return std::memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b);
}

void round_trip(const uint8_t* data, size_t size) {
    std::vector<engine::TensorBoardScalar> written;
    while (size > 0 && written.size() < 64) {
        engine::TensorBoardScalar s;
        uint8_t tag_size = 0;
        take(data, size, &tag_size, 1);
        const size_t n = tag_size % 24 < size ? tag_size % 24 : size;
        s.tag.assign(reinterpret_cast<const char*>(data), n);
        data += n;
        size -= n;
        take(data, size, &s.step, sizeof s.step);
        take(data, size, &s.value, sizeof s.value);
        take(data, size, &s.wall_time, sizeof s.wall_time);
        written.push_back(s);
    }
    const std::string dir = fuzz::scratch_path(".tfevents.d");
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    std::string file;
    {
        engine::TensorBoardWriter writer(dir);
        for (const auto& s : written) writer.add_scalar(s.tag, s.step, s.value, s.wall_time);
        writer.flush();
        file = writer.path();
    }
    const auto events = engine::read_tensorboard_events(file);
    std::filesystem::remove_all(dir, ignored);
    // One version record, then one event per scalar.
    if (events.size() != written.size() + 1 || events[0].file_version.empty()) __builtin_trap();
    for (size_t i = 0; i < written.size(); ++i) {
        const auto& e = events[i + 1];
        const auto& w = written[i];
        if (e.scalars.size() != 1 || e.session_start || !e.file_version.empty()) __builtin_trap();
        const auto& r = e.scalars[0];
        if (r.tag != w.tag || r.step != w.step || e.step != w.step) __builtin_trap();
        if (!same_bits(r.value, w.value) || !same_bits(e.wall_time, w.wall_time)) __builtin_trap();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const int mode = data[0] % 3;
    ++data;
    --size;
    if (mode == 2) {
        round_trip(data, size);
        return 0;
    }
    std::string file(reinterpret_cast<const char*>(data), size);
    if (mode == 1) {
        file.clear();
        while (size > 0) {
            uint8_t n = 0;
            take(data, size, &n, 1);
            const size_t k = n < size ? n : size;
            file += engine::tfrecord(std::string_view(reinterpret_cast<const char*>(data), k));
            data += k;
            size -= k;
        }
    }
    const std::string& path = fuzz::scratch_path(".tfevents");
    fuzz::write_file(path, reinterpret_cast<const uint8_t*>(file.data()), file.size());
    try {
        engine::read_tensorboard_events(path);
    } catch (const engine::InputError&) {
    }
    return 0;
}
