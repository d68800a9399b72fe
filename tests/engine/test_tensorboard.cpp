// TensorBoard events files (engine/tensorboard.h): CRC-32C known answers, one scalar record
// byte for byte against the published framing and protobuf encoding written out by hand, the
// writer and reader round trip, corruption errors that name the byte, and a short pretraining
// run whose events hold exactly metrics.tsv's scalars.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "engine/config.h"
#include "engine/errors.h"
#include "engine/tensorboard.h"
#include "engine/trainer.h"
#include "support/test_support.h"

using namespace engine;
namespace fs = std::filesystem;

namespace {

std::string bytes_of(std::initializer_list<int> bytes) {
    std::string s;
    for (int b : bytes) s.push_back(static_cast<char>(b));
    return s;
}

std::string le32(uint32_t v) {
    return bytes_of({static_cast<int>(v & 0xff), static_cast<int>((v >> 8) & 0xff),
                     static_cast<int>((v >> 16) & 0xff), static_cast<int>(v >> 24)});
}

// The TFRecord mask, spelled out from the published formula (record_writer.cc).
uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

// Offsets of the records of a TFRecord stream.
std::vector<size_t> record_offsets(const std::string& file) {
    std::vector<size_t> offsets;
    for (size_t pos = 0; pos + 12 <= file.size();) {
        offsets.push_back(pos);
        uint64_t length = 0;
        for (int i = 0; i < 8; ++i)
            length |= static_cast<uint64_t>(static_cast<uint8_t>(file[pos + i])) << (8 * i);
        pos += 12 + length + 4;
    }
    return offsets;
}

std::string only_events_file(const fs::path& dir) {
    const auto files = tensorboard_event_files(dir.string());
    EXPECT_EQ(files.size(), 1u);
    return files.empty() ? std::string() : files.front();
}

class TensorBoardTest : public test_support::TempDirTest {
  protected:
    TensorBoardTest() : TempDirTest(test_support::per_test_name("tupe_tensorboard")) {}
};

}  // namespace

TEST(Crc32c, KnownAnswers) {
    EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
    EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
    // RFC 3720 B.4 (iSCSI): 32 bytes of 0xff, and 0x00..0x1f ascending.
    EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
    std::string ascending;
    for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
    EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
    EXPECT_EQ(crc32c(""), 0u);
    // Continuing a CRC over a second piece equals the CRC of the whole.
    EXPECT_EQ(crc32c("6789", 4, crc32c("12345")), crc32c("123456789"));
    EXPECT_EQ(masked_crc32c("123456789"), mask(0xE3069283u));
}

TEST_F(TensorBoardTest, ScalarRecordMatchesTheFramingByHand) {
    std::string path;
    {
        TensorBoardWriter writer(dir_.string());
        path = writer.path();
        writer.add_scalar("train/loss", 300, 2.5, 1700000000.5);
    }
    // Value { tag = "train/loss" (0x0A), simple_value = 2.5f (0x15) }
    const std::string value =
        bytes_of({0x0A, 10}) + "train/loss" + bytes_of({0x15, 0x00, 0x00, 0x20, 0x40});
    ASSERT_EQ(value.size(), 17u);
    const std::string summary = bytes_of({0x0A, 17}) + value;  // Summary { value (0x0A) }
    // Event { wall_time = 1700000000.5 (0x09, fixed64), step = 300 (0x10, varint AC 02),
    //         summary (0x2A) }
    const std::string event = bytes_of({0x09, 0x00, 0x00, 0x20, 0x40, 0xFC, 0x54, 0xD9, 0x41,  //
                                        0x10, 0xAC, 0x02,                                      //
                                        0x2A, 19}) +
                              summary;
    ASSERT_EQ(event.size(), 33u);
    const std::string length = bytes_of({33, 0, 0, 0, 0, 0, 0, 0});  // uint64 little-endian
    const std::string record =
        length + le32(mask(crc32c(length))) + event + le32(mask(crc32c(event)));

    EXPECT_EQ(scalar_event("train/loss", 300, 2.5f, 1700000000.5), event);
    EXPECT_EQ(tfrecord(event), record);
    const std::string file = test_support::read_file(path);
    const auto offsets = record_offsets(file);
    ASSERT_EQ(offsets.size(), 2u);  // the file version, then the scalar
    EXPECT_EQ(file.substr(offsets[1]), record);
    // The first record: Event { wall_time, file_version (0x1A) = "brain.Event:2" }, 24 bytes,
    // so the file opens with the 12 bytes every TensorFlow events file opens with.
    const std::string first = file.substr(0, offsets[1]);
    EXPECT_EQ(first.substr(0, 12), bytes_of({0x18, 0, 0, 0, 0, 0, 0, 0, 0xA3, 0x7F, 0x4B, 0x22}));
    EXPECT_NE(first.find(bytes_of({0x1A, 13}) + "brain.Event:2"), std::string::npos);
}

TEST_F(TensorBoardTest, WriterAndReaderRoundTrip) {
    const int64_t big = int64_t{1} << 40;
    const std::vector<TensorBoardScalar> written = {
        {"train/loss", 0, 3.25f, 1700000000.25},
        {"train/lr", -7, 1e-4f, 1700000001.0},
        {"validation/accuracy", big, -0.5f, 1700000002.0},
        {"validation/loss", std::numeric_limits<int64_t>::max(), 1e30f, 1700000003.0},
        {"x", std::numeric_limits<int64_t>::min(), -0.0f, 0.0},
        {"", 1, std::numeric_limits<float>::infinity(), 1.5},
    };
    std::string path;
    {
        TensorBoardWriter writer(dir_.string());
        path = writer.path();
        writer.add_session_start(12, 1699999999.0);
        for (const auto& s : written) writer.add_scalar(s.tag, s.step, s.value, s.wall_time);
        writer.flush();
    }
    // events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n> (a hostname may hold dots)
    const std::string name = fs::path(path).filename().string();
    const std::string prefix = "events.out.tfevents.";
    ASSERT_EQ(name.rfind(prefix, 0), 0u) << name;
    const size_t host = name.find('.', prefix.size()), n = name.rfind('.'),
                 pid = name.rfind('.', n - 1);
    auto digits = [&](size_t from, size_t to) {
        return to > from && name.find_first_not_of("0123456789", from) >= to;
    };
    EXPECT_TRUE(digits(prefix.size(), host) && host - prefix.size() == 10) << name;
    EXPECT_TRUE(pid > host + 1 && digits(pid + 1, n) && digits(n + 1, name.size())) << name;
    EXPECT_EQ(name.substr(pid + 1, n - pid - 1), test_support::process_id()) << name;

    const auto events = read_tensorboard_events(path);
    ASSERT_EQ(events.size(), written.size() + 2);
    EXPECT_EQ(events[0].file_version, "brain.Event:2");
    EXPECT_GT(events[0].wall_time, 1.6e9);
    EXPECT_TRUE(events[1].session_start);
    EXPECT_EQ(events[1].step, 12);

    const auto read = read_tensorboard_scalars(path);
    ASSERT_EQ(read.size(), written.size());
    for (size_t i = 0; i < read.size(); ++i) {
        EXPECT_EQ(read[i].tag, written[i].tag) << i;
        EXPECT_EQ(read[i].step, written[i].step) << i;
        EXPECT_EQ(read[i].value, written[i].value) << i;
        EXPECT_EQ(read[i].wall_time, written[i].wall_time) << i;
    }
    EXPECT_TRUE(std::signbit(read[4].value));
}

TEST_F(TensorBoardTest, TwoWritersInOneFolderWriteTwoFiles) {
    TensorBoardWriter a(dir_.string()), b(dir_.string());
    EXPECT_NE(a.path(), b.path());
    EXPECT_EQ(tensorboard_event_files(dir_.string()).size(), 2u);
}

TEST_F(TensorBoardTest, CorruptByteIsAnErrorNamingItsOffset) {
    std::string path;
    {
        TensorBoardWriter writer(dir_.string());
        path = writer.path();
        writer.add_scalar("a", 1, 1.0, 10.0);
        writer.add_scalar("b", 2, 2.0, 20.0);
    }
    const std::string good = test_support::read_file(path);
    const auto offsets = record_offsets(good);
    ASSERT_EQ(offsets.size(), 3u);
    const std::string second = std::to_string(offsets[1]);
    auto error_for = [&](const std::string& bytes) -> std::string {
        const std::string bad = file("bad.tfevents");
        test_support::write_file(bad, bytes);
        try {
            read_tensorboard_events(bad);
        } catch (const InputError& e) {
            EXPECT_EQ(e.path(), bad);
            return e.what();
        }
        return "no error";
    };
    std::string data_flip = good;
    data_flip[offsets[1] + 12 + 3] ^= 0x01;  // a byte inside the second record's Event
    std::string msg = error_for(data_flip);
    EXPECT_NE(msg.find("byte " + second + ":"), std::string::npos) << msg;
    EXPECT_NE(msg.find("CRC"), std::string::npos) << msg;

    std::string length_flip = good;
    length_flip[offsets[1]] ^= 0x01;  // the second record's length
    msg = error_for(length_flip);
    EXPECT_NE(msg.find("byte " + second + ":"), std::string::npos) << msg;

    msg = error_for(good.substr(0, good.size() - 1));  // the last record cut short
    EXPECT_NE(msg.find("byte " + std::to_string(offsets[2]) + ": truncated"), std::string::npos)
        << msg;
    EXPECT_EQ(read_tensorboard_scalars(path).size(), 2u);  // the original is fine
}

TEST_F(TensorBoardTest, UnwritableFolderIsAnInputError) {
    test_support::write_file(dir_ / "file", "not a folder");
    EXPECT_THROW(TensorBoardWriter((dir_ / "file" / "run").string()), InputError);
    EXPECT_THROW(read_tensorboard_events(file("missing")), InputError);
    EXPECT_TRUE(tensorboard_event_files(file("missing")).empty());
}

namespace {

const test_support::PhraseLists kEventPhrases = {{"the cat", "a dog", "my sister", "the bird"},
                                                 {"saw", "liked", "found", "followed"},
                                                 {"the house", "a river", "an apple", "the moon"}};

struct MetricRow {
    int64_t step;
    std::string tag;
    double value;
};

std::vector<MetricRow> read_metrics(const std::string& out_dir) {
    std::ifstream in(metrics_path(out_dir));
    std::vector<MetricRow> rows;
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
        std::istringstream is(line);
        MetricRow r;
        std::string split, metric;
        is >> r.step >> split >> metric >> r.value;
        r.tag = split + "/" + metric;
        rows.push_back(r);
    }
    return rows;
}

void expect_same_scalars(const std::vector<MetricRow>& rows,
                         const std::vector<TensorBoardScalar>& scalars) {
    ASSERT_EQ(scalars.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(scalars[i].tag, rows[i].tag) << i;
        EXPECT_EQ(scalars[i].step, rows[i].step) << i;
        // metrics.tsv holds 9 significant digits, the event a float.
        EXPECT_NEAR(scalars[i].value, rows[i].value, 1e-6 * std::max(1.0, std::abs(rows[i].value)))
            << rows[i].tag << " at " << rows[i].step;
    }
}

class TensorBoardTrainerTest : public test_support::TempDirTest {
  protected:
    TensorBoardTrainerTest() : TempDirTest(test_support::per_test_name("tupe_tensorboard_run")) {}
    void SetUp() override {
        test_support::write_phrase_corpus(dir_, kEventPhrases, 3, 40, [](int) { return 6; });
    }
    PretrainConfig config() const {
        PretrainConfig c;
        c.model = make_model_config("tupe-a", "tiny");
        c.model.max_position_embeddings = 64;
        c.data.corpus = (dir_ / "corpus.txt").string();
        c.data.vocab = (dir_ / "vocab.txt").string();
        c.data.cache_dir = (dir_ / "cache").string();
        c.data.max_seq_len = 32;
        c.data.validation_fraction = 0.1;
        c.train.steps = 4;
        c.train.batch_size = 4;
        c.train.warmup_steps = 1;
        c.train.log_interval = 1;
        c.train.eval_interval = 2;
        c.train.eval_batches = 1;
        c.train.checkpoint_interval = 0;
        c.train.threads = 1;
        c.train.device = "cpu";
        c.out_dir = (dir_ / "run").string();
        return c;
    }
};

}  // namespace

TEST_F(TensorBoardTrainerTest, PretrainingWritesMetricsAsEvents) {
    const PretrainConfig c = config();
    pretrain(c);
    const auto rows = read_metrics(c.out_dir);
    ASSERT_EQ(rows.size(), 4u * 2 + 3u * 2);  // train loss+lr x 4 steps, validation at 0, 2, 4
    const std::string events = only_events_file(c.out_dir);
    expect_same_scalars(rows, read_tensorboard_scalars(events));
    const auto all = read_tensorboard_events(events);
    ASSERT_GE(all.size(), 2u);
    EXPECT_EQ(all[0].file_version, "brain.Event:2");
    EXPECT_TRUE(all[1].session_start);
    EXPECT_EQ(all[1].step, 0);

    // A fresh run in the same folder (no checkpoint) replaces the events, as metrics.tsv.
    fs::remove(checkpoint_path(c.out_dir));
    pretrain(c);
    expect_same_scalars(read_metrics(c.out_dir),
                        read_tensorboard_scalars(only_events_file(c.out_dir)));
}

TEST_F(TensorBoardTrainerTest, ResumedRunAppendsAFileThatStartsAfterTheCheckpoint) {
    PretrainConfig c = config();
    c.train.steps = 6;
    std::atomic<bool> stop{false};
    TrainCallbacks cb;
    cb.stop = &stop;
    cb.on_step = [&](const StepReport& r) {
        if (r.step == 3) stop = true;
    };
    ASSERT_TRUE(pretrain(c, cb).stopped);
    const auto result = pretrain(c);
    ASSERT_EQ(result.resumed_from, 3);
    const auto files = tensorboard_event_files(c.out_dir);
    ASSERT_EQ(files.size(), 2u);
    // Which file is the resumed one: the one whose START is after step 0.
    std::vector<TensorBoardEvent> first = read_tensorboard_events(files[0]),
                                  second = read_tensorboard_events(files[1]);
    ASSERT_GE(first.size(), 2u);
    ASSERT_GE(second.size(), 2u);
    if (first[1].step != 0) std::swap(first, second);
    ASSERT_TRUE(first[1].session_start && second[1].session_start);
    EXPECT_EQ(first[1].step, 0);
    EXPECT_EQ(second[1].step, 4);
    // TensorBoard's view: the first file's points before the START, then the second file's.
    std::vector<TensorBoardScalar> merged;
    for (const auto& e : first)
        for (const auto& s : e.scalars)
            if (s.step < second[1].step) merged.push_back(s);
    for (const auto& e : second)
        for (const auto& s : e.scalars) merged.push_back(s);
    expect_same_scalars(read_metrics(c.out_dir), merged);
}

TEST_F(TensorBoardTrainerTest, SwitchedOffWritesNoEvents) {
    PretrainConfig c = config();
    set_config_value(c, "train.tensorboard", "false");
    EXPECT_FALSE(c.train.tensorboard);
    EXPECT_EQ(get_config_value(PretrainConfig{}, "train.tensorboard"), "true");
    pretrain(c);
    EXPECT_FALSE(read_metrics(c.out_dir).empty());
    EXPECT_TRUE(tensorboard_event_files(c.out_dir).empty());
}
