// Child-process analysis with a per-session cache (see analysis_service.h).
#include "core/analysis_service.h"

#include "core/tupe_process.h"

namespace app {

AnalysisService::AnalysisService(QObject* parent)
    : QObject(parent), process_(new TupeProcess(this)) {
    connect(process_, &TupeProcess::failed, this, [this](const QString& message) {
        running_ = false;
        emit failed(current_.first, current_.second, message);
        startNext();
    });
    connect(process_, &TupeProcess::finished, this, [this](int code, bool, const QString& message) {
        running_ = false;
        const QString dir = root_.path() + QString("/a%1").arg(counter_);
        if (code != 0) {
            emit failed(current_.first, current_.second,
                        "tupe analyze " + current_.first + ": " + message);
        } else {
            try {
                auto data = std::make_shared<const AnalysisData>(loadAnalysis(dir));
                cache_.insert(current_, data);
                emit ready(current_.first, current_.second, data);
            } catch (const std::exception& e) {
                emit failed(current_.first, current_.second, QString::fromUtf8(e.what()));
            }
        }
        startNext();
    });
}

AnalysisService::~AnalysisService() = default;

std::shared_ptr<const AnalysisData> AnalysisService::cached(const QString& checkpoint,
                                                            const QString& sentence) const {
    return cache_.value({checkpoint, sentence});
}

bool AnalysisService::busy() const { return running_ || !queue_.isEmpty(); }

void AnalysisService::request(const QString& checkpoint, const QString& sentence) {
    if (auto hit = cached(checkpoint, sentence)) {
        emit ready(checkpoint, sentence, hit);
        return;
    }
    const Key key{checkpoint, sentence};
    if ((running_ && current_ == key) || queue_.contains(key)) return;
    queue_.enqueue(key);
    if (!running_) startNext();
}

void AnalysisService::startNext() {
    if (running_) return;
    if (queue_.isEmpty()) {
        emit busyChanged(false);
        return;
    }
    current_ = queue_.dequeue();
    ++counter_;
    const QString dir = root_.path() + QString("/a%1").arg(counter_);
    running_ = true;
    emit busyChanged(true);
    if (!process_->start(findTupeCli(),
                         {"analyze", current_.first, "--text", current_.second, "--out", dir,
                          "--no-figures", "--threads", "2"},
                         workingDir_)) {
        // failed() was emitted by the process and handled above (it starts the next one).
        return;
    }
}

}  // namespace app
