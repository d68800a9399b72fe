// "What does this model predict?": `tupe fill-mask MODEL --text T --top-k K --format json` run as
// a child process (the MLM head needs torch, which no Qt file may include) and its JSON,
// {"masks": [{"position": i, "top": [{"token", "id", "logprob"}, ...]}, ...]}, read into plain
// structs for the views. MODEL is a checkpoint or an HF folder (config.json +
// model.safetensors + vocab.txt). No widgets.
#pragma once

#include <QByteArray>
#include <QObject>
#include <QProcess>
#include <QQueue>
#include <QString>
#include <vector>

namespace app {

/// One candidate token at a [MASK].
struct MaskToken {
    QString token;
    qint64 id = 0;
    double logprob = 0;  ///< natural log
};

/// One [MASK] of the text: its position in the tokenized input ([CLS] = 0) and the top tokens,
/// most probable first.
struct MaskPrediction {
    int position = 0;
    std::vector<MaskToken> top;
};

/// Parses `tupe fill-mask --format json`. Throws std::runtime_error with a one-line reason when
/// the text is not that JSON.
std::vector<MaskPrediction> parseFillMaskJson(const QByteArray& json);

/// Whether `text` holds a [MASK] for fill-mask to fill.
bool hasMaskToken(const QString& text);

/// What is wrong with `dir` as an HF model folder (config.json; model.safetensors or
/// pytorch_model.bin, either possibly sharded; vocab.txt), one line; empty when it looks like
/// one.
QString modelFolderProblem(const QString& dir);

/// Runs the requests one after another, each a `tupe fill-mask` child.
class FillMaskService : public QObject {
    Q_OBJECT
  public:
    explicit FillMaskService(QObject* parent = nullptr);
    ~FillMaskService() override;

    /// Queues `tupe fill-mask model --text text --top-k topK --format json`; `tag` comes back
    /// with the answer (the view's side, say).
    void request(int tag, const QString& model, const QString& text, int topK = 5);
    bool busy() const { return process_->state() != QProcess::NotRunning || !queue_.isEmpty(); }
    /// The CLI to run; empty: findTupeCli() (tests point it elsewhere).
    void setProgram(const QString& program) { program_ = program; }

  signals:
    void ready(int tag, const QString& model, const QString& text,
               const std::vector<app::MaskPrediction>& masks);
    /// `message` is one line: the child's last stderr line when it failed.
    void failed(int tag, const QString& model, const QString& text, const QString& message);

  private:
    struct Request {
        int tag = 0;
        QString model, text;
        int topK = 5;
    };
    void startNext();
    QProcess* process_;
    QString program_;
    QQueue<Request> queue_;
    Request current_;
};

}  // namespace app
