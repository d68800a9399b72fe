// The study builder driven as a user drives it, with real keyboard and mouse events (QTest),
// offscreen: the issue's factorial TUPE ablation typed into the form comes out as the shipped
// experiments/tupe_factorial.yaml with its plan; chosen cells ticked in the plan; a value out of
// range marked at its field with the loader's message; a hand-edited file reopened with what the
// form cannot edit named and kept; the study queued in the Launch & queue view.
#include <gtest/gtest.h>

#include <QApplication>
#include <QFile>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTest>

#include "app_test_util.h"
#include "views/field_form.h"
#include "views/launch_view.h"
#include "views/main_window.h"
#include "views/study_builder_view.h"

using namespace app;

namespace {

// Picks `text` in a combo box with the keyboard, as a user does: Home, then Down until it shows.
void chooseByKeys(QComboBox* box, const QString& text) {
    box->setFocus();
    QTest::keyClick(box, Qt::Key_Home);
    for (int i = 0; i < box->count() && box->currentText() != text; ++i)
        QTest::keyClick(box, Qt::Key_Down);
    ASSERT_EQ(box->currentText(), text);
}

// Replaces a line edit's text by typing, as a user does: select all, then the keys.
void typeInto(QWidget* w, const QString& text) {
    w->setFocus();
    QTest::keyClick(w, Qt::Key_A, Qt::ControlModifier);
    QTest::keyClick(w, Qt::Key_Delete);
    QTest::keyClicks(w, text);
}

void typeField(FieldForm* form, const QString& key, const QString& text) {
    FieldEditor* e = form->editor(key);
    ASSERT_TRUE(e) << key.toStdString();
    typeInto(e->input(), text);
}

// Ticks the task `key` in the list: a click makes it current, Space ticks it.
void tickTask(QListWidget* list, const QString& key) {
    const auto items = list->findItems(key, Qt::MatchExactly);
    ASSERT_EQ(items.size(), 1);
    list->scrollToItem(items[0]);
    const QRect r = list->visualItemRect(items[0]);
    QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, r.center());
    QTest::keyClick(list->viewport(), Qt::Key_Space);
    ASSERT_EQ(items[0]->checkState(), Qt::Checked) << key.toStdString();
}

QString shippedStudy() {
    QFile f(QString(TUPE_SOURCE_DIR) + "/experiments/tupe_factorial.yaml");
    EXPECT_TRUE(f.open(QIODevice::ReadOnly));
    return QString::fromUtf8(f.readAll());
}

void addFactor(StudyBuilderView& view, const QString& key, const QString& levels) {
    QTest::mouseClick(view.addFactorButton(), Qt::LeftButton);
    FactorRow* row = view.factorRows().back();
    chooseByKeys(row->key(), key);
    if (!levels.isEmpty()) typeInto(row->levels(), levels);
}

}  // namespace

TEST(StudyBuilder, TheFactorialAblationTypedIntoTheFormIsTheShippedStudy) {
    app_test::ensureApplication();
    StudyBuilderView view;
    view.resize(1400, 900);
    view.show();
    typeInto(view.nameEdit(), "tupe_factorial");
    auto* comment = view.findChild<QPlainTextEdit*>("studyComment");
    comment->setFocus();
    QTest::keyClicks(comment,
                     "A factorial TUPE ablation: untied [CLS], one positional term for all layers "
                     "and T5's relative");
    QTest::keyClick(comment, Qt::Key_Return);
    QTest::keyClicks(comment,
                     "bias, each on and off (2 x 2 x 2), 2 seeds, at the quickstart's tiny size; "
                     "built in the study");
    QTest::keyClick(comment, Qt::Key_Return);
    QTest::keyClicks(comment,
                     "builder. `tupe factors --experiment tupe_factorial` reads it back "
                     "(docs/experiments.md).");
    chooseByKeys(view.presetBox(), "tupe-a");
    // A true/false field fills its two levels when picked; the scheme field's are typed.
    addFactor(view, "model.untie_cls", "");
    addFactor(view, "model.shared_pos_term", "");
    addFactor(view, "model.relative_position", "none, t5");
    EXPECT_EQ(view.factorRows()[0]->levels()->text(), "true, false");
    typeInto(view.seedsEdit(), "1, 2");
    for (const auto& [key, value] :
         std::vector<std::pair<QString, QString>>{{"model.hidden_size", "64"},
                                                  {"model.num_attention_heads", "4"},
                                                  {"model.intermediate_size", "256"},
                                                  {"data.corpus", "data/brown/brown.txt"},
                                                  {"data.vocab", "data/brown/vocab-8k.txt"},
                                                  {"data.max_seq_len", "64"},
                                                  {"data.validation_fraction", "0.1"},
                                                  {"train.steps", "1500"},
                                                  {"train.lr", "2e-3"},
                                                  {"train.warmup_steps", "150"},
                                                  {"train.eval_batches", "8"},
                                                  {"train.log_interval", "50"}})
        typeField(view.baseForm(), key, value);
    tickTask(view.taskList(), "syn-bshift");
    tickTask(view.taskList(), "syn-rev");
    typeField(view.studyForm(), "glue.synthetic_dev", "1000");
    QTest::mouseClick(view.analysisBox(), Qt::LeftButton, {},
                      QPoint(8, view.analysisBox()->height() / 2));
    EXPECT_TRUE(view.analysisBox()->isChecked());
    chooseByKeys(qobject_cast<QComboBox*>(view.studyForm()->editor("analysis.figures")->input()),
                 "false");
    chooseByKeys(qobject_cast<QComboBox*>(view.studyForm()->editor("analysis.ablation")->input()),
                 "zero");
    const StudyPlanInfo& plan = view.plan();
    ASSERT_TRUE(plan.ok) << plan.message.toStdString();
    EXPECT_EQ(view.yaml(), shippedStudy());
    // The plan before anything runs: 8 variants named by their levels, 2 seeds each.
    ASSERT_EQ(plan.rows.size(), 8u);
    EXPECT_EQ(plan.rows[0].variant, "untie_cls=true,shared_pos_term=true,relative_position=none");
    EXPECT_EQ(plan.rows[7].levels, (QStringList{"false", "false", "t5"}));
    EXPECT_EQ(plan.rows[7].seeds, 2);
    EXPECT_EQ(plan.pretrain, 16);
    EXPECT_EQ(plan.zeroShot, 32);
    EXPECT_EQ(plan.finetune, 0);
    EXPECT_EQ(plan.analyses, 32);  // the final snapshot's analysis and the ablation, per run
    EXPECT_EQ(view.planTable()->rowCount(), 8);
    EXPECT_EQ(view.planTable()->item(7, 1)->text(),
              "untie_cls=false,shared_pos_term=false,relative_position=t5");
    EXPECT_TRUE(view.summaryLabel()->text().contains("16 pretraining job(s)"))
        << view.summaryLabel()->text().toStdString();
    EXPECT_TRUE(view.summaryLabel()->text().contains("measure this machine"));
    // "Open in editor" hands the same text to the Launch & queue view.
    QSignalSpy toEditor(&view, &StudyBuilderView::openInEditor);
    QTest::mouseClick(view.editorButton(), Qt::LeftButton);
    ASSERT_EQ(toEditor.count(), 1);
    EXPECT_EQ(toEditor[0][1].toString(), shippedStudy());
}

TEST(StudyBuilder, TheEstimateUsesThisMachinesBenchFigures) {
    app_test::ensureApplication();
    StudyBuilderView view;
    ASSERT_TRUE(view.loadText("tupe_factorial.yaml", shippedStudy()));
    // 1 GFLOP/s for every preset: the estimate is the plan's work over 1e9.
    view.setBenchFigures(
        R"({"size": "quickstart", "seq": 64, "batch": 32, "threads": 2,
            "variants": [{"variant": "tupe-a", "achieved_flops": 1e9}]})",
        "measured 2026-12-07");
    const StudyPlanInfo& plan = view.plan();
    EXPECT_GT(plan.pretrainSeconds, 0);
    EXPECT_TRUE(view.summaryLabel()->text().contains("tupe bench --size quickstart --seq 64"))
        << view.summaryLabel()->text().toStdString();
    EXPECT_TRUE(view.summaryLabel()->text().contains("measured 2026-12-07"));
    EXPECT_EQ(benchArguments(view.design()).mid(0, 5),
              (QStringList{"bench", "--format", "json", "--size", "quickstart"}));
}

TEST(StudyBuilder, ChosenCellsAreTheOnesTickedInThePlan) {
    app_test::ensureApplication();
    StudyBuilderView view;
    view.resize(1400, 900);
    view.show();
    ASSERT_TRUE(view.loadText("tupe_factorial.yaml", shippedStudy()));
    QTest::mouseClick(view.chosenCellsButton(), Qt::LeftButton, {},
                      QPoint(8, view.chosenCellsButton()->height() / 2));
    ASSERT_TRUE(view.chosenCellsButton()->isChecked());
    view.plan();
    // Untick the last two cells: click the cell, Space toggles its tick.
    QTableWidget* t = view.planTable();
    for (int row : {7, 6}) {
        t->scrollToItem(t->item(row, 0));
        QTest::mouseClick(t->viewport(), Qt::LeftButton, {},
                          t->visualItemRect(t->item(row, 0)).center());
        QTest::keyClick(t->viewport(), Qt::Key_Space);
        view.plan();
        t = view.planTable();
    }
    const StudyPlanInfo& plan = view.plan();
    ASSERT_TRUE(plan.ok) << plan.message.toStdString();
    EXPECT_EQ(view.design().cells.size(), 6u);
    EXPECT_EQ(plan.pretrain, 12);
    EXPECT_TRUE(
        view.yaml().contains("variants:\n  - name: \"untie_cls=true,shared_pos_term=true,"
                             "relative_position=none\"\n    set: {model.untie_cls: true, "
                             "model.shared_pos_term: true, model.relative_position: none}"))
        << view.yaml().toStdString();
    EXPECT_FALSE(view.yaml().contains("untie_cls=false,shared_pos_term=false"));
}

TEST(StudyBuilder, AValueOutOfRangeIsMarkedAtItsFieldWithTheLoadersMessage) {
    app_test::ensureApplication();
    StudyBuilderView view;
    view.show();
    typeField(view.studyForm(), "jobs", "0");
    EXPECT_EQ(view.studyForm()->editor("jobs")->input()->property("error").toString(),
              "must be >= 1");
    typeField(view.baseForm(), "model.num_attention_heads", "3");
    EXPECT_TRUE(view.baseForm()
                    ->editor("model.num_attention_heads")
                    ->input()
                    ->property("error")
                    .toString()
                    .contains("must divide hidden_size"));
    // The plan says the same, with the line of the file it would write.
    EXPECT_FALSE(view.plan().ok);
    EXPECT_TRUE(view.plan().message.contains("jobs")) << view.plan().message.toStdString();
    EXPECT_FALSE(view.queueButton()->isEnabled());
    // A factor level the loader refuses is marked on the factor's row (on a base that loads).
    typeField(view.baseForm(), "model.num_attention_heads", "4");
    addFactor(view, "model.relative_position", "none, t6");
    view.plan();
    EXPECT_TRUE(view.factorRows()[0]->levels()->property("error").toString().startsWith("t6: "));
}

TEST(StudyBuilder, ReopeningAHandEditedFileKeepsWhatItCannotEditAndSaysSo) {
    app_test::ensureApplication();
    StudyBuilderView view;
    const QString edited = shippedStudy() +
                           "finetune:\n  epochs: 2\n"
                           "variants:\n  - {name: extra, preset: bert-a, seeds: [7]}\n";
    ASSERT_TRUE(view.loadText("hand.yaml", edited));
    EXPECT_EQ(view.studyForm()->editor("finetune.epochs")->text(), "2");
    EXPECT_EQ(view.factorRows().size(), 3u);
    EXPECT_FALSE(view.notesLabel()->isHidden());
    EXPECT_TRUE(view.notesLabel()->text().contains("variants: beside a grid"))
        << view.notesLabel()->text().toStdString();
    // Written back, the kept entry runs as before, beside the grid's 16 variants.
    EXPECT_TRUE(view.yaml().contains("name: extra")) << view.yaml().toStdString();
    EXPECT_TRUE(view.yaml().contains("finetune:\n  epochs: 2\n"));
    EXPECT_EQ(view.plan().pretrain, 17);
}

TEST(StudyBuilder, QueueSavesTheStudyAndPutsItInTheLaunchQueue) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    MainWindow window;
    auto* builder = window.findChild<StudyBuilderView*>();
    auto* launch = window.findChild<LaunchView*>();
    auto* tabs = window.findChild<QTabWidget*>();
    ASSERT_TRUE(builder && launch && tabs);
    ASSERT_TRUE(builder->loadText({}, shippedStudy()));
    const QString path = QString::fromStdString(dir.file("study.yaml"));
    ASSERT_TRUE(builder->saveTo(path));
    QTest::mouseClick(builder->queueButton(), Qt::LeftButton);
    EXPECT_EQ(tabs->currentWidget(), launch);
    ASSERT_EQ(launch->queueTable()->rowCount(), 1);
    EXPECT_EQ(launch->queueTable()->item(0, 0)->text(), path);
    EXPECT_EQ(launch->text(), shippedStudy());
}
