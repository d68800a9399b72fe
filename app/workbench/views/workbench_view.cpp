// The tab interface's defaults (see workbench_view.h); this file also lets AUTOMOC find the
// header's Q_OBJECT.
#include "views/workbench_view.h"

#include <QComboBox>
#include <QSignalBlocker>
#include <QVariant>
#include <exception>

#include "experiments/result_store.h"

namespace app {

QString WorkbenchView::dataCsv() { return {}; }

QString WorkbenchView::fillExperimentPicker(QComboBox* picker, experiments::ResultStore* store) {
    QSignalBlocker block(picker);
    const QString current = picker->currentText();
    picker->clear();
    if (!store) return current;
    try {
        for (const auto& e : store->list_experiments())
            picker->addItem(QString::fromStdString(e.name), QVariant::fromValue<qlonglong>(e.id));
    } catch (const std::exception& e) {
        emit errorRaised(QString::fromUtf8(e.what()));
    }
    return current;
}

}  // namespace app
