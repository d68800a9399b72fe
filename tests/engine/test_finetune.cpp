// Fine-tuning tests on tiny models and synthetic tasks: the classifier starts from the exact
// pretrained encoder, bucketed batches cover each example once with less padding, a trivially
// learnable task (and a regression target) is learned, runs repeat exactly, and bad labels,
// the stop flag and a diverging loss behave as documented.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "engine/corpus.h"
#include "engine/errors.h"
#include "engine/finetune.h"
#include "support/test_support.h"

using namespace engine;

namespace {

const std::vector<std::string> kFillers = {"movie", "film",   "plot",   "was",   "is",   "the", "a",
                                           "very",  "really", "actors", "story", "long", "and"};

WordPieceTokenizer make_tokenizer() {
    std::vector<std::string> tokens = {"[PAD]",  "[UNK]", "[CLS]", "[SEP]",
                                       "[MASK]", "good",  "bad",   "fun"};
    tokens.insert(tokens.end(), kFillers.begin(), kFillers.end());
    return WordPieceTokenizer(Vocab::from_tokens(tokens));
}

ModelConfig tiny_config(const std::string& preset, const WordPieceTokenizer& tok) {
    ModelConfig c = test_support::tiny_config(preset, tok.vocab().size());
    c.pad_token_id = tok.vocab().pad_id();
    return c;
}

// A randomly initialised "pretrained" model: fine-tuning must work from any encoder.
BertForMaskedLM make_pretrained(const ModelConfig& c, uint64_t seed) {
    torch::manual_seed(seed);
    return BertForMaskedLM(c);
}

std::string fillers(std::mt19937& rng, int count) {
    std::string s;
    for (int i = 0; i < count; ++i) s += " " + kFillers[rng() % kFillers.size()];
    return s;
}

// label 1 when the sentence starts with "good", 0 when with "bad"; 2..12 filler words after it.
std::vector<LabeledText> sentiment_task(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<LabeledText> out;
    for (size_t i = 0; i < n; ++i) {
        LabeledText ex;
        ex.label = static_cast<int64_t>(rng() % 2);
        ex.text_a = (ex.label ? "good" : "bad") + fillers(rng, 2 + static_cast<int>(rng() % 11));
        out.push_back(ex);
    }
    return out;
}

// Sentence pairs: target = [a starts with "good"] + [b is "fun fun ..." rather than fillers],
// in {0, 1, 2}.
std::vector<LabeledText> pair_regression_task(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<LabeledText> out;
    for (size_t i = 0; i < n; ++i) {
        LabeledText ex;
        const bool good = rng() % 2, fun = rng() % 2;
        ex.text_a = (good ? "good" : "bad") + fillers(rng, 2 + static_cast<int>(rng() % 6));
        const int b_words = 2 + static_cast<int>(rng() % 5);
        if (fun) {
            for (int w = 0; w < b_words; ++w) ex.text_b += w ? " fun" : "fun";
        } else {
            ex.text_b = fillers(rng, b_words);
        }
        ex.target = static_cast<float>(good) + static_cast<float>(fun);
        out.push_back(ex);
    }
    return out;
}

FinetuneConfig small_run(int64_t num_labels) {
    FinetuneConfig c;
    c.num_labels = num_labels;
    c.lr = 2e-3;  // a tiny model from a random encoder needs far more than BERT's 2e-5
    c.epochs = 4;
    c.batch_size = 16;
    c.max_seq_len = 32;
    c.device = "cpu";
    c.threads = 1;
    return c;
}

double accuracy(const std::vector<double>& predicted, const std::vector<LabeledText>& gold) {
    double correct = 0;
    for (size_t i = 0; i < gold.size(); ++i)
        correct += predicted[i] == static_cast<double>(gold[i].label);
    return correct / static_cast<double>(gold.size());
}

std::map<std::string, torch::Tensor> snapshot(torch::nn::Module& m) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& item : m.named_parameters()) out[item.key()] = item.value().detach().clone();
    return out;
}

int64_t padding(const std::vector<std::vector<size_t>>& batches, const std::vector<int64_t>& len) {
    int64_t pad = 0;
    for (const auto& b : batches) {
        int64_t longest = 0;
        for (size_t i : b) longest = std::max(longest, len[i]);
        for (size_t i : b) pad += longest - len[i];
    }
    return pad;
}

}  // namespace

TEST(BertForSequenceClassification, LoadPretrainedCopiesTheEncoderExactly) {
    const auto tok = make_tokenizer();
    for (const std::string preset : {"bert-a", "tupe-r", "bert-ad"}) {
        const ModelConfig c = tiny_config(preset, tok);
        BertForMaskedLM mlm = make_pretrained(c, 7);
        torch::manual_seed(99);  // a different init, so only the copy can make them agree
        BertForSequenceClassification clf(c, 3);
        clf->load_pretrained(mlm);
        mlm->eval();
        clf->eval();
        auto ids = torch::randint(5, c.vocab_size, {3, 9}, torch::kLong);
        auto mask = torch::ones({3, 9}, torch::kLong);
        mask[1].slice(0, 6).fill_(0);
        auto types = torch::zeros({3, 9}, torch::kLong);
        types[2].slice(0, 4).fill_(1);
        auto a = mlm->bert->forward(ids, mask, types).last_hidden_state;
        auto b = clf->bert->forward(ids, mask, types).last_hidden_state;
        EXPECT_TRUE(torch::equal(a, b)) << preset;
        auto mine = clf->named_parameters();
        for (const auto& item : mlm->bert->named_parameters())
            EXPECT_TRUE(torch::equal(item.value(), mine["bert." + item.key()])) << item.key();
        // The copy is a copy: changing the classifier's encoder leaves the MLM model alone.
        {
            torch::NoGradGuard no_grad;
            clf->bert->embeddings->word_embeddings->weight.add_(1.0);
        }
        EXPECT_FALSE(torch::equal(mlm->bert->embeddings->word_embeddings->weight,
                                  clf->bert->embeddings->word_embeddings->weight));
    }
}

TEST(BertForSequenceClassification, HfNamesShapesAndHeadInit) {
    const auto tok = make_tokenizer();
    const ModelConfig c = tiny_config("tupe-a", tok);
    torch::manual_seed(1);
    BertForSequenceClassification clf(c, 3);
    auto params = clf->named_parameters();
    for (const char* name : {"bert.embeddings.word_embeddings.weight", "pooler.dense.weight",
                             "pooler.dense.bias", "classifier.weight", "classifier.bias"})
        EXPECT_TRUE(params.contains(name)) << name;
    EXPECT_EQ(params["classifier.weight"].sizes().vec(), (std::vector<int64_t>{3, c.hidden_size}));
    EXPECT_TRUE(torch::equal(params["classifier.bias"], torch::zeros({3})));
    EXPECT_TRUE(torch::equal(params["pooler.dense.bias"], torch::zeros({c.hidden_size})));
    EXPECT_NEAR(params["pooler.dense.weight"].std().item<double>(), 0.02, 0.004);
    clf->eval();
    auto logits = clf->forward(torch::randint(5, c.vocab_size, {4, 7}, torch::kLong));
    EXPECT_EQ(logits.sizes().vec(), (std::vector<int64_t>{4, 3}));
}

TEST(BertForSequenceClassification, LoadPretrainedRejectsAnotherEncoder) {
    const auto tok = make_tokenizer();
    BertForMaskedLM mlm = make_pretrained(tiny_config("tupe-a", tok), 1);
    // Same parameters, different computation: TUPE-A with a tied [CLS].
    BertForSequenceClassification tied(tiny_config("tupe-a-tie-cls", tok), 2);
    EXPECT_THROW(tied->load_pretrained(mlm), c10::Error);
    auto deeper = tiny_config("tupe-a", tok);
    deeper.num_hidden_layers = 3;
    BertForSequenceClassification other(deeper, 2);
    EXPECT_THROW(other->load_pretrained(mlm), c10::Error);
}

TEST(BucketedBatches, CoverEveryIndexOnceAndPadLessThanRandomBatches) {
    std::mt19937 rng(5);
    std::vector<int64_t> lengths(1003);
    for (auto& l : lengths) l = 3 + static_cast<int64_t>(rng() % 60);
    const auto batches = bucketed_batches(lengths, 16, 1, 0);
    std::vector<int> seen(lengths.size(), 0);
    for (size_t k = 0; k < batches.size(); ++k) {
        // Only one batch (the last of the last chunk) may be short.
        if (batches[k].size() != 16) {
            EXPECT_EQ(batches[k].size(), 1003u % 16) << k;
        }
        for (size_t i : batches[k]) ++seen[i];
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << i;
    EXPECT_EQ(batches.size(), (1003u + 15) / 16);

    // Random batches: the same permutation without sorting.
    std::vector<std::vector<size_t>> random;
    const auto order = epoch_order(lengths.size(), 1, 0);
    for (size_t b = 0; b < order.size(); b += 16)
        random.emplace_back(order.begin() + b, order.begin() + std::min(order.size(), b + 16));
    EXPECT_LT(padding(batches, lengths), padding(random, lengths) / 4);
}

TEST(BucketedBatches, DeterministicInSeedAndEpoch) {
    std::vector<int64_t> lengths;
    for (int i = 0; i < 300; ++i) lengths.push_back(i % 37);
    EXPECT_EQ(bucketed_batches(lengths, 8, 3, 2), bucketed_batches(lengths, 8, 3, 2));
    EXPECT_NE(bucketed_batches(lengths, 8, 3, 2), bucketed_batches(lengths, 8, 3, 3));
    EXPECT_NE(bucketed_batches(lengths, 8, 3, 2), bucketed_batches(lengths, 8, 4, 2));
    EXPECT_TRUE(bucketed_batches({}, 8, 1, 0).empty());
    const auto one = bucketed_batches({5, 2, 9}, 8, 1, 0);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(std::set<size_t>(one[0].begin(), one[0].end()), (std::set<size_t>{0, 1, 2}));
}

TEST(Finetune, LearnsATriviallyLearnableTask) {
    const auto start = std::chrono::steady_clock::now();
    const auto tok = make_tokenizer();
    BertForMaskedLM pretrained = make_pretrained(tiny_config("tupe-r", tok), 11);
    const auto before = snapshot(*pretrained);
    const bool was_training = pretrained->is_training();
    const auto train = sentiment_task(320, 1), dev = sentiment_task(200, 2);
    std::vector<std::string> messages;
    std::vector<double> losses;
    int64_t epochs_seen = 0;
    FinetuneCallbacks cb;
    cb.on_message = [&](const std::string& m) { messages.push_back(m); };
    cb.on_step = [&](int64_t step, int64_t total, double loss) {
        EXPECT_EQ(step, static_cast<int64_t>(losses.size()) + 1);
        EXPECT_EQ(total, 4 * 20);
        losses.push_back(loss);
    };
    cb.on_epoch = [&](const EpochResult& r) { EXPECT_EQ(r.epoch, ++epochs_seen); };
    auto result = finetune(pretrained, tok, train, {dev, {}}, small_run(2), cb);
    ASSERT_EQ(result.epochs.size(), 4u);
    EXPECT_FALSE(result.stopped);
    EXPECT_EQ(losses.size(), 80u);
    EXPECT_FALSE(messages.empty());
    const auto& last = result.epochs.back();
    ASSERT_EQ(last.predictions.size(), 2u);
    EXPECT_TRUE(last.predictions[1].empty());
    EXPECT_GT(accuracy(last.predictions[0], dev), 0.9);  // chance is 0.5
    EXPECT_LT(last.train_loss, result.epochs.front().train_loss);
    // The pretrained model is read, never changed.
    EXPECT_EQ(pretrained->is_training(), was_training);
    for (const auto& [name, t] : snapshot(*pretrained))
        EXPECT_TRUE(torch::equal(t, before.at(name))) << name;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    RecordProperty("seconds", std::to_string(seconds));
}

TEST(Finetune, LearnsARegressionTargetOnSentencePairs) {
    const auto tok = make_tokenizer();
    BertForMaskedLM pretrained = make_pretrained(tiny_config("bert-a", tok), 12);
    const auto train = pair_regression_task(640, 3), dev = pair_regression_task(200, 4);
    auto config = small_run(1);
    config.lr = 3e-3;
    auto result = finetune(pretrained, tok, train, {dev}, config);
    const auto& pred = result.epochs.back().predictions.at(0);
    ASSERT_EQ(pred.size(), dev.size());
    double mean = 0, var = 0, mse = 0;
    for (const auto& ex : dev) mean += ex.target / static_cast<double>(dev.size());
    for (size_t i = 0; i < dev.size(); ++i) {
        var += std::pow(dev[i].target - mean, 2) / static_cast<double>(dev.size());
        mse += std::pow(dev[i].target - pred[i], 2) / static_cast<double>(dev.size());
    }
    EXPECT_LT(mse, 0.2 * var) << "mse " << mse << ", target variance " << var;
}

TEST(Finetune, SameSeedGivesSamePredictions) {
    const auto tok = make_tokenizer();
    BertForMaskedLM pretrained = make_pretrained(tiny_config("tupe-a", tok), 13);
    const auto train = sentiment_task(64, 5), dev = sentiment_task(40, 6);
    auto config = small_run(2);
    config.epochs = 2;
    auto a = finetune(pretrained, tok, train, {dev}, config);
    auto b = finetune(pretrained, tok, train, {dev}, config);
    ASSERT_EQ(a.epochs.size(), b.epochs.size());
    for (size_t e = 0; e < a.epochs.size(); ++e) {
        EXPECT_EQ(a.epochs[e].train_loss, b.epochs[e].train_loss);
        EXPECT_EQ(a.epochs[e].predictions, b.epochs[e].predictions);
    }
    config.num_labels = 1;  // regression values are compared exactly too
    const auto pairs = pair_regression_task(64, 7), pair_dev = pair_regression_task(40, 8);
    auto c = finetune(pretrained, tok, pairs, {pair_dev}, config);
    auto d = finetune(pretrained, tok, pairs, {pair_dev}, config);
    EXPECT_EQ(c.epochs.back().predictions, d.epochs.back().predictions);
}

TEST(Finetune, BadLabelsAndConfigsThrowNamingTheProblem) {
    const auto tok = make_tokenizer();
    BertForMaskedLM pretrained = make_pretrained(tiny_config("bert-a", tok), 14);
    auto train = sentiment_task(10, 7);
    auto expect_message = [&](const std::vector<LabeledText>& data, const FinetuneConfig& c,
                              const std::string& part) {
        try {
            finetune(pretrained, tok, data, {}, c);
            FAIL() << "expected std::invalid_argument containing " << part;
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    train[3].label = 2;
    expect_message(train, small_run(2), "example 3");
    train[3].label = -1;
    expect_message(train, small_run(2), "example 3");
    train[3].label = 0;
    expect_message(train, small_run(0), "num_labels");
    expect_message({}, small_run(2), "train example");
    auto too_long = small_run(2);
    too_long.max_seq_len = 1000;
    expect_message(train, too_long, "max_seq_len");
    auto bad_dtype = small_run(2);
    bad_dtype.dtype = "fp8";
    expect_message(train, bad_dtype, "finetune.dtype");
    auto bad_device = small_run(2);
    bad_device.device = "tpu";
    expect_message(train, bad_device, "finetune.device");
}

TEST(Finetune, StopFlagStopsBeforeTheNextStep) {
    const auto tok = make_tokenizer();
    BertForMaskedLM pretrained = make_pretrained(tiny_config("bert-r", tok), 15);
    std::atomic<bool> stop{false};
    int64_t steps = 0;
    FinetuneCallbacks cb;
    cb.stop = &stop;
    cb.on_step = [&](int64_t step, int64_t, double) {
        steps = step;
        if (step == 3) stop = true;
    };
    auto result = finetune(pretrained, tok, sentiment_task(200, 8), {sentiment_task(20, 9)},
                           small_run(2), cb);
    EXPECT_TRUE(result.stopped);
    EXPECT_EQ(steps, 3);
    EXPECT_TRUE(result.epochs.empty());  // an epoch is 13 steps: none completed
}

TEST(Finetune, NonFiniteLossThrowsNamingTheStep) {
    const auto tok = make_tokenizer();
    BertForMaskedLM pretrained = make_pretrained(tiny_config("bert-a", tok), 16);
    auto config = small_run(1);
    config.lr = 1e30;  // Adam's first steps of ~lr overflow the regression output
    config.clip_norm = 0;
    config.warmup_ratio = 0;
    config.epochs = 20;
    try {
        finetune(pretrained, tok, pair_regression_task(32, 10), {}, config);
        FAIL() << "expected TrainingDiverged";
    } catch (const TrainingDiverged& e) {
        EXPECT_NE(std::string(e.what()).find("step "), std::string::npos) << e.what();
    }
}

TEST(Finetune, Bf16AutocastRunsOnCpu) {
    const auto tok = make_tokenizer();
    BertForMaskedLM pretrained = make_pretrained(tiny_config("tupe-r", tok), 17);
    auto config = small_run(2);
    config.dtype = "bf16";
    config.epochs = 1;
    const auto dev = sentiment_task(20, 12);
    auto result = finetune(pretrained, tok, sentiment_task(64, 11), {dev}, config);
    ASSERT_EQ(result.epochs.size(), 1u);
    EXPECT_TRUE(std::isfinite(result.epochs[0].train_loss));
    EXPECT_EQ(result.epochs[0].predictions.at(0).size(), dev.size());
}
