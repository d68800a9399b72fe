// tupe-workbench: the desktop app over the results store. `tupe-workbench [--db FILE]` opens
// the window (on the last database, else results/tupe.sqlite); `--screenshots DIR` renders
// every main view to DIR/*.png and exits (works with QT_QPA_PLATFORM=offscreen).
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QSettings>
#include <cstdio>

#include "views/main_window.h"

int main(int argc, char** argv) {
    QApplication application(argc, argv);
    QApplication::setOrganizationName("tupe");
    QApplication::setApplicationName("tupe-workbench");
    QCommandLineParser parser;
    parser.setApplicationDescription(
        "TUPE Workbench: experiments, curves, GLUE tables and attention maps");
    parser.addHelpOption();
    parser.addOption(
        {"db", "results database (default: the last one, else results/tupe.sqlite)", "FILE"});
    parser.addOption({"screenshots", "render every view to DIR/*.png and exit", "DIR"});
    parser.process(application);

    QString db = parser.value("db");
    if (db.isEmpty()) db = QSettings().value("db/last").toString();
    if (db.isEmpty() || (!parser.isSet("db") && !QFileInfo::exists(db))) db = "results/tupe.sqlite";

    app::MainWindow window;
    const bool opened = window.openDatabase(db);
    if (parser.isSet("screenshots")) {
        const QStringList files = window.renderScreenshots(parser.value("screenshots"));
        for (const QString& f : files) std::printf("wrote %s\n", qPrintable(f));
        if (!opened) std::fprintf(stderr, "tupe-workbench: %s\n", qPrintable(window.bannerText()));
        return files.isEmpty() || !opened ? 1 : 0;
    }
    window.show();
    return application.exec();
}
