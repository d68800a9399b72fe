// TensorBoard event files without protobuf: a TFRecord stream (tensorflow/core/lib/io/
// record_writer.cc: uint64 length, masked CRC-32C of it, data, masked CRC-32C of the data) of
// tensorflow.Event messages (tensorflow/core/util/event.proto, tensorboard summary.proto),
// encoded by hand. `tensorboard --logdir runs/` reads them; metrics.tsv stays the run's record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }
/// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8 of crc32c(bytes).
uint32_t masked_crc32c(std::string_view bytes);

/// One TFRecord: length (uint64 LE), masked_crc32c(length bytes), data, masked_crc32c(data).
std::string tfrecord(std::string_view data);
/// The serialized Event{wall_time, step, summary{value{tag, simple_value}}} of one scalar.
std::string scalar_event(const std::string& tag, int64_t step, float value, double wall_time);

/// Seconds since the Unix epoch, as TensorBoard's wall_time.
double unix_wall_time();

/// Appends scalars to a new events file of `dir`, named as TensorFlow's writer names them:
/// events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>, n making it unique. The first
/// record says file_version "brain.Event:2". Several files in one folder are one run to
/// TensorBoard (a resumed run adds one; see add_session_start). Writes are buffered until
/// flush(). Every failure (folder, open, write, flush) throws InputError naming the file.
class TensorBoardWriter {
  public:
    explicit TensorBoardWriter(const std::string& dir);
    ~TensorBoardWriter();
    TensorBoardWriter(const TensorBoardWriter&) = delete;
    TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

    /// `value` is stored as a float (Summary.Value.simple_value).
    void add_scalar(const std::string& tag, int64_t step, double value, double wall_time);
    void add_scalar(const std::string& tag, int64_t step, double value) {
        add_scalar(tag, step, value, unix_wall_time());
    }
    /// A SessionLog START at `step`: TensorBoard's event accumulator then drops the points of
    /// earlier files at steps >= `step` (those a killed run wrote after its last checkpoint).
    void add_session_start(int64_t step, double wall_time);
    void flush();

    const std::string& path() const { return path_; }

  private:
    void write(const std::string& event);

    std::string path_;
    std::FILE* file_ = nullptr;
};

/// One scalar of an events file.
struct TensorBoardScalar {
    std::string tag;
    int64_t step = 0;
    float value = 0.f;
    double wall_time = 0;
};

/// One Event of an events file, as far as this writer uses the message.
struct TensorBoardEvent {
    double wall_time = 0;
    int64_t step = 0;
    std::string file_version;                ///< Empty unless this is the file's version record.
    bool session_start = false;              ///< A SessionLog with status START.
    std::vector<TensorBoardScalar> scalars;  ///< Summary values with a simple_value.
};

/// Every event of a TFRecord events file, in file order; fields this writer does not use are
/// skipped. Throws InputError naming the file and the byte offset for a missing file, a
/// truncated record, a CRC mismatch (length or data) or a malformed message.
std::vector<TensorBoardEvent> read_tensorboard_events(const std::string& path);
/// The scalars of read_tensorboard_events, in file order.
std::vector<TensorBoardScalar> read_tensorboard_scalars(const std::string& path);
/// The events files of `dir` (names containing ".tfevents."), sorted by name (TensorBoard's
/// reading order). Empty when there are none or `dir` does not exist.
std::vector<std::string> tensorboard_event_files(const std::string& dir);

}  // namespace engine
