// Tests of length extrapolation and position shift (analysis/extrapolate.h) on tiny randomised
// models with a hand-made vocabulary: NoPE and RoPE blind to a shift of every position, BERT-A
// not, and refused (n/a, never truncated) where its table ends; one masked set for every length,
// with masked positions beyond L only past f = 1; the unigram floor; the position offset put
// back; RoPE scaled at each extension (PI, NTK, YaRN); and the errors (empty stream, bad
// --lengths, a corpus that is missing or empty).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "analysis/extrapolate.h"
#include "engine/bert.h"
#include "engine/config.h"
#include "engine/errors.h"
#include "engine/tokenizer.h"
#include "support/test_support.h"
#include "support/torch_support.h"

using analysis::ExtrapolationOptions;
using analysis::ExtrapolationReport;
using analysis::ExtrapolationRow;

namespace {

constexpr int64_t kExtrapolateMaxPositions = 64;  // bert-a's table
constexpr int64_t kTrainLength = 40;  // L: shifts 0, 20, 40; bert-a runs 0..59 but not 40..79

// Skewed towards the low ids, so that the unigram floor is below log(15), with an [UNK] now and
// then (test_support::word_stream).
std::vector<int64_t> test_stream(int64_t n = 1000) { return test_support::word_stream(n, 7, true); }

engine::BertForMaskedLM test_model(const std::string& preset, uint64_t seed = 3) {
    return test_support::randomized_word_model(preset, kExtrapolateMaxPositions, seed);
}

ExtrapolationOptions test_options() {
    ExtrapolationOptions o;
    o.train_length = kTrainLength;
    o.factors = {1.0, 1.5, 2.0, 4.0};
    o.max_tokens = 1000;
    o.seed = 5;
    o.batch_tokens = 256;  // several batches per length
    o.source = "test-stream";
    return o;
}

ExtrapolationReport evaluate(const std::string& preset) {
    auto model = test_model(preset);
    return analysis::evaluate_extrapolation(model, test_stream(), test_support::word_vocab(),
                                            test_options());
}

}  // namespace

// (a) NoPE sees no positions and RoPE only their differences: the same loss at every shift.
TEST(Extrapolate, NopeAndRopeIgnoreAShiftOfEveryPosition) {
    for (const char* preset : {"nope", "rope"}) {
        SCOPED_TRACE(preset);
        const auto r = evaluate(preset);
        ASSERT_EQ(r.shifts.size(), 3u);
        EXPECT_EQ(r.shifts[0].offset, 0);
        EXPECT_EQ(r.shifts[1].offset, kTrainLength / 2);
        EXPECT_EQ(r.shifts[2].offset, kTrainLength);
        for (const auto& s : r.shifts) {
            ASSERT_TRUE(s.available) << s.note;
            EXPECT_EQ(s.length, kTrainLength);
            EXPECT_TRUE(std::isfinite(s.loss));
            EXPECT_NEAR(s.loss, r.shifts[0].loss, 1e-6) << "offset " << s.offset;
            EXPECT_EQ(s.masked, r.shifts[0].masked);
        }
    }
}

// (a) BERT-A's table makes a shift visible, and ends: offset + L past 64 positions is n/a.
TEST(Extrapolate, BertAChangesWithAShiftAndRefusesOnePastItsTable) {
    const auto r = evaluate("bert-a");
    EXPECT_FALSE(r.extrapolates);
    EXPECT_EQ(r.max_positions, kExtrapolateMaxPositions);
    ASSERT_EQ(r.shifts.size(), 3u);
    ASSERT_TRUE(r.shifts[0].available && r.shifts[1].available);
    EXPECT_GT(std::abs(r.shifts[1].loss - r.shifts[0].loss), 1e-4);
    EXPECT_FALSE(r.shifts[2].available);  // 40 + 40 > 64
    EXPECT_EQ(r.shifts[2].note, "n/a: table of 64 positions");
    EXPECT_TRUE(std::isnan(r.shifts[2].loss));
    EXPECT_EQ(r.shifts[2].masked, 0);
}

// (b) Longer than the table: n/a for BERT-A, never truncated; finite for NoPE and ALiBi.
TEST(Extrapolate, LengthsBeyondATableAreNotAvailableOthersAreFinite) {
    const auto a = evaluate("bert-a");
    ASSERT_EQ(a.lengths.size(), 4u);
    EXPECT_EQ(a.lengths[0].length, 40);
    EXPECT_EQ(a.lengths[1].length, 60);
    EXPECT_EQ(a.lengths[2].length, 80);
    EXPECT_EQ(a.lengths[3].length, 160);
    EXPECT_TRUE(a.lengths[0].available);
    EXPECT_TRUE(a.lengths[1].available);  // 60 <= 64
    for (int k : {2, 3}) {
        EXPECT_FALSE(a.lengths[k].available);
        EXPECT_EQ(a.lengths[k].note, "n/a: table of 64 positions");
        EXPECT_EQ(a.lengths[k].windows, 0);
    }
    for (const char* preset : {"nope", "alibi"}) {
        SCOPED_TRACE(preset);
        const auto r = evaluate(preset);
        EXPECT_TRUE(r.extrapolates);
        for (const auto& row : r.lengths) {
            ASSERT_TRUE(row.available) << row.factor << ": " << row.note;
            EXPECT_TRUE(std::isfinite(row.loss)) << row.factor;
        }
        EXPECT_TRUE(std::isfinite(r.lengths[2].loss_beyond));  // f = 2
        EXPECT_GT(r.lengths[2].masked_beyond, 0);
    }
}

// (c) One masked set: the same count at every length, split at L only past f = 1.
TEST(Extrapolate, EveryLengthScoresTheSameMaskedTokens) {
    auto model = test_model("alibi");
    auto o = test_options();
    o.factors = {0.5, 1.0, 1.5, 2.0, 4.0};
    const auto stream = test_stream();
    const auto r = analysis::evaluate_extrapolation(model, stream, test_support::word_vocab(), o);
    EXPECT_EQ(r.stream_tokens, 1000);
    // The masked set by hand: the rule of stream_masked, specials ([UNK]) left alone.
    int64_t expected = 0;
    for (size_t i = 0; i < stream.size(); ++i)
        if (stream[i] != 1 && analysis::stream_masked(o.seed, i, o.mask_prob)) ++expected;
    EXPECT_EQ(r.masked_tokens, expected);
    EXPECT_NEAR(static_cast<double>(expected) / 1000.0, 0.15, 0.05);
    ASSERT_EQ(r.lengths.size(), 5u);
    for (const auto& row : r.lengths) {
        SCOPED_TRACE(row.factor);
        ASSERT_TRUE(row.available) << row.note;
        EXPECT_EQ(row.masked, expected);
        EXPECT_EQ(row.masked_within + row.masked_beyond, row.masked);
        if (row.factor <= 1.0) {
            EXPECT_EQ(row.masked_beyond, 0);
            EXPECT_TRUE(std::isnan(row.loss_beyond));
        } else {
            EXPECT_GT(row.masked_beyond, 0);
        }
        // Windows of L_eval - 2 tokens over 1000, the last one aligned to the end when the
        // division leaves a tail.
        const int64_t W = row.length - 2;
        EXPECT_EQ(row.windows, (1000 + W - 1) / W);
    }
    for (const auto& s : r.shifts) EXPECT_EQ(s.masked, expected);
    // Another seed masks another set.
    o.seed = 6;
    o.factors = {1.0};
    const auto other =
        analysis::evaluate_extrapolation(model, stream, test_support::word_vocab(), o);
    EXPECT_NE(other.lengths[0].loss, r.lengths[1].loss);
}

// (d) The floor: finite, positive, below the uniform log(15) of the skewed stream, and a
// function of the stream and the masked set alone (the same for every model).
TEST(Extrapolate, UnigramFloorIsFinitePositiveAndModelFree) {
    const auto a = evaluate("nope");
    const auto b = evaluate("bert-a");
    EXPECT_TRUE(std::isfinite(a.unigram_floor));
    EXPECT_GT(a.unigram_floor, 0.0);
    EXPECT_LT(a.unigram_floor, std::log(15.0));
    EXPECT_DOUBLE_EQ(a.unigram_floor, b.unigram_floor);
    EXPECT_EQ(a.masked_tokens, b.masked_tokens);
}

// The model leaves as it came: its own position offset (used by the length rows) and its mode.
TEST(Extrapolate, PositionOffsetAndTrainingFlagAreRestored) {
    auto model = test_model("bert-a");
    model->train();
    model->bert->position->set_position_offset(5);
    const auto r = analysis::evaluate_extrapolation(model, test_stream(),
                                                    test_support::word_vocab(), test_options());
    EXPECT_EQ(model->bert->position->position_offset(), 5);
    EXPECT_TRUE(model->is_training());
    EXPECT_EQ(r.base_offset, 5);
    EXPECT_EQ(r.lengths[0].offset, 5);
    EXPECT_TRUE(r.lengths[0].available);   // 5 + 40 <= 64
    EXPECT_FALSE(r.lengths[1].available);  // 5 + 60 > 64
    // The shift rows are absolute offsets: 0 is measured, not the length row at offset 5.
    EXPECT_EQ(r.shifts[0].offset, 0);
    EXPECT_NE(r.shifts[0].loss, r.lengths[0].loss);
    EXPECT_THROW(model->bert->position->set_position_offset(-1), std::invalid_argument);
    EXPECT_EQ(model->bert->position->position_offset(), 5);
}

// (f) A RoPE model at each length beyond L with each scaling, on the same windows and tokens as
// its plain row; the scaling is put back; a model without RoPE gets no such rows.
TEST(Extrapolate, RopeModelsAreReportedAtEachExtensionWithEveryScaling) {
    using Method = engine::RopeScaling::Method;
    auto options = test_options();
    options.rope_scalings = {Method::kInterpolation, Method::kNtk, Method::kYarn};
    auto model = test_model("rope");
    const auto r =
        analysis::evaluate_extrapolation(model, test_stream(), test_support::word_vocab(), options);
    EXPECT_TRUE(r.rotary);
    ASSERT_EQ(r.scaled.size(), 9u);  // 1.5x, 2x, 4x (1x is L itself) times pi, ntk, yarn
    const std::vector<std::string> names = {"pi", "ntk", "yarn"};
    for (size_t k = 0; k < r.scaled.size(); ++k) {
        const auto& row = r.scaled[k];
        const auto& plain = r.lengths[1 + k / 3];
        SCOPED_TRACE(row.rope_scaling + " at " + std::to_string(row.length));
        EXPECT_EQ(row.rope_scaling, names[k % 3]);
        EXPECT_EQ(row.length, plain.length);
        EXPECT_DOUBLE_EQ(row.factor, plain.factor);
        ASSERT_TRUE(row.available) << row.note;
        EXPECT_EQ(row.masked, plain.masked);
        EXPECT_EQ(row.masked_beyond, plain.masked_beyond);
        EXPECT_TRUE(std::isfinite(row.loss));
        EXPECT_GT(std::abs(row.loss - plain.loss), 1e-6);  // another function of the positions
    }
    EXPECT_TRUE(r.lengths[0].rope_scaling.empty());
    EXPECT_EQ(model->bert->position->rope_scaling().method, Method::kNone);
    // The plain rows are the ones measured without the option.
    const auto without = evaluate("rope");
    EXPECT_DOUBLE_EQ(without.lengths[3].loss, r.lengths[3].loss);
    EXPECT_TRUE(without.scaled.empty());
    auto alibi = test_model("alibi");
    EXPECT_TRUE(
        analysis::evaluate_extrapolation(alibi, test_stream(), test_support::word_vocab(), options)
            .scaled.empty());
}

// (e) The errors.
TEST(Extrapolate, EmptyStreamAndBadOptionsAreErrors) {
    auto model = test_model("nope");
    const auto vocab = test_support::word_vocab();
    try {
        analysis::evaluate_extrapolation(model, {}, vocab, test_options());
        FAIL() << "an empty stream was evaluated";
    } catch (const engine::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("test-stream"), std::string::npos) << e.what();
    }
    auto o = test_options();
    o.factors = {0.01};  // round(0.4) = 0 tokens
    EXPECT_THROW(analysis::evaluate_extrapolation(model, test_stream(), vocab, o),
                 std::invalid_argument);
    o = test_options();
    o.train_length = 0;
    EXPECT_THROW(analysis::evaluate_extrapolation(model, test_stream(), vocab, o),
                 std::invalid_argument);
    // Ids from another vocabulary.
    EXPECT_THROW(analysis::evaluate_extrapolation(model, {5, 6, 99}, vocab, test_options()),
                 engine::InputError);
    // A vocabulary that does not fit the model.
    EXPECT_THROW(
        analysis::evaluate_extrapolation(
            model, test_stream(),
            engine::Vocab::from_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x"}),
            test_options()),
        std::invalid_argument);
    // A stream too short for the longest window: that row is n/a, the others run.
    o = test_options();
    const auto short_run =
        analysis::evaluate_extrapolation(model, test_stream(100), vocab, o);  // 158 > 100
    EXPECT_TRUE(short_run.lengths[0].available);
    EXPECT_FALSE(short_run.lengths[3].available);
    EXPECT_NE(short_run.lengths[3].note.find("100 stream tokens"), std::string::npos)
        << short_run.lengths[3].note;
}

TEST(Extrapolate, LengthFactorsAreParsedStrictly) {
    EXPECT_EQ(analysis::parse_length_factors("1,1.5,2,4"), (std::vector<double>{1, 1.5, 2, 4}));
    EXPECT_EQ(analysis::parse_length_factors(" 1 , 0.5"), (std::vector<double>{1, 0.5}));
    for (const char* bad : {"", "0", "x", "1,x", "1,,2", "1,2,", "-1", "inf", "nan", "2x", ","})
        EXPECT_THROW(analysis::parse_length_factors(bad), std::invalid_argument) << bad;
    EXPECT_EQ(analysis::window_length(1.5, 128), 192);
    EXPECT_EQ(analysis::window_length(1.0, 40), 40);
}

TEST(Extrapolate, MaskIsADeterministicHashOfSeedAndIndex) {
    int64_t hits = 0;
    for (uint64_t i = 0; i < 100000; ++i) {
        const bool m = analysis::stream_masked(1, i, 0.15);
        EXPECT_EQ(m, analysis::stream_masked(1, i, 0.15));
        hits += m;
    }
    EXPECT_NEAR(static_cast<double>(hits) / 100000.0, 0.15, 0.005);
    int64_t differ = 0;
    for (uint64_t i = 0; i < 1000; ++i)
        differ += analysis::stream_masked(1, i, 0.15) != analysis::stream_masked(2, i, 0.15);
    EXPECT_GT(differ, 100);
}

TEST(Extrapolate, TokenStreamReadsTheCorpusUpToMaxTokens) {
    engine::WordPieceTokenizer tokenizer(test_support::word_vocab());
    test_support::TempFile corpus(test_support::per_test_name("extrapolate_corpus.txt"),
                                  "The cats sat.\n\nA dog ran\n");
    EXPECT_EQ(analysis::read_token_stream(corpus.path(), tokenizer, 100),
              (std::vector<int64_t>{5, 6, 14, 7, 10, 13, 11, 12}));
    EXPECT_EQ(analysis::read_token_stream(corpus.path(), tokenizer, 3),
              (std::vector<int64_t>{5, 6, 14}));
    try {
        analysis::read_token_stream("/nonexistent/corpus.txt", tokenizer, 10);
        FAIL() << "a missing corpus was read";
    } catch (const engine::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/corpus.txt"), std::string::npos);
    }
    test_support::TempFile empty(test_support::per_test_name("extrapolate_empty.txt"), "\n\n");
    EXPECT_THROW(analysis::read_token_stream(empty.path(), tokenizer, 10), engine::InputError);
}
