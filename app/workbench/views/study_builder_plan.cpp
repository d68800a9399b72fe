// The study builder's form <-> design, its plan, files and queue (see study_builder_view.h).
#include <QDate>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>

#include "core/store_access.h"
#include "engine/config_fields.h"
#include "experiments/config_loader.h"
#include "views/field_form.h"
#include "views/study_builder_view.h"

namespace app {

namespace {

std::vector<uint64_t> parseSeeds(const QString& text, bool* ok) {
    std::vector<uint64_t> seeds;
    *ok = true;
    for (const QString& item : text.split(',', Qt::SkipEmptyParts)) {
        bool good = false;
        const qulonglong s = item.trimmed().toULongLong(&good);
        if (good)
            seeds.push_back(s);
        else
            *ok = false;
    }
    return seeds;
}

// The cells of `cells` whose every level is a level of its factor now.
std::vector<std::vector<std::string>> validCells(
    const std::vector<std::vector<std::string>>& cells,
    const std::vector<experiments::StudyFactor>& factors) {
    std::vector<std::vector<std::string>> out;
    for (const auto& cell : cells) {
        bool ok = cell.size() == factors.size();
        for (size_t i = 0; ok && i < cell.size(); ++i)
            ok = std::count(factors[i].levels.begin(), factors[i].levels.end(), cell[i]) > 0;
        if (ok) out.push_back(cell);
    }
    return out;
}

}  // namespace

void StudyBuilderView::readForm() {
    experiments::StudyDesign d;
    d.comment = comment_->toPlainText().trimmed().toStdString();
    d.name = name_->text().trimmed().toStdString();
    d.preset = preset_->currentText().toStdString();
    d.size = size_->currentText().toStdString();
    for (const auto& [key, value] : baseForm_->values())
        d.base.emplace_back(key.toStdString(), value.toStdString());
    for (const FactorRow* row : rows_) {
        experiments::StudyFactor f{row->key()->currentText().toStdString(), {}};
        for (const QString& l : row->levelList()) f.levels.push_back(l.toStdString());
        if (!f.levels.empty()) d.factors.push_back(f);
    }
    d.full_factorial = full_->isChecked();
    d.cells = validCells(design_.cells, d.factors);
    bool seedsOk = true;
    d.seeds = parseSeeds(seeds_->text(), &seedsOk);
    seeds_->setStyleSheet(seedsOk ? QString() : "background: #fde2e1;");
    for (const QString& key : studyForm_->keys())
        if (const QString v = studyForm_->editor(key)->yamlText(); !v.isEmpty())
            d.set_setting(key.toStdString(), v.toStdString());
    QStringList tasks;
    for (int i = 0; i < tasks_->count(); ++i)
        if (tasks_->item(i)->checkState() == Qt::Checked) tasks << tasks_->item(i)->text();
    if (!tasks.isEmpty()) d.set_setting("glue.tasks", ("[" + tasks.join(", ") + "]").toStdString());
    d.analysis = analysis_->isChecked();
    d.extrapolation = extrapolation_->isChecked();
    for (const auto& [key, value] : d.settings) {
        d.analysis = d.analysis || key.rfind("analysis.", 0) == 0;
        d.extrapolation = d.extrapolation || key.rfind("extrapolation.", 0) == 0;
    }
    d.kept = design_.kept;  // what the form cannot edit stays as it was read
    d.notes = design_.notes;
    design_ = d;
}

void StudyBuilderView::setDesign(const experiments::StudyDesign& d, const QString& path) {
    loading_ = true;
    path_ = path;
    fileLabel_->setText(path.isEmpty() ? "(new study)" : path);
    name_->setText(QString::fromStdString(d.name));
    comment_->setPlainText(QString::fromStdString(d.comment).trimmed());
    preset_->setCurrentText(QString::fromStdString(d.preset));
    size_->setCurrentText(QString::fromStdString(d.size));
    for (FactorRow* row : rows_) row->deleteLater();
    rows_.clear();
    for (const auto& f : d.factors) {
        QStringList levels;
        for (const auto& l : f.levels) levels << QString::fromStdString(l);
        appendFactorRow()->setKey(QString::fromStdString(f.key), levels);
    }
    QStringList seeds;
    for (uint64_t s : d.seeds) seeds << QString::number(s);
    seeds_->setText(seeds.join(", "));
    (d.full_factorial ? full_ : chosen_)->setChecked(true);
    baseForm_->clear();
    for (const auto& [key, value] : d.base)
        if (FieldEditor* e = baseForm_->editor(QString::fromStdString(key)))
            e->setText(QString::fromStdString(value));
    studyForm_->clear();
    QStringList tasks;
    for (const auto& [key, value] : d.settings) {
        if (key == "glue.tasks") {
            const QString list = QString::fromStdString(value).remove('[').remove(']');
            for (const QString& t : list.split(',', Qt::SkipEmptyParts)) tasks << t.trimmed();
        } else if (FieldEditor* e = studyForm_->editor(QString::fromStdString(key))) {
            e->setYamlText(QString::fromStdString(value));
        }
    }
    for (int i = 0; i < tasks_->count(); ++i)
        tasks_->item(i)->setCheckState(tasks.contains(tasks_->item(i)->text(), Qt::CaseInsensitive)
                                           ? Qt::Checked
                                           : Qt::Unchecked);
    analysis_->setChecked(d.analysis);
    extrapolation_->setChecked(d.extrapolation);
    design_ = d;
    loading_ = false;
    refresh();
}

bool StudyBuilderView::loadText(const QString& path, const QString& text) {
    try {
        const auto d = experiments::read_study_design(
            text.toStdString(),
            QFileInfo(path.isEmpty() ? "study.yaml" : path).fileName().toStdString());
        setDesign(d, path);
        return true;
    } catch (const std::exception& e) {
        emit errorRaised("the study builder cannot read " + (path.isEmpty() ? "the YAML" : path) +
                         ": " + QString::fromUtf8(e.what()));
        return false;
    }
}

QString StudyBuilderView::yaml() const {
    return QString::fromStdString(experiments::write_study_design(design_));
}

const StudyPlanInfo& StudyBuilderView::plan() {
    if (refreshTimer_.isActive()) {
        refreshTimer_.stop();
        refresh();
    }
    return plan_;
}

void StudyBuilderView::checkLevels() {
    engine::PretrainConfig base;
    bool baseLoads = true;
    try {
        base.model = engine::make_model_config(design_.preset, design_.size);
        for (const auto& [key, value] : design_.base) engine::set_config_value(base, key, value);
        base.model.validate();
        base.train.validate();
    } catch (const std::exception&) {
        // The base form and the plan show what is wrong with the base itself; a level is
        // checked only on a base that loads.
        baseLoads = false;
    }
    for (FactorRow* row : rows_) {
        QString message;
        for (const QString& level : baseLoads ? row->levelList() : QStringList{}) {
            const std::string m = engine::check_config_value(
                base, row->key()->currentText().toStdString(), level.toStdString());
            if (!m.empty()) {
                message = level + ": " + QString::fromStdString(m);
                break;
            }
        }
        row->levels()->setStyleSheet(message.isEmpty() ? QString() : "background: #fde2e1;");
        row->levels()->setProperty("error", message);
        if (!message.isEmpty()) row->levels()->setToolTip(message);
    }
}

void StudyBuilderView::refresh() {
    refreshTimer_.stop();
    readForm();
    checkLevels();
    preview_->setPlainText(yaml());
    plan_ = planStudy(design_, benchJson_, benchNote_);
    summary_->setText(plan_.summary());
    summary_->setStyleSheet(plan_.ok ? "color: #1b4e7a;" : "color: #a11a1a;");
    QStringList notes;
    for (const auto& n : design_.notes) notes << QString::fromStdString(n);
    notes_->setText(notes.isEmpty() ? QString() : "Not editable in the form: " + notes.join("; "));
    notes_->setVisible(!notes.isEmpty());
    toEditor_->setEnabled(true);
    queue_->setEnabled(plan_.ok);
    fillPlanTable();
}

void StudyBuilderView::fillPlanTable() {
    loading_ = true;
    QStringList headers = {"run", "variant"};
    for (const auto& f : design_.factors) headers << QString::fromStdString(f.key);
    headers << "seeds";
    planTable_->clear();
    planTable_->setColumnCount(int(headers.size()));
    planTable_->setHorizontalHeaderLabels(headers);
    // Chosen cells: every cell of the product, ticked when chosen; else the cells that run.
    experiments::StudyDesign all = design_;
    all.full_factorial = true;
    const auto cells = experiments::design_cells(all);
    const auto& chosen = design_.cells;
    planTable_->setRowCount(int(cells.size()));
    int seeds = design_.seeds.empty() ? 1 : int(design_.seeds.size());
    for (int r = 0; r < int(cells.size()); ++r) {
        const bool runs = design_.full_factorial ||
                          std::find(chosen.begin(), chosen.end(), cells[size_t(r)]) != chosen.end();
        auto* tick = new QTableWidgetItem;
        tick->setFlags(design_.full_factorial ? Qt::ItemIsEnabled
                                              : Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
        tick->setCheckState(runs ? Qt::Checked : Qt::Unchecked);
        planTable_->setItem(r, 0, tick);
        const QString name = design_.factors.empty()
                                 ? QString("base")
                                 : QString::fromStdString(experiments::cell_variant_name(
                                       design_.factors, cells[size_t(r)]));
        planTable_->setItem(r, 1, new QTableWidgetItem(name));
        for (size_t c = 0; c < cells[size_t(r)].size(); ++c)
            planTable_->setItem(r, int(2 + c),
                                new QTableWidgetItem(QString::fromStdString(cells[size_t(r)][c])));
        planTable_->setItem(r, int(headers.size()) - 1,
                            new QTableWidgetItem(runs ? QString::number(seeds) : QString("-")));
    }
    planTable_->resizeColumnsToContents();
    loading_ = false;
}

bool StudyBuilderView::saveTo(const QString& path) {
    plan();
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(yaml().toUtf8()) < 0) {
        emit errorRaised("cannot write " + path + ": " + f.errorString());
        return false;
    }
    path_ = path;
    fileLabel_->setText(path);
    emit statusMessage("saved " + path);
    return true;
}

void StudyBuilderView::saveAs() {
    const QString start =
        path_.isEmpty() ? QDir(workDir_).filePath("experiments/" + name_->text() + ".yaml") : path_;
    const QString p = QFileDialog::getSaveFileName(this, "Save study", start, "YAML (*.yaml)");
    if (!p.isEmpty()) saveTo(p);
}

void StudyBuilderView::queueStudy() {
    if (!plan().ok) return emit errorRaised("not queued: " + plan_.summary());
    if (path_.isEmpty()) saveAs();
    if (path_.isEmpty() || !saveTo(path_)) return;
    emit queueRequested(path_);
}

void StudyBuilderView::measureMachine() {
    const QStringList args = benchArguments(design_);
    if (args.isEmpty()) return emit errorRaised("the study does not load: nothing to measure");
    if (bench_->start(args, workDir_)) {
        measure_->setEnabled(false);
        emit statusMessage("measuring: tupe " + args.join(' '));
    }
}

void StudyBuilderView::setBenchFigures(const QString& json, const QString& note) {
    benchJson_ = json;
    benchNote_ = note;
    refresh();
}

void StudyBuilderView::setStore(experiments::ResultStore*, const QString& dbPath) {
    if (dbPath.isEmpty()) return;
    workDir_ = projectRootFor(dbPath);
    // This machine's figures: the last `tupe bench` the builder ran, beside the results.
    QFile f(QFileInfo(dbPath).absoluteDir().filePath("bench.json"));
    if (benchJson_.isEmpty() && f.open(QIODevice::ReadOnly))
        setBenchFigures(QString::fromUtf8(f.readAll()),
                        "measured " + QFileInfo(f).lastModified().date().toString(Qt::ISODate));
}

QString StudyBuilderView::tableText(const QString& format) {
    plan();
    QStringList lines;
    const bool latex = format == "latex";
    auto row = [&](const QStringList& cells) {
        lines << (latex ? cells.join(" & ") + " \\\\" : "| " + cells.join(" | ") + " |");
    };
    QStringList headers;
    for (int c = 1; c < planTable_->columnCount(); ++c)
        headers << planTable_->horizontalHeaderItem(c)->text();
    row(headers);
    if (!latex) lines << "|" + QString(" --- |").repeated(int(headers.size()));
    for (int r = 0; r < planTable_->rowCount(); ++r) {
        if (planTable_->item(r, 0)->checkState() != Qt::Checked) continue;
        QStringList cells;
        for (int c = 1; c < planTable_->columnCount(); ++c) cells << planTable_->item(r, c)->text();
        row(cells);
    }
    return lines.join("\n") + "\n";
}

void StudyBuilderView::prepareScreenshot() {
    // The shipped factorial ablation when the form is still blank.
    if (!design_.factors.empty()) return;
    const QString file = QDir(workDir_).filePath("experiments/tupe_factorial.yaml");
    QFile f(file);
    if (f.open(QIODevice::ReadOnly)) loadText(file, QString::fromUtf8(f.readAll()));
}

}  // namespace app
