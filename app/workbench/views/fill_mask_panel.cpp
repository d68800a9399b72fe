// The fill-mask panel (see fill_mask_panel.h).
#include "views/fill_mask_panel.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QVBoxLayout>
#include <cmath>

namespace app {

FillMaskPanel::FillMaskPanel(QWidget* parent)
    : QWidget(parent),
      service_(new FillMaskService(this)),
      text_(new QLineEdit("the old man saw the [MASK] from the small house near the church .")),
      topK_(new QSpinBox),
      predict_(new QPushButton("Predict")),
      status_(new QLabel),
      titles_{new QLabel, new QLabel},
      tables_{new QTableWidget, new QTableWidget} {
    text_->setPlaceholderText("a sentence with [MASK] where the model should predict a token");
    topK_->setRange(1, 50);
    topK_->setValue(5);
    status_->setWordWrap(true);
    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel("What does this model predict?"));
    bar->addWidget(text_, 3);
    bar->addWidget(new QLabel("top"));
    bar->addWidget(topK_);
    bar->addWidget(predict_);
    auto* sides = new QHBoxLayout;
    for (int s = 0; s < 2; ++s) {
        QTableWidget* t = tables_[s];
        t->setColumnCount(4);
        t->setHorizontalHeaderLabels({"[MASK]", "token", "log-prob", "prob"});
        t->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
        t->verticalHeader()->setVisible(false);
        t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 6);
        t->setEditTriggers(QAbstractItemView::NoEditTriggers);
        t->setMinimumHeight(150);  // a mask's top 5 without scrolling
        auto* column = new QVBoxLayout;
        column->addWidget(titles_[s]);
        column->addWidget(t, 1);
        sides->addLayout(column, 1);
    }
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(bar);
    layout->addWidget(status_);
    layout->addLayout(sides, 1);
    connect(predict_, &QPushButton::clicked, this, &FillMaskPanel::predict);
    connect(text_, &QLineEdit::returnPressed, this, &FillMaskPanel::predict);
    connect(service_, &FillMaskService::ready, this,
            [this](int side, const QString& model, const QString& text,
                   const std::vector<MaskPrediction>& masks) {
                if (side < 0 || side > 1 || model != models_[side] || text != asked_[side])
                    return;  // an answer to an older question
                --pending_;
                showPrediction(side, masks);
                if (pending_ <= 0 && !failedSide_) setStatus("", false);
            });
    connect(service_, &FillMaskService::failed, this,
            [this](int side, const QString& model, const QString& text, const QString& message) {
                if (side < 0 || side > 1 || model != models_[side] || text != asked_[side]) return;
                --pending_;
                failedSide_ = true;
                tables_[side]->setRowCount(0);
                titles_[side]->setText(labels_[side] + ": failed");
                setStatus(labels_[side] + ": " + message, true);
            });
}

void FillMaskPanel::setModel(int side, const QString& label, const QString& model) {
    labels_[side] = label;
    models_[side] = model;
    asked_[side].clear();
    tables_[side]->setRowCount(0);
    titles_[side]->setText(model.isEmpty() ? label + ": no checkpoint" : label);
}

void FillMaskPanel::setStatus(const QString& message, bool error) {
    status_->setText(message);
    status_->setStyleSheet(error ? "QLabel { color: #a11a1a; }" : QString());
}

void FillMaskPanel::predict() {
    const QString text = text_->text().trimmed();
    if (!hasMaskToken(text)) {
        setStatus(
            "The sentence has no [MASK]: write [MASK] where the model should predict a "
            "token, e.g. \"the man saw the [MASK] .\"",
            true);
        return;
    }
    pending_ = 0;
    failedSide_ = false;
    for (int s = 0; s < 2; ++s) {
        tables_[s]->setRowCount(0);
        if (models_[s].isEmpty()) continue;
        asked_[s] = text;
        ++pending_;
        titles_[s]->setText(labels_[s] + ": predicting...");
        service_->request(s, models_[s], text, topK_->value());
    }
    setStatus(pending_ ? "predicting (tupe fill-mask)..." : "no checkpoint on either side",
              !pending_);
}

void FillMaskPanel::showPrediction(int side, const std::vector<MaskPrediction>& masks) {
    QTableWidget* t = tables_[side];
    int rows = 0;
    for (const MaskPrediction& m : masks) rows += int(m.top.size());
    t->setRowCount(rows);
    int row = 0;
    for (size_t i = 0; i < masks.size(); ++i) {
        for (size_t k = 0; k < masks[i].top.size(); ++k, ++row) {
            const MaskToken& c = masks[i].top[k];
            auto* where = new QTableWidgetItem(
                k == 0 ? QString("#%1 (position %2)").arg(i + 1).arg(masks[i].position) : "");
            auto* logprob = new QTableWidgetItem(QString::number(c.logprob, 'f', 3));
            auto* prob = new QTableWidgetItem(QString::number(std::exp(c.logprob), 'f', 3));
            logprob->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            prob->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            auto* token = new QTableWidgetItem(c.token);
            token->setToolTip(QString("id %1").arg(c.id));
            t->setItem(row, 0, where);
            t->setItem(row, 1, token);
            t->setItem(row, 2, logprob);
            t->setItem(row, 3, prob);
        }
    }
    titles_[side]->setText(QString("%1: %2 [MASK]%3, top %4")
                               .arg(labels_[side])
                               .arg(masks.size())
                               .arg(masks.size() == 1 ? "" : "s")
                               .arg(masks.empty() ? 0 : masks.front().top.size()));
}

}  // namespace app
