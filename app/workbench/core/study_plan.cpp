// The study builder's plan and the bench child process (see study_plan.h).
#include "core/study_plan.h"

#include <QFile>
#include <QTemporaryDir>
#include <cmath>
#include <map>

#include "core/tupe_process.h"
#include "experiments/config_loader.h"
#include "experiments/experiment.h"
#include "experiments/plan_cost.h"

namespace app {

namespace {

// The design's file loaded as `tupe run` loads it (a private copy, so relative paths in it
// are not opened); throws what the loader throws.
experiments::ExperimentSpec loadStudyDesignSpec(const experiments::StudyDesign& design) {
    QTemporaryDir dir;
    const QString name = QString::fromStdString(design.name.empty() ? "study" : design.name);
    const QString path = dir.path() + "/" + name + ".yaml";
    QFile f(path);
    if (!dir.isValid() || !f.open(QIODevice::WriteOnly))
        throw std::runtime_error("cannot write a temporary copy of the study to check it");
    f.write(QByteArray::fromStdString(experiments::write_study_design(design)));
    f.close();
    return experiments::load_experiment(path.toStdString());
}

}  // namespace

QString formatDuration(double seconds) {
    if (!(seconds >= 0)) return "?";
    if (seconds < 90) return QString("%1 s").arg(std::lround(seconds));
    const long minutes = std::lround(seconds / 60);
    if (minutes < 60) return QString("%1 min").arg(minutes);
    return QString("%1 h %2 min").arg(minutes / 60).arg(minutes % 60, 2, 10, QChar('0'));
}

QString StudyPlanInfo::summary() const {
    if (!ok) return (line > 0 ? QString("line %1: ").arg(line) : QString()) + message;
    int seeds = 0;
    for (const auto& r : rows) seeds = std::max(seeds, r.seeds);
    QString s = QString("%1 variant(s)%2: %3 pretraining job(s), ")
                    .arg(rows.size())
                    .arg(seeds > 1 ? QString(" x %1 seeds").arg(seeds) : QString())
                    .arg(pretrain);
    s += everyTask ? QString("one task job per available task")
                   : QString("%1 fine-tuning and %2 zero-shot job(s)").arg(finetune).arg(zeroShot);
    s += QString(", %1 analysis job(s).").arg(analyses);
    if (pretrainSeconds < 0)
        return s + " No wall-time estimate: measure this machine with tupe bench.";
    return s + QString(
                   " Estimated wall time %1 (pretraining %2, tasks %3; analyses not counted), "
                   "from the cost model at %4.")
                   .arg(formatDuration(pretrainSeconds + taskSeconds),
                        formatDuration(pretrainSeconds), formatDuration(taskSeconds), rateSource);
}

StudyPlanInfo planStudy(const experiments::StudyDesign& design, const QString& benchJson,
                        const QString& benchNote) {
    StudyPlanInfo p;
    experiments::ExperimentSpec spec;
    try {
        spec = loadStudyDesignSpec(design);
    } catch (const experiments::ConfigError& e) {
        p.line = static_cast<int>(e.line()), p.column = static_cast<int>(e.column());
        p.message =
            QString::fromStdString(e.key().empty() || e.message().find(e.key()) != std::string::npos
                                       ? e.message()
                                       : e.key() + ": " + e.message());
        return p;
    } catch (const std::exception& e) {
        p.message = QString::fromUtf8(e.what());
        return p;
    }
    p.ok = true;
    std::map<std::string, int> seeds;
    for (const auto& v : spec.variants) ++seeds[v.group];
    for (const auto& cell : experiments::design_cells(design)) {
        StudyPlanRow row;
        row.variant = QString::fromStdString(experiments::cell_variant_name(design.factors, cell));
        if (design.factors.empty()) row.variant = "base";
        for (const auto& level : cell) row.levels << QString::fromStdString(level);
        row.seeds = seeds.count(row.variant.toStdString()) ? seeds[row.variant.toStdString()] : 0;
        p.rows.push_back(row);
    }
    const auto counts = experiments::count_plan(spec);
    p.pretrain = counts.pretrain, p.finetune = counts.finetune, p.zeroShot = counts.zero_shot;
    p.analyses = counts.analyses, p.everyTask = counts.every_task;
    if (!benchJson.isEmpty()) {
        try {
            const auto rate = experiments::parse_bench_json(benchJson.toStdString());
            const auto e = experiments::estimate_plan(spec, rate);
            p.pretrainSeconds = e.pretrain_seconds, p.taskSeconds = e.finetune_seconds;
            p.rateSource = QString::fromStdString(rate.description) +
                           (benchNote.isEmpty() ? QString() : ", " + benchNote);
        } catch (const std::exception& e) {
            p.rateSource = QString::fromUtf8(e.what());
        }
    }
    return p;
}

QStringList benchArguments(const experiments::StudyDesign& design) {
    experiments::ExperimentSpec spec;
    try {
        spec = loadStudyDesignSpec(design);
    } catch (const std::exception&) {
        return {};
    }
    if (spec.variants.empty()) return {};
    const auto& c = spec.variants.front().config;
    // tupe bench's sizes by hidden width: the closest one measures a model of the same shape.
    const std::vector<std::pair<QString, int64_t>> sizes = {
        {"tiny", 32}, {"quickstart", 64}, {"small", 256}, {"base", 768}};
    QString size = "tiny";
    int64_t best = -1;
    for (const auto& [name, hidden] : sizes)
        if (const int64_t d = std::llabs(hidden - c.model.hidden_size); best < 0 || d < best)
            best = d, size = name;
    QStringList presets;
    for (const auto& v : spec.variants)
        if (!presets.contains(QString::fromStdString(v.config.model.preset)))
            presets << QString::fromStdString(v.config.model.preset);
    return {"bench",
            "--format",
            "json",
            "--size",
            size,
            "--seq",
            QString::number(c.data.max_seq_len),
            "--batch",
            QString::number(c.train.batch_size),
            "--preset",
            presets.join(","),
            "--steps",
            "5",
            "--warmup",
            "1"};
}

BenchService::BenchService(QObject* parent) : QObject(parent), process_(new QProcess(this)) {
    process_->setProcessChannelMode(QProcess::SeparateChannels);
    connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart)
            emit failed("cannot start " + process_->program() + ": " + process_->errorString());
    });
    connect(process_, qOverload<int, QProcess::ExitStatus>(&QProcess::finished), this,
            [this](int code, QProcess::ExitStatus status) {
                const QString out = QString::fromUtf8(process_->readAllStandardOutput());
                const QString err = QString::fromUtf8(process_->readAllStandardError()).trimmed();
                if (status != QProcess::NormalExit || code != 0)
                    return emit failed(QString("tupe bench failed (exit %1): %2")
                                           .arg(code)
                                           .arg(err.section('\n', -1).trimmed()));
                emit finished(out);
            });
}

BenchService::~BenchService() {
    if (process_->state() != QProcess::NotRunning) {
        process_->kill();
        process_->waitForFinished(3000);
    }
}

bool BenchService::start(const QStringList& args, const QString& workingDir) {
    if (busy() || args.isEmpty()) return false;
    const QString program = program_.isEmpty() ? findTupeCli() : program_;
    if (program.isEmpty()) {
        emit failed("the `tupe` command line was not found (set TUPE_CLI or put tupe on PATH)");
        return false;
    }
    process_->setWorkingDirectory(workingDir);
    process_->start(program, args);
    return true;
}

}  // namespace app
