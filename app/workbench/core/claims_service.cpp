// `tupe claims` as a child process and its JSON (see claims_service.h).
#include "core/claims_service.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/tupe_process.h"

namespace app {

VerdictKind verdictKind(const QString& verdict) {
    const QString v = verdict.trimmed().toLower();
    if (v == "supported") return VerdictKind::kSupported;
    if (v == "contradicted") return VerdictKind::kContradicted;
    if (v == "inconclusive") return VerdictKind::kInconclusive;
    if (v == "not run") return VerdictKind::kNotRun;
    if (v == "partly tested") return VerdictKind::kPartlyTested;
    return VerdictKind::kUnknown;
}

namespace {

QString stringField(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return {};
    if (it->is_string()) return QString::fromStdString(it->get<std::string>());
    return QString::fromStdString(it->dump());  // a number id, say
}

QStringList listField(const nlohmann::json& j, const char* key) {
    QStringList out;
    const auto it = j.find(key);
    if (it == j.end() || !it->is_array()) return out;
    for (const auto& v : *it)
        out << (v.is_string() ? QString::fromStdString(v.get<std::string>())
                              : QString::fromStdString(v.dump()));
    return out;
}

}  // namespace

ClaimsReport parseClaimsJson(const QByteArray& json) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(json.constBegin(), json.constEnd());
    } catch (const nlohmann::json::parse_error& e) {
        throw std::runtime_error(std::string("tupe claims printed no JSON (") + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("claims") || !j["claims"].is_array())
        throw std::runtime_error("tupe claims: the JSON has no \"claims\" list");
    ClaimsReport r;
    r.experiment = stringField(j, "experiment");
    if (j.contains("alpha") && j["alpha"].is_number()) r.alpha = j["alpha"].get<double>();
    for (const auto& c : j["claims"]) {
        if (!c.is_object()) throw std::runtime_error("tupe claims: a claim is not an object");
        ClaimItem item;
        item.id = stringField(c, "id");
        item.title = stringField(c, "title");
        item.verdict = stringField(c, "verdict");
        item.evidence = stringField(c, "evidence");
        item.test = stringField(c, "test");
        item.details = listField(c, "details");
        item.view = stringField(c, "view");
        item.runs = listField(c, "runs");
        item.lrSummary = stringField(c, "lr_summary");
        if (c.contains("by_lr") && c["by_lr"].is_array())
            for (const auto& l : c["by_lr"])
                if (l.is_object())
                    item.byLr << stringField(l, "lr") + ": " + stringField(l, "verdict");
        r.claims.push_back(std::move(item));
    }
    return r;
}

QStringList sideBySidePair(const QStringList& runs) {
    if (runs.isEmpty()) return {};
    auto group = [](const QString& name) { return name.section('@', 0, 0); };
    for (int i = 1; i < runs.size(); ++i)
        if (group(runs[i]) != group(runs[0])) return {runs[0], runs[i]};
    return runs.size() > 1 ? QStringList{runs[0], runs[1]} : QStringList{runs[0]};
}

ClaimsService::ClaimsService(QObject* parent) : QObject(parent), process_(new QProcess(this)) {
    // stdout is the JSON; stderr carries warnings and the one-line error of a failure.
    process_->setProcessChannelMode(QProcess::SeparateChannels);
    connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e != QProcess::FailedToStart) return;
        emit failed("cannot start " + process_->program() + ": " + process_->errorString());
        startPending();
    });
    connect(process_, qOverload<int, QProcess::ExitStatus>(&QProcess::finished), this,
            [this](int code, QProcess::ExitStatus status) {
                const QByteArray out = process_->readAllStandardOutput();
                const QString err = QString::fromUtf8(process_->readAllStandardError()).trimmed();
                if (pending_) return startPending();  // the answer to an old question
                if (status != QProcess::NormalExit || code != 0) {
                    const QString last = err.section('\n', -1).trimmed();
                    emit failed((status == QProcess::NormalExit
                                     ? QString("tupe claims failed (exit %1): ").arg(code)
                                     : QString("tupe claims crashed: ")) +
                                (last.isEmpty() ? QString("no message") : last));
                    return;
                }
                try {
                    emit ready(parseClaimsJson(out));
                } catch (const std::exception& e) {
                    emit failed(QString::fromUtf8(e.what()));
                }
            });
}

ClaimsService::~ClaimsService() {
    if (process_->state() != QProcess::NotRunning) {
        process_->kill();
        process_->waitForFinished(3000);
    }
}

void ClaimsService::request(const QString& dbPath, const QString& experiment,
                            const QString& workingDir) {
    dbPath_ = dbPath;
    experiment_ = experiment;
    workingDir_ = workingDir;
    pending_ = true;
    if (process_->state() == QProcess::NotRunning) startPending();
}

void ClaimsService::startPending() {
    if (!pending_) return;
    pending_ = false;
    const QString program = program_.isEmpty() ? findTupeCli() : program_;
    if (program.isEmpty()) {
        emit failed(
            "the `tupe` command line was not found (set TUPE_CLI or put tupe on PATH): "
            "cannot test the claims");
        return;
    }
    process_->setWorkingDirectory(workingDir_);
    process_->start(program,
                    {"claims", "--db", dbPath_, "--experiment", experiment_, "--format", "json"});
}

}  // namespace app
