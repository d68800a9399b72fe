// TensorBoard events files by hand (see tensorboard.h). Protobuf wire format: a field is a
// varint key (number << 3 | wire type) and a value: 0 varint, 1 fixed64, 2 length-delimited,
// 5 fixed32, little-endian throughout. The messages, as far as they are used here:
//   Event      { double wall_time = 1; int64 step = 2; string file_version = 3;
//                Summary summary = 5; SessionLog session_log = 7; }
//   Summary    { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
//   SessionLog { SessionStatus status = 1; }   (START = 1)
#include "engine/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/errors.h"

namespace engine {

namespace fs = std::filesystem;

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
    std::array<uint32_t, 256> table{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
    return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

constexpr uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7f) | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire_type) {
    put_varint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}
template <typename T>
void put_little_endian(std::string& out, T bits) {
    for (size_t i = 0; i < sizeof(T); ++i)
        out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}
void put_double(std::string& out, int field, double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put_key(out, field, kFixed64);
    put_little_endian(out, bits);
}
void put_float(std::string& out, int field, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put_key(out, field, kFixed32);
    put_little_endian(out, bits);
}
void put_bytes(std::string& out, int field, std::string_view bytes) {
    put_key(out, field, kLengthDelimited);
    put_varint(out, bytes.size());
    out.append(bytes.data(), bytes.size());
}
// int64 fields are varints of the two's complement (a negative step takes 10 bytes).
void put_int64(std::string& out, int field, int64_t v) {
    put_key(out, field, kVarint);
    put_varint(out, static_cast<uint64_t>(v));
}

// Event's fixed head: wall_time and step.
std::string event_head(double wall_time, int64_t step) {
    std::string e;
    put_double(e, 1, wall_time);
    put_int64(e, 2, step);
    return e;
}

std::string errno_text() { return std::strerror(errno); }

// A protobuf message being parsed; failures name the file and the absolute byte offset.
class WireReader {
  public:
    WireReader(const std::string& path, std::string_view bytes, uint64_t base)
        : path_(path), bytes_(bytes), base_(base) {}

    bool done() const { return pos_ >= bytes_.size(); }
    uint64_t offset() const { return base_ + pos_; }

    uint64_t varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (done()) fail("varint runs past the end of its message");
            const auto b = static_cast<uint8_t>(bytes_[pos_++]);
            v |= static_cast<uint64_t>(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
        }
        fail("varint longer than 10 bytes");
    }
    template <typename T>
    T little_endian() {
        if (bytes_.size() - pos_ < sizeof(T)) fail("fixed-width value runs past its message");
        T v = 0;
        for (size_t i = 0; i < sizeof(T); ++i)
            v |= static_cast<T>(static_cast<uint8_t>(bytes_[pos_++])) << (8 * i);
        return v;
    }
    double fixed_double() {
        const uint64_t bits = little_endian<uint64_t>();
        double v;
        std::memcpy(&v, &bits, sizeof v);
        return v;
    }
    float fixed_float() {
        const uint32_t bits = little_endian<uint32_t>();
        float v;
        std::memcpy(&v, &bits, sizeof v);
        return v;
    }
    // A length-delimited value; `start` is set to its absolute offset.
    std::string_view bytes(uint64_t& start) {
        const uint64_t n = varint();
        if (n > bytes_.size() - pos_) fail("length-delimited field runs past its message");
        start = offset();
        std::string_view v = bytes_.substr(pos_, n);
        pos_ += n;
        return v;
    }
    void skip(int wire_type) {
        uint64_t ignored = 0;
        switch (wire_type) {
            case kVarint: varint(); break;
            case kFixed64: little_endian<uint64_t>(); break;
            case kLengthDelimited: bytes(ignored); break;
            case kFixed32: little_endian<uint32_t>(); break;
            default: fail("unsupported wire type " + std::to_string(wire_type));
        }
    }
    // The next key as (field, wire type); `at` is set to its absolute offset.
    std::pair<uint64_t, int> key(uint64_t& at) {
        at = offset();
        const uint64_t k = varint();
        return {k >> 3, static_cast<int>(k & 7)};
    }
    void expect(int wire_type, int wanted, uint64_t at, const char* field) const {
        if (wire_type != wanted)
            fail_at(at, std::string(field) + " has wire type " + std::to_string(wire_type) +
                            ", expected " + std::to_string(wanted));
    }
    [[noreturn]] void fail(const std::string& what) const { fail_at(offset(), what); }
    [[noreturn]] void fail_at(uint64_t at, const std::string& what) const {
        throw InputError(path_, "byte " + std::to_string(at) + ": " + what);
    }

  private:
    const std::string& path_;
    std::string_view bytes_;
    uint64_t base_;
    size_t pos_ = 0;
};

void parse_value(WireReader r, TensorBoardEvent& event) {
    TensorBoardScalar s;
    s.step = event.step;
    s.wall_time = event.wall_time;
    bool has_value = false;
    while (!r.done()) {
        uint64_t at = 0, start = 0;
        const auto [field, type] = r.key(at);
        if (field == 1) {
            r.expect(type, kLengthDelimited, at, "Value.tag");
            s.tag = std::string(r.bytes(start));
        } else if (field == 2) {
            r.expect(type, kFixed32, at, "Value.simple_value");
            s.value = r.fixed_float();
            has_value = true;
        } else {
            r.skip(type);
        }
    }
    if (has_value) event.scalars.push_back(std::move(s));
}

void parse_summary(const std::string& path, WireReader r, TensorBoardEvent& event) {
    while (!r.done()) {
        uint64_t at = 0, start = 0;
        const auto [field, type] = r.key(at);
        if (field == 1) {
            r.expect(type, kLengthDelimited, at, "Summary.value");
            const std::string_view v = r.bytes(start);
            parse_value(WireReader(path, v, start), event);
        } else {
            r.skip(type);
        }
    }
}

TensorBoardEvent parse_event(const std::string& path, std::string_view data, uint64_t base) {
    TensorBoardEvent event;
    WireReader r(path, data, base);
    // Summary and SessionLog are parsed after the whole Event: its step and wall_time may come
    // after them on the wire.
    std::vector<std::pair<std::string_view, uint64_t>> summaries;
    while (!r.done()) {
        uint64_t at = 0, start = 0;
        const auto [field, type] = r.key(at);
        switch (field) {
            case 1:
                r.expect(type, kFixed64, at, "Event.wall_time");
                event.wall_time = r.fixed_double();
                break;
            case 2:
                r.expect(type, kVarint, at, "Event.step");
                event.step = static_cast<int64_t>(r.varint());
                break;
            case 3:
                r.expect(type, kLengthDelimited, at, "Event.file_version");
                event.file_version = std::string(r.bytes(start));
                break;
            case 5: {
                r.expect(type, kLengthDelimited, at, "Event.summary");
                const std::string_view s = r.bytes(start);
                summaries.emplace_back(s, start);
                break;
            }
            case 7: {
                r.expect(type, kLengthDelimited, at, "Event.session_log");
                WireReader log(path, r.bytes(start), start);
                while (!log.done()) {
                    uint64_t log_at = 0;
                    const auto [log_field, log_type] = log.key(log_at);
                    if (log_field == 1 && log_type == kVarint)
                        event.session_start = log.varint() == 1;  // SessionLog.START
                    else
                        log.skip(log_type);
                }
                break;
            }
            default: r.skip(type);
        }
    }
    for (const auto& [bytes, start] : summaries)
        parse_summary(path, WireReader(path, bytes, start), event);
    return event;
}

uint32_t read_u32(const char* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
    return v;
}
uint64_t read_u64(const char* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
    return v;
}

std::string hostname() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
    std::string host = name;
    std::replace(host.begin(), host.end(), '/', '_');
    return host;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
    const auto* p = static_cast<const uint8_t*>(data);
    crc = ~crc;
    for (size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

uint32_t masked_crc32c(std::string_view bytes) { return mask_crc(crc32c(bytes)); }

std::string tfrecord(std::string_view data) {
    std::string length;
    put_little_endian(length, static_cast<uint64_t>(data.size()));
    std::string out = length;
    put_little_endian(out, masked_crc32c(length));
    out.append(data.data(), data.size());
    put_little_endian(out, masked_crc32c(data));
    return out;
}

std::string scalar_event(const std::string& tag, int64_t step, float value, double wall_time) {
    std::string v;  // Summary.Value
    put_bytes(v, 1, tag);
    put_float(v, 2, value);
    std::string summary;
    put_bytes(summary, 1, v);
    std::string e = event_head(wall_time, step);
    put_bytes(e, 5, summary);
    return e;
}

double unix_wall_time() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
        throw InputError(dir, "cannot create the folder for TensorBoard events: " + ec.message());
    // One process may open several writers in one second: a counter, and O_EXCL in case
    // another process (or a rerun with a recycled pid) chose the same name.
    static std::atomic<uint64_t> counter{0};
    const double now = unix_wall_time();
    const std::string stem = "events.out.tfevents." + std::to_string(static_cast<long long>(now)) +
                             "." + hostname() + "." +
                             std::to_string(static_cast<long long>(getpid())) + ".";
    for (int attempt = 0; attempt < 1000 && !file_; ++attempt) {
        path_ = (fs::path(dir) / (stem + std::to_string(counter++))).string();
        const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            if (errno == EEXIST) continue;
            throw InputError(path_, "cannot create TensorBoard events file: " + errno_text());
        }
        file_ = ::fdopen(fd, "wb");
        if (!file_) {
            const std::string why = errno_text();
            ::close(fd);
            throw InputError(path_, "cannot open TensorBoard events file: " + why);
        }
    }
    if (!file_) throw InputError(path_, "cannot find an unused TensorBoard events file name");
    std::string version;
    put_double(version, 1, now);
    put_bytes(version, 3, "brain.Event:2");
    try {
        write(version);
        flush();
    } catch (...) {
        std::fclose(file_);  // no destructor runs for a constructor that throws
        throw;
    }
}

TensorBoardWriter::~TensorBoardWriter() {
    if (file_) std::fclose(file_);  // errors ignored: flush() is where they are reported
}

void TensorBoardWriter::add_scalar(const std::string& tag, int64_t step, double value,
                                   double wall_time) {
    write(scalar_event(tag, step, static_cast<float>(value), wall_time));
}

void TensorBoardWriter::add_session_start(int64_t step, double wall_time) {
    std::string e = event_head(wall_time, step);
    std::string log;
    put_int64(log, 1, 1);  // SessionLog.status = START
    put_bytes(e, 7, log);
    write(e);
}

void TensorBoardWriter::write(const std::string& event) {
    const std::string record = tfrecord(event);
    if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
        throw InputError(path_, "cannot write TensorBoard event: " + errno_text());
}

void TensorBoardWriter::flush() {
    if (std::fflush(file_) != 0)
        throw InputError(path_, "cannot write TensorBoard events: " + errno_text());
}

std::vector<TensorBoardEvent> read_tensorboard_events(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "cannot open TensorBoard events file");
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw InputError(path, "cannot read TensorBoard events file");
    std::vector<TensorBoardEvent> events;
    uint64_t pos = 0;
    const uint64_t size = bytes.size();
    auto fail = [&](uint64_t at, const std::string& what) {
        throw InputError(path, "byte " + std::to_string(at) + ": " + what);
    };
    while (pos < size) {
        const uint64_t record = pos;
        if (size - pos < 12)
            fail(record,
                 "truncated record header (" + std::to_string(size - pos) + " of 12 bytes)");
        const uint64_t length = read_u64(bytes.data() + pos);
        const uint32_t stored_length_crc = read_u32(bytes.data() + pos + 8);
        const uint32_t length_crc = masked_crc32c(std::string_view(bytes.data() + pos, 8));
        if (stored_length_crc != length_crc)
            fail(record, "record length fails its CRC-32C (a corrupt or non-TFRecord file)");
        pos += 12;
        if (length > size - pos || size - pos - length < 4)
            fail(record, "truncated record: " + std::to_string(length) +
                             " data bytes and a CRC "
                             "announced, " +
                             std::to_string(size - pos) + " bytes left");
        const std::string_view data(bytes.data() + pos, length);
        if (read_u32(bytes.data() + pos + length) != masked_crc32c(data))
            fail(record, "record data (bytes " + std::to_string(pos) + " to " +
                             std::to_string(pos + length) + ") fails its CRC-32C");
        events.push_back(parse_event(path, data, pos));
        pos += length + 4;
    }
    return events;
}

std::vector<TensorBoardScalar> read_tensorboard_scalars(const std::string& path) {
    std::vector<TensorBoardScalar> scalars;
    for (auto& event : read_tensorboard_events(path))
        for (auto& s : event.scalars) scalars.push_back(std::move(s));
    return scalars;
}

std::vector<std::string> tensorboard_event_files(const std::string& dir) {
    std::vector<std::string> files;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().filename().string().find(".tfevents.") != std::string::npos &&
            it->is_regular_file(ec))
            files.push_back(it->path().string());
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace engine
