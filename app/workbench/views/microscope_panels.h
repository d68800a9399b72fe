// Two panels over what `tupe ablate` and `tupe heads` stored beside a run
// (core/microscope_data.h): the ablation (a layers x heads map of the change in masked-token
// loss when a head's positional term is removed, and the table of every row with its 95%
// interval and positional share, the whole model last), shown under the correlation maps; and
// the head types (heads grouped by type in the rule's order with their scores, and the number
// of heads of each type over the snapshots), shown above the head gallery.
#pragma once

#include <QLabel>
#include <QTableWidget>
#include <QTreeWidget>
#include <QWidget>

#include "core/microscope_data.h"
#include "views/plot_util.h"

namespace app {

/// The colour of head type `type` (one per type of headTypeOrder(), grey for mixed).
QColor headTypeColor(const QString& type);

class AblationPanel : public QWidget {
    Q_OBJECT
  public:
    explicit AblationPanel(QWidget* parent = nullptr);
    /// Shows `result` of run `label` (nullptr: `message` instead).
    void setAblation(const AblationResult* result, const QString& label,
                     const QString& message = {});
    /// Selects the table row of (layer, head), if any.
    void markHead(int layer, int head);
    HeatmapPlot* heatmap() const { return map_; }
    QTableWidget* table() const { return table_; }
    QLabel* summary() const { return summary_; }

  signals:
    /// A head was clicked in the map or the table.
    void headClicked(int layer, int head);

  private:
    HeatmapPlot* map_;
    QTableWidget* table_;
    QLabel* summary_;
};

class HeadTypesPanel : public QWidget {
    Q_OBJECT
  public:
    explicit HeadTypesPanel(QWidget* parent = nullptr);
    /// Shows the last snapshot of `run` grouped by type and its counts over the snapshots
    /// (nullptr: `message` instead).
    void setRun(const HeadTypeRun* run, const QString& label, const QString& message = {});
    QTreeWidget* tree() const { return tree_; }
    QCustomPlot* counts() const { return counts_; }

  private:
    QLabel* summary_;
    QTreeWidget* tree_;
    QCustomPlot* counts_;
    QCPTextElement* countsTitle_;
};

}  // namespace app
