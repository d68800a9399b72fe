// File > Export plot: one plot as BASE.png + BASE.pdf + BASE.svg; the two sides of a
// side-by-side view as BASE-left and BASE-right (the left one alone used to be saved). The CSV
// of a plot quotes labels and names as RFC 4180 asks.
#include <gtest/gtest.h>

#include <QFile>
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

QByteArray readAll(const std::string& path) {
    QFile f(QString::fromStdString(path));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

/// One CSV line split into fields, RFC 4180 (quoted fields unescaped).
QStringList csvFields(const QString& line) {
    QStringList out{QString()};
    bool quoted = false;
    for (int i = 0; i < line.size(); ++i) {
        const QChar ch = line[i];
        if (quoted && ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
            out.back() += '"';
            ++i;
        } else if (ch == '"') {
            quoted = !quoted;
        } else if (ch == ',' && !quoted) {
            out.push_back(QString());
        } else {
            out.back() += ch;
        }
    }
    return out;
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
    EXPECT_TRUE(nonEmpty(dir.file("curves.svg")));
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

TEST(PlotExport, SvgIsAnSvgDocument) {
    app_test::ensureApplication();
    app_test::TempDir dir;
    std::unique_ptr<QCustomPlot> p(plotWithData(2));
    const std::string path = dir.file("line.svg");
    ASSERT_TRUE(app::saveSvg(p.get(), QString::fromStdString(path)));
    const QByteArray svg = readAll(path);
    EXPECT_TRUE(svg.startsWith("<?xml")) << svg.left(80).toStdString();
    EXPECT_TRUE(svg.contains("<svg"));
    // exportPlot given a .svg name writes the three formats beside each other.
    EXPECT_EQ(app::exportPlot(p.get(), QString::fromStdString(dir.file("again.svg"))), "");
    for (const char* name : {"again.png", "again.pdf", "again.svg"})
        EXPECT_TRUE(nonEmpty(dir.file(name))) << name;
    EXPECT_TRUE(readAll(dir.file("again.svg")).startsWith("<?xml"));
}

TEST(PlotExport, CsvQuotesCommasAndQuotes) {
    app_test::ensureApplication();
    app::HeatmapPlot heat;
    plotting::Heatmap m;
    m.rows = 2;
    m.cols = 2;
    m.values = {1, 2, 3, 4};
    m.row_labels = {",", "\"a\""};
    m.col_labels = {"\"a\"", ","};
    heat.setData(m);
    const QStringList lines = app::plotCsv(&heat).split('\n', Qt::SkipEmptyParts);
    ASSERT_EQ(lines.size(), 3) << app::plotCsv(&heat).toStdString();
    EXPECT_EQ(csvFields(lines[0]), (QStringList{"row", "\"a\"", ","}));
    EXPECT_EQ(csvFields(lines[1]), (QStringList{",", "1", "2"}));
    EXPECT_EQ(csvFields(lines[2]), (QStringList{"\"a\"", "3", "4"}));
    EXPECT_EQ(lines[0], "row,\"\"\"a\"\"\",\",\"");

    std::unique_ptr<QCustomPlot> p(plotWithData(1));
    p->graph(0)->setName("bert, \"tied\" %2");
    const QStringList rows = app::plotCsv(p.get()).split('\n', Qt::SkipEmptyParts);
    ASSERT_EQ(rows.size(), 11);
    EXPECT_EQ(rows[0], "series,x,y");
    EXPECT_EQ(csvFields(rows[3]), (QStringList{"bert, \"tied\" %2", "2", "2"}));
}
