// The claims view's core: `tupe claims --format json` parsed (verdicts, details, the runs and
// the view a claim points at, a "not run" claim without runs), malformed output refused with a
// reason, the side-by-side pair of a maps claim, and ClaimsService running a child that prints
// the JSON, one that fails, and the real CLI on a store built here.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QThread>
#include <algorithm>
#include <fstream>
#include <optional>

#include "app_test_util.h"
#include "core/claims_service.h"
#include "experiments/result_store.h"

using namespace app;

namespace {

const char* kJson = R"json({
  "experiment": "quickstart",
  "alpha": 0.05,
  "claims": [
    {"id": "1", "title": "TUPE-A reaches a lower validation MLM loss than BERT-A at equal steps",
     "verdict": "supported", "evidence": "tupe-a - bert-a = -0.210 nats (p = 0.012, n = 2)",
     "test": "paired two-sided t-test over pretraining seeds",
     "details": ["supported: seed 1 -0.20", "supported: seed 2 -0.22"],
     "view": "curves", "runs": ["tupe-a@seed1", "tupe-a@seed2", "bert-a@seed1", "bert-a@seed2"]},
    {"id": "3a", "title": "TUPE-A beats BERT-A on GLUE", "verdict": "contradicted",
     "evidence": "Avg -1.30 [-2.9, -0.1]", "test": "paired bootstrap", "details": [],
     "view": "glue", "runs": ["tupe-a@seed1"], "lr_summary": "depends on the lr: supported at 2.0e-3, contradicted at 4.0e-3",
     "by_lr": [{"lr": "2.0e-3", "verdict": "supported", "evidence": "x"},
               {"lr": "4.0e-3", "verdict": "contradicted", "evidence": "y"}]},
    {"id": "7", "title": "TUPE-R's relative bias adds little", "verdict": "not run",
     "evidence": "needs variant tupe-r", "test": "sign test over heads", "details": [],
     "view": "", "runs": []}
  ]
})json";

/// Runs the event loop until `done` or 60 s.
template <class F>
bool waitFor(F done) {
    QElapsedTimer t;
    t.start();
    while (!done() && t.elapsed() < 60000) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
        QThread::msleep(5);
    }
    return done();
}

/// An executable shell script at `path`.
QString script(const std::string& path, const std::string& body) {
    std::ofstream(path) << "#!/bin/sh\n" << body;
    QFile::setPermissions(QString::fromStdString(path),
                          QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    return QString::fromStdString(path);
}

}  // namespace

TEST(ClaimsJson, ParsesVerdictsDetailsRunsAndViews) {
    const ClaimsReport r = parseClaimsJson(QByteArray(kJson));
    EXPECT_EQ(r.experiment, "quickstart");
    EXPECT_DOUBLE_EQ(r.alpha, 0.05);
    ASSERT_EQ(r.claims.size(), 3u);
    const ClaimItem& one = r.claims[0];
    EXPECT_EQ(one.id, "1");
    EXPECT_EQ(verdictKind(one.verdict), VerdictKind::kSupported);
    EXPECT_EQ(one.view, "curves");
    EXPECT_EQ(one.runs,
              (QStringList{"tupe-a@seed1", "tupe-a@seed2", "bert-a@seed1", "bert-a@seed2"}));
    EXPECT_EQ(one.details, (QStringList{"supported: seed 1 -0.20", "supported: seed 2 -0.22"}));
    EXPECT_TRUE(one.evidence.contains("p = 0.012"));
    EXPECT_EQ(verdictKind(r.claims[1].verdict), VerdictKind::kContradicted);
    EXPECT_EQ(r.claims[1].view, "glue");
    EXPECT_TRUE(r.claims[1].lrSummary.startsWith("depends on the lr"));
    EXPECT_EQ(r.claims[1].byLr, (QStringList{"2.0e-3: supported", "4.0e-3: contradicted"}));
    EXPECT_TRUE(one.byLr.isEmpty());
    const ClaimItem& notRun = r.claims[2];
    EXPECT_EQ(notRun.id, "7");
    EXPECT_EQ(notRun.verdict, "not run");
    EXPECT_EQ(verdictKind(notRun.verdict), VerdictKind::kNotRun);
    EXPECT_TRUE(notRun.runs.isEmpty());
    EXPECT_TRUE(notRun.view.isEmpty());
    EXPECT_EQ(notRun.evidence, "needs variant tupe-r");
    EXPECT_EQ(verdictKind("Inconclusive"), VerdictKind::kInconclusive);
    EXPECT_EQ(verdictKind("partly tested"), VerdictKind::kPartlyTested);
    EXPECT_EQ(verdictKind("maybe"), VerdictKind::kUnknown);
}

TEST(ClaimsJson, RefusesOutputThatIsNotTheClaimsJson) {
    EXPECT_THROW(parseClaimsJson("tupe: error: no experiment named 'x'"), std::runtime_error);
    EXPECT_THROW(parseClaimsJson(R"({"experiment": "x"})"), std::runtime_error);
    EXPECT_THROW(parseClaimsJson(R"({"claims": [1, 2]})"), std::runtime_error);
    // An empty list is a valid answer: an experiment with nothing to test.
    EXPECT_TRUE(parseClaimsJson(R"({"experiment": "x", "claims": []})").claims.empty());
}

TEST(ClaimsJson, MapsPairTakesTwoVariantGroups) {
    EXPECT_EQ(sideBySidePair({"bert-a@seed1", "bert-a@seed2", "tupe-a@seed1"}),
              (QStringList{"bert-a@seed1", "tupe-a@seed1"}));
    EXPECT_EQ(sideBySidePair({"tupe-a@seed1", "tupe-a@seed2"}),
              (QStringList{"tupe-a@seed1", "tupe-a@seed2"}));
    EXPECT_EQ(sideBySidePair({"bert-a"}), QStringList{"bert-a"});
    EXPECT_TRUE(sideBySidePair({}).isEmpty());
}

TEST(ClaimsService, ChildOutputIsParsedAndAFailureIsAMessage) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    std::ofstream(dir.file("claims.json")) << kJson;
    ClaimsService service;
    std::optional<ClaimsReport> got;
    QString error;
    QObject::connect(&service, &ClaimsService::ready, [&](const ClaimsReport& r) { got = r; });
    QObject::connect(&service, &ClaimsService::failed, [&](const QString& m) { error = m; });

    // The arguments reach the child: it echoes the JSON only when they are the expected ones.
    service.setProgram(
        script(dir.file("ok.sh"),
               "[ \"$1 $2 $3 $4 $5 $6 $7\" = \"claims --db my.db --experiment quickstart "
               "--format json\" ] || exit 9\n"
               "echo 'warning: a note on stderr' >&2\ncat " +
                   dir.file("claims.json") + "\n"));
    service.request("my.db", "quickstart");
    ASSERT_TRUE(waitFor([&] { return got.has_value() || !error.isEmpty(); }));
    ASSERT_TRUE(got) << error.toStdString();
    EXPECT_EQ(got->claims.size(), 3u);
    EXPECT_FALSE(service.busy());

    got.reset();
    service.setProgram(
        script(dir.file("bad.sh"),
               "echo 'tupe: no experiment named nope (has: quickstart)' >&2\nexit 2\n"));
    service.request("my.db", "nope");
    ASSERT_TRUE(waitFor([&] { return got.has_value() || !error.isEmpty(); }));
    EXPECT_FALSE(got);
    EXPECT_TRUE(error.contains("exit 2")) << error.toStdString();
    EXPECT_TRUE(error.contains("no experiment named nope")) << error.toStdString();
}

TEST(ClaimsService, RealCliSaysNotRunForAnExperimentWithoutRuns) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    {
        auto store = experiments::ResultStore::open(dir.file("db.sqlite"));
        store.get_or_create_experiment("empty", "empty.yaml", "name: empty\n");
    }
    ClaimsService service;
    service.setProgram(TUPE_CLI);
    std::optional<ClaimsReport> got;
    QString error;
    QObject::connect(&service, &ClaimsService::ready, [&](const ClaimsReport& r) { got = r; });
    QObject::connect(&service, &ClaimsService::failed, [&](const QString& m) { error = m; });
    service.request(QString::fromStdString(dir.file("db.sqlite")), "empty");
    ASSERT_TRUE(waitFor([&] { return got.has_value() || !error.isEmpty(); }));
    ASSERT_TRUE(got) << error.toStdString();
    EXPECT_EQ(got->experiment, "empty");
    ASSERT_FALSE(got->claims.empty());
    // Every claim that reads runs is "not run"; claim 7 counts parameters and needs none.
    int notRun = 0;
    for (const ClaimItem& c : got->claims) {
        EXPECT_NE(verdictKind(c.verdict), VerdictKind::kUnknown) << c.verdict.toStdString();
        if (c.id == "7") continue;
        EXPECT_EQ(verdictKind(c.verdict), VerdictKind::kNotRun) << c.id.toStdString();
        notRun += verdictKind(c.verdict) == VerdictKind::kNotRun;
    }
    EXPECT_GE(notRun, 5);
    // The view walks the CLI's table: a claim added there is a row here without code of its own.
    EXPECT_TRUE(std::any_of(got->claims.begin(), got->claims.end(),
                            [](const ClaimItem& c) { return c.id == "8"; }));
}
