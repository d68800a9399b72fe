// `tupe fill-mask` as a child process and its JSON (see fill_mask_service.h).
#include "core/fill_mask_service.h"

#include <QDir>
#include <QFileInfo>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "core/tupe_process.h"

namespace app {

std::vector<MaskPrediction> parseFillMaskJson(const QByteArray& json) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(json.constBegin(), json.constEnd());
    } catch (const nlohmann::json::parse_error& e) {
        throw std::runtime_error(std::string("tupe fill-mask printed no JSON (") + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("masks") || !j["masks"].is_array())
        throw std::runtime_error("tupe fill-mask: the JSON has no \"masks\" list");
    std::vector<MaskPrediction> out;
    try {
        for (const auto& m : j["masks"]) {
            MaskPrediction p;
            p.position = m.at("position").get<int>();
            for (const auto& t : m.at("top"))
                p.top.push_back({QString::fromStdString(t.at("token").get<std::string>()),
                                 t.at("id").get<qint64>(), t.at("logprob").get<double>()});
            out.push_back(std::move(p));
        }
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(std::string("tupe fill-mask: unexpected JSON (") + e.what() + ")");
    }
    return out;
}

bool hasMaskToken(const QString& text) { return text.contains("[MASK]", Qt::CaseInsensitive); }

QString modelFolderProblem(const QString& dir) {
    const QDir d(dir);
    if (dir.isEmpty() || !d.exists()) return "no such folder: " + dir;
    if (!d.exists("config.json")) return dir + " has no config.json: not an HF model folder";
    // The weight files the HF importer reads (analysis/src/hf_import.cpp), sharded or not.
    bool weights = false;
    for (const char* f : {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                          "pytorch_model.bin.index.json"})
        weights = weights || d.exists(f);
    if (!weights) return dir + " has no model.safetensors (nor pytorch_model.bin): no weights";
    if (!d.exists("vocab.txt")) return dir + " has no vocab.txt (the WordPiece vocabulary)";
    return {};
}

FillMaskService::FillMaskService(QObject* parent) : QObject(parent), process_(new QProcess(this)) {
    // stdout is the JSON; stderr carries warnings and the one-line error of a failure.
    process_->setProcessChannelMode(QProcess::SeparateChannels);
    connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e != QProcess::FailedToStart) return;
        emit failed(current_.tag, current_.model, current_.text,
                    "cannot start " + process_->program() + ": " + process_->errorString());
        startNext();
    });
    connect(process_, qOverload<int, QProcess::ExitStatus>(&QProcess::finished), this,
            [this](int code, QProcess::ExitStatus status) {
                const QByteArray out = process_->readAllStandardOutput();
                const QString err = QString::fromUtf8(process_->readAllStandardError()).trimmed();
                const Request r = current_;
                if (status != QProcess::NormalExit || code != 0) {
                    const QString last = err.section('\n', -1).trimmed();
                    emit failed(r.tag, r.model, r.text,
                                (status == QProcess::NormalExit
                                     ? QString("tupe fill-mask failed (exit %1): ").arg(code)
                                     : QString("tupe fill-mask crashed: ")) +
                                    (last.isEmpty() ? QString("no message") : last));
                } else {
                    try {
                        emit ready(r.tag, r.model, r.text, parseFillMaskJson(out));
                    } catch (const std::exception& e) {
                        emit failed(r.tag, r.model, r.text, QString::fromUtf8(e.what()));
                    }
                }
                startNext();
            });
}

FillMaskService::~FillMaskService() {
    if (process_->state() != QProcess::NotRunning) {
        process_->kill();
        process_->waitForFinished(3000);
    }
}

void FillMaskService::request(int tag, const QString& model, const QString& text, int topK) {
    queue_.enqueue({tag, model, text, topK});
    if (process_->state() == QProcess::NotRunning) startNext();
}

void FillMaskService::startNext() {
    if (queue_.isEmpty() || process_->state() != QProcess::NotRunning) return;
    current_ = queue_.dequeue();
    const QString program = program_.isEmpty() ? findTupeCli() : program_;
    if (program.isEmpty()) {
        emit failed(current_.tag, current_.model, current_.text,
                    "the `tupe` command line was not found (set TUPE_CLI or put tupe on PATH)");
        return startNext();
    }
    process_->start(program, {"fill-mask", current_.model, "--text", current_.text, "--top-k",
                              QString::number(current_.topK), "--format", "json"});
}

}  // namespace app
