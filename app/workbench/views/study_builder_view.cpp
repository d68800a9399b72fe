// The study builder view (see study_builder_view.h).
#include "views/study_builder_view.h"

#include <QButtonGroup>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QScrollArea>
#include <QSplitter>
#include <set>

#include "analysis/tasks.h"
#include "engine/config_fields.h"
#include "experiments/config_loader.h"
#include "experiments/study_fields.h"
#include "views/field_form.h"

namespace app {

namespace {

// The keys a factor can vary: the scheme fields and train.lr first, then every other config
// key that can change a result, except the seed (the seeds have a field of their own) and
// the ones a vocabulary fixes.
QStringList factorKeys() {
    QStringList keys = {"model.preset",    "model.absolute_position", "model.relative_position",
                        "model.untie_cls", "model.shared_pos_term",   "train.lr"};
    const QStringList never = {"out_dir",
                               "data.corpus",
                               "data.vocab",
                               "data.cache_dir",
                               "train.seed",
                               "train.device",
                               "train.threads",
                               "train.tensorboard",
                               "train.log_interval",
                               "train.checkpoint_interval",
                               "model.vocab_size",
                               "model.size",
                               "model.pad_token_id"};
    for (const auto& f : engine::config_field_infos()) {
        const QString key = QString::fromStdString(f.key);
        if (!keys.contains(key) && !never.contains(key)) keys << key;
    }
    return keys;
}

QStringList splitList(const QString& text) {
    QStringList out;
    for (const QString& item : text.split(',', Qt::SkipEmptyParts))
        if (!item.trimmed().isEmpty()) out << item.trimmed();
    return out;
}

}  // namespace

FactorRow::FactorRow(QWidget* parent)
    : QWidget(parent),
      key_(new QComboBox),
      levels_(new QLineEdit),
      remove_(new QPushButton("Remove")) {
    key_->addItems(factorKeys());
    key_->setObjectName("factorKey");
    levels_->setObjectName("factorLevels");
    remove_->setObjectName("removeFactor");
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(key_, 2);
    layout->addWidget(levels_, 3);
    layout->addWidget(remove_);
    describe();
    connect(key_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] {
        describe();
        const auto* f = engine::find_config_field(key_->currentText().toStdString());
        if (f && f->kind == engine::ConfigFieldInfo::Kind::kBool && levels_->text().isEmpty())
            levels_->setText("true, false");
        emit edited();
    });
    connect(levels_, &QLineEdit::textEdited, this, &FactorRow::edited);
    connect(remove_, &QPushButton::clicked, this, [this] { emit removeRequested(this); });
}

void FactorRow::setKey(const QString& key, const QStringList& levels) {
    {
        const QSignalBlocker block(key_);
        if (key_->findText(key) < 0) key_->addItem(key);  // a key outside the list: kept
        key_->setCurrentText(key);
    }
    levels_->setText(levels.join(", "));
    describe();
}

// The key's documentation and its values as the tooltip and the levels' placeholder.
void FactorRow::describe() {
    const auto* f = engine::find_config_field(key_->currentText().toStdString());
    if (!f) return;
    QString hint = "levels, comma-separated";
    if (f->kind == engine::ConfigFieldInfo::Kind::kBool) hint = "true, false";
    if (!f->choices.empty()) {
        QStringList c;
        for (const auto& v : f->choices) c << QString::fromStdString(v);
        hint = "of: " + c.join(", ");
    }
    levels_->setPlaceholderText(hint);
    const QString tip = "<b>" + key_->currentText() + "</b><br>" +
                        QString::fromStdString(f->doc).toHtmlEscaped() + "<br>" + hint;
    key_->setToolTip(tip);
    levels_->setToolTip(tip);
}

QStringList FactorRow::levelList() const { return splitList(levels_->text()); }

StudyBuilderView::StudyBuilderView(QWidget* parent)
    : WorkbenchView(parent),
      bench_(new BenchService(this)),
      name_(new QLineEdit),
      comment_(new QPlainTextEdit),
      preset_(new QComboBox),
      size_(new QComboBox),
      addFactor_(new QPushButton("Add factor")),
      seeds_(new QLineEdit),
      full_(new QRadioButton("Full factorial")),
      chosen_(new QRadioButton("Chosen cells (tick them in the plan)")),
      tasks_(new QListWidget),
      analysis_(new QCheckBox("analysis: block (tupe analyze on the snapshots)")),
      extrapolation_(new QCheckBox("extrapolation: block (tupe extrapolate)")),
      planTable_(new QTableWidget),
      summary_(new QLabel),
      notes_(new QLabel),
      fileLabel_(new QLabel("(new study)")),
      preview_(new QPlainTextEdit),
      toEditor_(new QPushButton("Open in editor")),
      queue_(new QPushButton("Queue")) {
    auto* split = new QSplitter;
    split->addWidget(buildFormPane());
    split->addWidget(buildPlanPane());
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(split);
    refreshTimer_.setSingleShot(true);
    refreshTimer_.setInterval(250);
    connect(&refreshTimer_, &QTimer::timeout, this, &StudyBuilderView::refresh);
    connect(bench_, &BenchService::finished, this, [this](const QString& json) {
        const QString file = QDir(workDir_.isEmpty() ? QDir::currentPath() : workDir_)
                                 .filePath("results/bench.json");
        QDir().mkpath(QFileInfo(file).absolutePath());
        QFile f(file);
        if (f.open(QIODevice::WriteOnly)) f.write(json.toUtf8());
        if (measure_) measure_->setEnabled(true);
        setBenchFigures(json, "measured " + QDate::currentDate().toString(Qt::ISODate));
    });
    connect(bench_, &BenchService::failed, this, [this](const QString& m) {
        if (measure_) measure_->setEnabled(true);
        emit errorRaised(m);
    });
    experiments::StudyDesign blank;
    blank.name = "my_study";
    setDesign(blank);
}

QWidget* StudyBuilderView::buildFormPane() {
    auto* inner = new QWidget;
    auto* v = new QVBoxLayout(inner);
    v->addWidget(buildStudyBox());
    v->addWidget(buildFactorBox());
    buildSettingsBoxes(v);
    v->addStretch(1);
    auto* scroll = new QScrollArea;
    scroll->setWidgetResizable(true);
    scroll->setWidget(inner);
    return scroll;
}

QWidget* StudyBuilderView::buildStudyBox() {
    auto* box = new QGroupBox("Study");
    auto* form = new QFormLayout(box);
    name_->setObjectName("studyName");
    comment_->setObjectName("studyComment");
    comment_->setMaximumHeight(60);
    comment_->setPlaceholderText("What the study asks (written as the file's opening comment)");
    for (const auto& p : engine::model_presets()) preset_->addItem(QString::fromStdString(p));
    for (const auto& s : engine::model_sizes()) size_->addItem(QString::fromStdString(s));
    preset_->setObjectName("preset");
    size_->setObjectName("size");
    preset_->setToolTip(QString::fromStdString(engine::find_config_field("model.preset")->doc));
    size_->setToolTip(QString::fromStdString(engine::find_config_field("model.size")->doc));
    form->addRow("name", name_);
    form->addRow("description", comment_);
    form->addRow("base preset", preset_);
    form->addRow("size", size_);
    connect(name_, &QLineEdit::textEdited, this, &StudyBuilderView::scheduleRefresh);
    connect(comment_, &QPlainTextEdit::textChanged, this, &StudyBuilderView::scheduleRefresh);
    connect(preset_, qOverload<int>(&QComboBox::currentIndexChanged), this,
            &StudyBuilderView::scheduleRefresh);
    connect(size_, qOverload<int>(&QComboBox::currentIndexChanged), this,
            &StudyBuilderView::scheduleRefresh);
    return box;
}

QWidget* StudyBuilderView::buildFactorBox() {
    auto* box = new QGroupBox("Factors");
    auto* v = new QVBoxLayout(box);
    factorLayout_ = new QVBoxLayout;
    v->addLayout(factorLayout_);
    addFactor_->setObjectName("addFactor");
    v->addWidget(addFactor_, 0, Qt::AlignLeft);
    auto* seedRow = new QFormLayout;
    seeds_->setObjectName("seeds");
    seeds_->setPlaceholderText("pretraining seeds, e.g. 1, 2 (each variant runs as V@seedN)");
    for (const auto& f : experiments::study_field_infos())
        if (f.key == "pretrain_seeds") seeds_->setToolTip(QString::fromStdString(f.doc));
    seedRow->addRow("seeds", seeds_);
    v->addLayout(seedRow);
    auto* group = new QButtonGroup(box);
    group->addButton(full_);
    group->addButton(chosen_);
    full_->setChecked(true);
    auto* design = new QHBoxLayout;
    design->addWidget(full_);
    design->addWidget(chosen_);
    v->addLayout(design);
    connect(addFactor_, &QPushButton::clicked, this, [this] {
        appendFactorRow();
        scheduleRefresh();
    });
    connect(seeds_, &QLineEdit::textEdited, this, &StudyBuilderView::scheduleRefresh);
    connect(full_, &QRadioButton::toggled, this, [this](bool on) {
        if (!on && design_.cells.empty()) design_.cells = experiments::design_cells(design_);
        scheduleRefresh();
    });
    return box;
}

QWidget* StudyBuilderView::buildSettingsBoxes(QVBoxLayout* into) {
    auto* tasksBox = new QGroupBox("Tasks (glue.tasks; none ticked: every task the data has)");
    auto* tv = new QVBoxLayout(tasksBox);
    tasks_->setObjectName("tasks");
    for (const auto& t : analysis::glue_tasks()) {
        auto* item = new QListWidgetItem(QString::fromStdString(t.key));
        item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
        item->setCheckState(Qt::Unchecked);
        item->setToolTip(QString::fromStdString(t.name) +
                         (t.zero_shot   ? ": zero-shot minimal pairs, scored without training"
                          : t.synthetic ? ": built-in, fine-tuned"
                                        : ": GLUE, fine-tuned (glue.data must name the folder)"));
        tasks_->addItem(item);
    }
    tasks_->setMaximumHeight(120);
    tv->addWidget(tasks_);
    into->addWidget(tasksBox);
    connect(tasks_, &QListWidget::itemChanged, this, &StudyBuilderView::scheduleRefresh);

    auto* settings = new QGroupBox("Study settings (study-field table; empty = the default)");
    auto* sv = new QVBoxLayout(settings);
    analysis_->setObjectName("analysisBlock");
    extrapolation_->setObjectName("extrapolationBlock");
    sv->addWidget(analysis_);
    sv->addWidget(extrapolation_);
    studyForm_ = new FieldForm(studyFieldSpecs(
        {"", "glue.", "finetune.", "analysis.", "extrapolation."}, {"name", "glue.tasks"}));
    studyForm_->setObjectName("studyForm");
    sv->addWidget(studyForm_);
    into->addWidget(settings);
    connect(analysis_, &QCheckBox::toggled, this, &StudyBuilderView::scheduleRefresh);
    connect(extrapolation_, &QCheckBox::toggled, this, &StudyBuilderView::scheduleRefresh);
    connect(studyForm_, &FieldForm::edited, this, &StudyBuilderView::scheduleRefresh);

    auto* base = new QGroupBox("Base settings of every variant (config field table)");
    auto* bv = new QVBoxLayout(base);
    baseForm_ = new FieldForm(configFieldSpecs(
        {"model.", "data.", "train."}, {"model.preset", "model.size"},
        [this](const QString& key, const QString& value) {
            engine::PretrainConfig c;
            try {
                c.model = engine::make_model_config(preset_->currentText().toStdString(),
                                                    size_->currentText().toStdString());
            } catch (const std::exception&) {
                // An unknown preset is the preset box's message.
            }
            return QString::fromStdString(
                engine::check_config_value(c, key.toStdString(), value.toStdString()));
        }));
    baseForm_->setObjectName("baseForm");
    bv->addWidget(baseForm_);
    into->addWidget(base);
    connect(baseForm_, &FieldForm::edited, this, &StudyBuilderView::scheduleRefresh);
    return settings;
}

QWidget* StudyBuilderView::buildPlanPane() {
    auto* open = new QPushButton("Open...");
    auto* fromEditor = new QPushButton("Take the editor's YAML");
    auto* save = new QPushButton("Save as...");
    measure_ = new QPushButton("Measure this machine (tupe bench)");
    open->setObjectName("openStudy");
    fromEditor->setObjectName("takeFromEditor");
    save->setObjectName("saveStudy");
    measure_->setObjectName("measureMachine");
    toEditor_->setObjectName("openInEditor");
    queue_->setObjectName("queueStudy");
    auto* buttons = new QHBoxLayout;
    for (QPushButton* b : {open, fromEditor, save, toEditor_, queue_}) buttons->addWidget(b);
    summary_->setObjectName("planSummary");
    summary_->setWordWrap(true);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    notes_->setObjectName("notes");
    notes_->setWordWrap(true);
    notes_->setStyleSheet("color: #8a5a00;");
    planTable_->setObjectName("planTable");
    planTable_->verticalHeader()->setVisible(false);
    planTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    planTable_->horizontalHeader()->setStretchLastSection(true);
    preview_->setObjectName("yamlPreview");
    preview_->setReadOnly(true);
    preview_->setFont(QFont("monospace", 8));
    auto* pane = new QWidget;
    auto* v = new QVBoxLayout(pane);
    v->setContentsMargins(0, 0, 0, 0);
    v->addWidget(fileLabel_);
    v->addLayout(buttons);
    v->addWidget(summary_);
    v->addWidget(measure_, 0, Qt::AlignLeft);
    v->addWidget(planTable_, 3);
    v->addWidget(notes_);
    v->addWidget(preview_, 2);
    connectButtons(open, fromEditor, save, measure_);
    connect(planTable_, &QTableWidget::itemChanged, this, [this](QTableWidgetItem* item) {
        if (loading_ || item->column() != 0 || full_->isChecked()) return;
        std::vector<std::vector<std::string>> cells;
        for (int r = 0; r < planTable_->rowCount(); ++r)
            if (planTable_->item(r, 0)->checkState() == Qt::Checked) {
                std::vector<std::string> cell;
                for (int c = 0; c < int(design_.factors.size()); ++c)
                    cell.push_back(planTable_->item(r, 2 + c)->text().toStdString());
                cells.push_back(cell);
            }
        design_.cells = cells;
        scheduleRefresh();
    });
    return pane;
}

void StudyBuilderView::connectButtons(QPushButton* open, QPushButton* fromEditor, QPushButton* save,
                                      QPushButton* measure) {
    connect(open, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getOpenFileName(this, "Open study", workDir_,
                                                       "YAML (*.yaml *.yml);;All files (*)");
        if (p.isEmpty()) return;
        QFile f(p);
        if (!f.open(QIODevice::ReadOnly))
            return emit errorRaised("cannot open " + p + ": " + f.errorString());
        loadText(p, QString::fromUtf8(f.readAll()));
    });
    connect(fromEditor, &QPushButton::clicked, this, &StudyBuilderView::editorTextRequested);
    connect(save, &QPushButton::clicked, this, &StudyBuilderView::saveAs);
    connect(toEditor_, &QPushButton::clicked, this, [this] { emit openInEditor(path_, yaml()); });
    connect(queue_, &QPushButton::clicked, this, &StudyBuilderView::queueStudy);
    connect(measure, &QPushButton::clicked, this, &StudyBuilderView::measureMachine);
}

FactorRow* StudyBuilderView::appendFactorRow() {
    auto* row = new FactorRow;
    factorLayout_->addWidget(row);
    rows_.push_back(row);
    connect(row, &FactorRow::edited, this, &StudyBuilderView::scheduleRefresh);
    connect(row, &FactorRow::removeRequested, this, &StudyBuilderView::removeFactorRow);
    return row;
}

void StudyBuilderView::removeFactorRow(FactorRow* row) {
    rows_.erase(std::remove(rows_.begin(), rows_.end(), row), rows_.end());
    row->hide();
    row->deleteLater();
    scheduleRefresh();
}

void StudyBuilderView::scheduleRefresh() {
    if (!loading_) refreshTimer_.start();
}

}  // namespace app
