// tupe-workbench: the desktop app over the results store. `tupe-workbench [--db FILE]` opens
// the window (on the last database, else results/tupe.sqlite); `--screenshots DIR` renders
// every main view to DIR/*.png and exits (works with QT_QPA_PLATFORM=offscreen);
// `--model-folder DIR` opens an HF folder in the correlation maps. `--help`
// prints the usage and exits before any display is opened, so it works on a headless machine.
#include <QApplication>
#include <QCommandLineParser>
#include <QCoreApplication>
#include <QFileInfo>
#include <QSettings>
#include <cstdio>
#include <cstring>

#include "views/main_window.h"

namespace {

void describeOptions(QCommandLineParser& parser) {
    parser.setApplicationDescription(
        "TUPE Workbench: experiments, curves, GLUE tables and attention maps");
    parser.addHelpOption();
    parser.addOption(
        {"db", "results database (default: the last one, else results/tupe.sqlite)", "FILE"});
    parser.addOption({"screenshots", "render every view to DIR/*.png and exit", "DIR"});
    parser.addOption({"model-folder",
                      "open this HF model folder in the correlation maps (File > Open model "
                      "folder); with --screenshots also DIR/workbench-model-folder.png",
                      "DIR"});
}

// QApplication aborts without a display (no DISPLAY, no QT_QPA_PLATFORM): a request for help
// is answered by a QCoreApplication, which needs none.
bool asksForHelp(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        for (const char* help : {"--help", "-h", "-?", "--help-all"})
            if (std::strcmp(argv[i], help) == 0) return true;
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (asksForHelp(argc, argv)) {
        QCoreApplication core(argc, argv);
        QCoreApplication::setApplicationName("tupe-workbench");
        QCommandLineParser parser;
        describeOptions(parser);
        parser.process(core);  // prints the help and exits 0
        return 0;
    }
    QApplication application(argc, argv);
    QApplication::setOrganizationName("tupe");
    QApplication::setApplicationName("tupe-workbench");
    QCommandLineParser parser;
    describeOptions(parser);
    parser.process(application);

    QString db = parser.value("db");
    if (db.isEmpty()) db = QSettings().value("db/last").toString();
    if (db.isEmpty() || (!parser.isSet("db") && !QFileInfo::exists(db))) db = "results/tupe.sqlite";

    app::MainWindow window;
    const bool opened = window.openDatabase(db);
    if (parser.isSet("screenshots")) {
        const QStringList files = window.renderScreenshots(parser.value("screenshots"), 240000,
                                                           parser.value("model-folder"));
        for (const QString& f : files) std::printf("wrote %s\n", qPrintable(f));
        if (!opened) std::fprintf(stderr, "tupe-workbench: %s\n", qPrintable(window.bannerText()));
        return files.isEmpty() || !opened ? 1 : 0;
    }
    if (parser.isSet("model-folder")) window.openModelFolder(parser.value("model-folder"));
    window.show();
    return application.exec();
}
