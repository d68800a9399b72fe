// "What does this model predict?": a sentence with [MASK] and a Predict button under the
// correlation maps; each side's model (a run's checkpoint or an HF folder) answers through
// `tupe fill-mask ... --format json` run as a child process (core/fill_mask_service.h), and
// its top tokens per [MASK] with their natural-log probabilities fill a small table per side.
#pragma once

#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QWidget>
#include <vector>

#include "core/fill_mask_service.h"

namespace app {

class FillMaskPanel : public QWidget {
    Q_OBJECT
  public:
    explicit FillMaskPanel(QWidget* parent = nullptr);
    /// The model of side 0 (left) or 1 (right): a checkpoint or an HF folder; empty: none.
    void setModel(int side, const QString& label, const QString& model);
    /// Asks both sides' models for the text's [MASK]s (what the Predict button does).
    void predict();

    QLineEdit* text() const { return text_; }
    QPushButton* predictButton() const { return predict_; }
    QLabel* status() const { return status_; }
    QTableWidget* table(int side) const { return tables_[side]; }
    FillMaskService* service() const { return service_; }

  private:
    void showPrediction(int side, const std::vector<MaskPrediction>& masks);
    void setStatus(const QString& message, bool error);
    FillMaskService* service_;
    QLineEdit* text_;
    QSpinBox* topK_;
    QPushButton* predict_;
    QLabel* status_;
    QLabel* titles_[2];
    QTableWidget* tables_[2];
    QString labels_[2], models_[2], asked_[2];  ///< asked_: the text last sent for the side
    int pending_ = 0;                           ///< answers still to come
    bool failedSide_ = false;  ///< a side failed: its message stays in the status line
};

}  // namespace app
