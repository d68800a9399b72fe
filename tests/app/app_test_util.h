// Shared by the app tests: a Qt application on the offscreen platform (QProcess signals and
// widgets need one) and a temporary directory per test (the shared support library's TempDir).
#pragma once

#include <QApplication>
#include <QElapsedTimer>
#include <QThread>
#include <functional>

#include "support/test_support.h"

namespace app_test {

/// Creates the QApplication once (offscreen unless QT_QPA_PLATFORM says otherwise).
inline void ensureApplication() {
    if (QCoreApplication::instance()) return;
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    static int argc = 1;
    static char name[] = "test_app";
    static char* argv[] = {name, nullptr};
    new QApplication(argc, argv);  // lives for the whole test run
}

/// A fresh directory tupe_app_<pid>_<test name>, removed by the destructor.
struct TempDir : test_support::TempDir {
    TempDir() : test_support::TempDir(test_support::per_test_name("tupe_app")) {}
};

/// Runs the event loop until `done` holds or `ms` milliseconds have passed; `done`'s last answer.
inline bool processEventsUntil(const std::function<bool()>& done, int ms) {
    QElapsedTimer t;
    t.start();
    while (!done() && t.elapsed() < ms) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
        QThread::msleep(5);
    }
    return done();
}

}  // namespace app_test
