// Correlation maps for a typed sentence, computed off the GUI thread: each request becomes a
// child `tupe analyze CKPT --text SENTENCE --out DIR --no-figures` (torch lives in the CLI), run
// one at a time; the output directory is then read (index.json + .npy) and cached by
// (checkpoint, sentence) for the session.
#pragma once

#include <QHash>
#include <QObject>
#include <QPair>
#include <QQueue>
#include <QTemporaryDir>
#include <memory>

#include "core/analysis_data.h"

namespace app {

class TupeProcess;

class AnalysisService : public QObject {
    Q_OBJECT
  public:
    explicit AnalysisService(QObject* parent = nullptr);
    ~AnalysisService() override;

    /// The cached analysis of (checkpoint, sentence), or nullptr.
    std::shared_ptr<const AnalysisData> cached(const QString& checkpoint,
                                               const QString& sentence) const;
    /// Emits ready() at once when cached, else queues a `tupe analyze` child.
    void request(const QString& checkpoint, const QString& sentence);
    bool busy() const;
    void setWorkingDirectory(const QString& dir) { workingDir_ = dir; }

  signals:
    void ready(const QString& checkpoint, const QString& sentence,
               std::shared_ptr<const app::AnalysisData> data);
    void failed(const QString& checkpoint, const QString& sentence, const QString& message);
    void busyChanged(bool busy);

  private:
    using Key = QPair<QString, QString>;
    void startNext();

    QTemporaryDir root_;
    TupeProcess* process_;
    QQueue<Key> queue_;
    Key current_;
    bool running_ = false;
    int counter_ = 0;
    QString workingDir_;
    QHash<Key, std::shared_ptr<const AnalysisData>> cache_;
};

}  // namespace app
