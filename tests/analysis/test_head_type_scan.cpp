// Tests of the head-type scan (analysis/head_type_scan.h) on tiny models: with every query and
// key projection zeroed a model without positions attends uniformly, so every head is broad with
// the chance scores of a uniform map; the scores do not depend on the batching; and the scan's
// errors. The rule itself is tested on hand-made maps in tests/core/test_head_types.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "analysis/head_type_scan.h"
#include "engine/bert.h"
#include "engine/errors.h"
#include "support/test_support.h"
#include "support/torch_support.h"

namespace {

constexpr int64_t kScanLength = 16;

analysis::HeadTypeScan scan(engine::BertForMaskedLM& model, int64_t batch, int64_t windows = 5) {
    analysis::HeadTypeScanOptions o;
    o.length = kScanLength;
    o.windows = windows;
    o.batch_size = batch;
    o.source = "test-stream";
    return analysis::scan_head_types(model->bert, test_support::word_stream(200, 29, false),
                                     test_support::word_vocab(), o);
}

}  // namespace

TEST(HeadTypeScan, ZeroQueryAndKeyWithoutPositionsIsUniformAndBroad) {
    auto model = test_support::randomized_word_model("nope", 32, 3);
    {
        torch::NoGradGuard no_grad;
        for (auto& p : model->named_parameters())
            if (p.key().find("attention.self.query") != std::string::npos ||
                p.key().find("attention.self.key") != std::string::npos)
                p.value().zero_();
    }
    const auto s = scan(model, 2);
    const auto& config = model->config();
    ASSERT_EQ(static_cast<int64_t>(s.rows.size()),
              config.num_hidden_layers * config.num_attention_heads);
    EXPECT_EQ(s.length, kScanLength);
    EXPECT_EQ(s.windows, 5);
    for (const auto& row : s.rows) {
        SCOPED_TRACE("layer " + std::to_string(row.layer) + " head " + std::to_string(row.head));
        EXPECT_EQ(row.type, analysis::HeadType::kBroad);
        EXPECT_NEAR(row.scores.entropy, 1.0, 1e-6);
        EXPECT_NEAR(row.scores.previous, 1.0 / kScanLength, 1e-6);
        EXPECT_NEAR(row.scores.cls_sink, 1.0 / kScanLength, 1e-6);
        EXPECT_NEAR(row.scores.duplicate, row.scores.duplicate_chance, 1e-6);
        EXPECT_EQ(row.scores.rows, 5 * (kScanLength - 2));
    }
}

TEST(HeadTypeScan, ScoresDoNotDependOnBatching) {
    auto model = test_support::randomized_word_model("tupe-r", 32, 4);
    const auto one = scan(model, 1), four = scan(model, 4);
    ASSERT_EQ(one.rows.size(), four.rows.size());
    for (size_t k = 0; k < one.rows.size(); ++k) {
        EXPECT_NEAR(one.rows[k].scores.previous, four.rows[k].scores.previous, 1e-6);
        EXPECT_NEAR(one.rows[k].scores.local, four.rows[k].scores.local, 1e-6);
        EXPECT_EQ(one.rows[k].type, four.rows[k].type);
    }
    // The random stream repeats words inside a window: the duplicate score is defined.
    EXPECT_FALSE(std::isnan(one.rows[0].scores.duplicate));
}

TEST(HeadTypeScan, Errors) {
    auto model = test_support::randomized_word_model("bert-a", 32, 5);
    analysis::HeadTypeScanOptions o;
    o.length = kScanLength;
    o.source = "short.txt";
    EXPECT_THROW(analysis::scan_head_types(model->bert, {5, 6, 7}, test_support::word_vocab(), o),
                 engine::InputError);
    o.length = 2;
    EXPECT_THROW(analysis::scan_head_types(model->bert, test_support::word_stream(50, 1, false),
                                           test_support::word_vocab(), o),
                 std::invalid_argument);
}
