// Validates experiment YAML text as `tupe run` would read it (experiments::load_experiment),
// for the launch view's inline errors: the line and column of the first mistake and a one-line
// message, or a summary of the plan (variants, fine-tuning jobs, database).
#pragma once

#include <QString>
#include <QStringList>

namespace app {

struct ExperimentCheck {
    bool ok = false;
    int line = 0, column = 0;  ///< 1-based; 0 when unknown
    QString message;           ///< the error without its location, e.g. "train.stpes: unknown key"
    QString name, database, runsDir;
    QStringList variants;
    int pretrainJobs = 0;
    int finetuneJobs = -1;  ///< -1: every available task (count known only at run time)
};

/// Checks `yamlText` as if it were the file `fileName` (its stem names an unnamed experiment).
/// Relative paths in the YAML are not opened here. Never throws.
ExperimentCheck checkExperimentYaml(const QString& yamlText, const QString& fileName);

}  // namespace app
