// Experiment YAML validation through the experiments library (see experiment_check.h).
#include "core/experiment_check.h"

#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>

#include "experiments/config_loader.h"
#include "experiments/experiment.h"
#include "experiments/plan_cost.h"

namespace app {

ExperimentCheck checkExperimentYaml(const QString& yamlText, const QString& fileName) {
    ExperimentCheck c;
    // load_experiment reads a file; the unsaved editor text goes to a private copy with the
    // same file name, so an unnamed experiment gets the same name and messages the same file.
    QTemporaryDir dir;
    const QString base = QFileInfo(fileName.isEmpty() ? "experiment.yaml" : fileName).fileName();
    const QString path = dir.path() + "/" + base;
    QFile f(path);
    if (!dir.isValid() || !f.open(QIODevice::WriteOnly)) {
        c.message = "cannot write a temporary copy to check the YAML";
        return c;
    }
    f.write(yamlText.toUtf8());
    f.close();
    try {
        const experiments::ExperimentSpec spec = experiments::load_experiment(path.toStdString());
        c.ok = true;
        c.name = QString::fromStdString(spec.name);
        c.database = QString::fromStdString(spec.database);
        c.runsDir = QString::fromStdString(spec.runs_dir);
        c.pretrainJobs = static_cast<int>(spec.variants.size());
        for (const auto& v : spec.variants) c.variants << QString::fromStdString(v.name);
        // As the runner plans them (experiments/plan_cost.h): a zero-shot task is one job per
        // snapshot, a fine-tuned one a job per lr and per fine-tuning seed of the variant.
        const auto counts = experiments::count_plan(spec);
        if (!counts.every_task) c.finetuneJobs = counts.finetune + counts.zero_shot;
    } catch (const experiments::ConfigError& e) {
        c.line = static_cast<int>(e.line());
        c.column = static_cast<int>(e.column());
        c.message =
            QString::fromStdString(e.key().empty() || e.message().find(e.key()) != std::string::npos
                                       ? e.message()
                                       : e.key() + ": " + e.message());
    } catch (const std::exception& e) {
        c.message = QString::fromStdString(e.what()).replace(path, base);
    }
    return c;
}

}  // namespace app
