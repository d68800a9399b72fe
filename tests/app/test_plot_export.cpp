// File > Export plot: one plot as BASE.png + BASE.pdf; the two sides of a side-by-side view as
// BASE-left and BASE-right (the left one alone used to be saved).
#include <gtest/gtest.h>

#include <QFileInfo>

#include "app_test_util.h"
#include "views/plot_util.h"

namespace {

QCustomPlot* plotWithData(double slope) {
    auto* p = new QCustomPlot;
    p->resize(320, 200);
    p->addGraph();
    for (int x = 0; x < 10; ++x) p->graph(0)->addData(x, slope * x);
    p->rescaleAxes();
    return p;
}

bool nonEmpty(const std::string& path) {
    const QFileInfo f(QString::fromStdString(path));
    return f.exists() && f.size() > 0;
}

}  // namespace

TEST(PlotExport, OnePlotKeepsTheChosenName) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    std::unique_ptr<QCustomPlot> p(plotWithData(1));
    QStringList written;
    EXPECT_EQ(app::exportPlots({p.get()}, QString::fromStdString(dir.file("curves.png")), &written),
              "");
    EXPECT_TRUE(nonEmpty(dir.file("curves.png")));
    EXPECT_TRUE(nonEmpty(dir.file("curves.pdf")));
    ASSERT_EQ(written.size(), 1);
}

TEST(PlotExport, SideBySideWritesBothSides) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    std::unique_ptr<QCustomPlot> left(plotWithData(1)), right(plotWithData(-1));
    QStringList written;
    EXPECT_EQ(app::exportPlots({left.get(), right.get()},
                               QString::fromStdString(dir.file("maps.png")), &written),
              "");
    for (const char* name : {"maps-left.png", "maps-left.pdf", "maps-right.png", "maps-right.pdf"})
        EXPECT_TRUE(nonEmpty(dir.file(name))) << name;
    EXPECT_FALSE(QFileInfo::exists(QString::fromStdString(dir.file("maps.png"))));
    EXPECT_EQ(written.size(), 2);
    EXPECT_NE(QFileInfo(written[0]).size(), 0);
}

TEST(PlotExport, NoPlotIsAnError) {
    app_test::ensureApplication();
    EXPECT_FALSE(app::exportPlots({}, "/tmp/x.png").isEmpty());
}
