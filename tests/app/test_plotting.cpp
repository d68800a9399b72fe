// Offscreen rendering of the plotting structs (QT_QPA_PLATFORM=offscreen via OffscreenSession):
// the PNGs exist, have the requested size, show more than one colour, and bad input is refused
// before anything is drawn; a .svg or .pdf path writes that format.
#include <gtest/gtest.h>
#include <unistd.h>

#include <QColor>
#include <QImage>
#include <QString>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "plotting/plotting.h"

namespace fs = std::filesystem;
using namespace plotting;

namespace {

class PlottingTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { session_ = new OffscreenSession; }
    static void TearDownTestSuite() {
        delete session_;
        session_ = nullptr;
    }
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("tupe_plotting_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    static QImage load(const fs::path& p) { return QImage(QString::fromStdString(p.string())); }

    /// Distinct colours in the image (sampled on a grid): a blank render has one or two.
    static size_t colours(const QImage& image) {
        std::set<QRgb> seen;
        for (int y = 0; y < image.height(); y += 3)
            for (int x = 0; x < image.width(); x += 3) seen.insert(image.pixel(x, y));
        return seen.size();
    }

    static Heatmap band(int n, bool symmetric) {
        Heatmap m;
        m.title = "band";
        m.rows = m.cols = n;
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j)
                m.values.push_back(symmetric ? (j - i) / double(n) : std::exp(-std::abs(i - j)));
        return m;
    }

    static OffscreenSession* session_;
    fs::path dir_;
};

OffscreenSession* PlottingTest::session_ = nullptr;

}  // namespace

TEST_F(PlottingTest, HeatmapPngHasRequestedSizeAndStructure) {
    Heatmap m = band(16, /*symmetric=*/true);
    m.x_label = "key";
    m.y_label = "query";
    m.value_label = "logit";
    for (int i = 0; i < 16; ++i)
        m.col_labels.push_back(i == 0 ? "[CLS]" : "tok" + std::to_string(i));
    const fs::path png = dir_ / "sub" / "band.png";  // parent directories are created
    save_heatmap_png(m, png.string(), 500, 420);
    const QImage image = load(png);
    ASSERT_FALSE(image.isNull());
    EXPECT_EQ(image.width(), 500);
    EXPECT_EQ(image.height(), 420);
    EXPECT_GT(colours(image), 20u);
    // Not just any render with text: the map itself is drawn, and the right way round. (j - i)
    // is positive above the diagonal (red, to the upper right) and negative below it (blue, to
    // the lower left); the colour bar adds both colours in one column, which moves neither
    // mean sideways.
    double red_x = 0, red_y = 0, blue_x = 0, blue_y = 0;
    int reds = 0, blues = 0;
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) {
            const QColor c(image.pixel(x, y));
            if (c.red() > c.blue() + 60) red_x += x, red_y += y, ++reds;     // the red half
            if (c.blue() > c.red() + 60) blue_x += x, blue_y += y, ++blues;  // the blue half
        }
    ASSERT_GT(reds, 500);
    ASSERT_GT(blues, 500);
    EXPECT_GT(red_x / reds, blue_x / blues + 20);
    EXPECT_LT(red_y / reds, blue_y / blues - 20);
}

TEST_F(PlottingTest, DivergingScaleIsWhiteAtZeroAndColouredAtTheEnds) {
    // A 1 x 3 map [-1, 0, 1] drawn symmetric: left cell blue, middle near white, right red.
    Heatmap m;
    m.rows = 1;
    m.cols = 3;
    m.values = {-1, 0, 1};
    m.symmetric = true;
    const fs::path png = dir_ / "signs.png";
    save_heatmap_png(m, png.string(), 400, 300);
    const QImage image = load(png);
    ASSERT_FALSE(image.isNull());
    // Scan the middle row of the image for the plot's three cells.
    bool saw_blue = false, saw_red = false, saw_white_between = false;
    const int y = image.height() / 2;
    bool after_blue = false;
    for (int x = 0; x < image.width() * 3 / 4; ++x) {
        const QColor c(image.pixel(x, y));
        if (c.blue() > 150 && c.red() < 80) saw_blue = after_blue = true;
        if (after_blue && c.red() > 240 && c.green() > 240 && c.blue() > 240)
            saw_white_between = true;
        if (c.red() > 150 && c.blue() < 80 && c.green() < 80) saw_red = true;
    }
    EXPECT_TRUE(saw_blue);
    EXPECT_TRUE(saw_white_between);
    EXPECT_TRUE(saw_red);
}

TEST_F(PlottingTest, GridAndLinePlotsHaveTheirSizes) {
    std::vector<Heatmap> maps = {band(8, false), band(8, true), band(12, false)};
    maps[2].range_min = 0;  // a fixed range is accepted
    maps[2].range_max = 2;
    const fs::path grid = dir_ / "grid.png";
    save_heatmap_grid_png(maps, 2, grid.string(), 300, 250, "three maps");
    QImage image = load(grid);
    ASSERT_FALSE(image.isNull());
    EXPECT_EQ(image.width(), 600);
    EXPECT_EQ(image.height(), 2 * 250 + 38);  // two rows under a one-line title band
    EXPECT_GT(colours(image), 20u);

    LinePlot p;
    p.title = "curves";
    for (int s = 0; s < 3; ++s) {
        Series series{"head " + std::to_string(s), {}, {}};
        for (int x = 0; x < 20; ++x) {
            series.x.push_back(x);
            series.y.push_back(std::sin(x * 0.3 + s));
        }
        p.series.push_back(series);
    }
    const fs::path lines = dir_ / "lines.png";
    save_line_plot_png(p, lines.string(), 640, 360);
    image = load(lines);
    ASSERT_FALSE(image.isNull());
    EXPECT_EQ(image.width(), 640);
    EXPECT_EQ(image.height(), 360);
    EXPECT_GT(colours(image), 4u);

    const fs::path line_grid = dir_ / "line_grid.png";
    save_line_plot_grid_png({p, p, p}, 3, line_grid.string(), 320, 240);
    image = load(line_grid);
    EXPECT_EQ(image.width(), 960);
    EXPECT_EQ(image.height(), 240);
}

TEST_F(PlottingTest, InconsistentInputIsRefused) {
    Heatmap m = band(4, false);
    m.values.pop_back();
    EXPECT_THROW(save_heatmap_png(m, (dir_ / "x.png").string()), std::invalid_argument);
    m = band(4, false);
    m.row_labels = {"a", "b"};
    EXPECT_THROW(save_heatmap_png(m, (dir_ / "x.png").string()), std::invalid_argument);
    LinePlot p;
    p.series.push_back({"s", {1, 2}, {1}});
    EXPECT_THROW(save_line_plot_png(p, (dir_ / "y.png").string()), std::invalid_argument);
    EXPECT_FALSE(fs::exists(dir_ / "x.png"));
    EXPECT_THROW(save_heatmap_grid_png({}, 2, (dir_ / "z.png").string()), std::invalid_argument);
}

// The extension picks the format: .svg an SVG document, .pdf a PDF, the PNG path unchanged.
TEST_F(PlottingTest, SvgAndPdfByExtension) {
    auto head = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const fs::path map_svg = dir_ / "map.svg";
    save_heatmap(band(6, true), map_svg.string(), 400, 300);
    const std::string svg = head(map_svg);
    EXPECT_EQ(svg.rfind("<?xml", 0), 0u) << svg.substr(0, 80);
    EXPECT_NE(svg.find("<svg"), std::string::npos);

    LinePlot p;
    p.title = "curves";
    p.series.push_back({"loss", {0, 1, 2}, {3, 2, 1.5}});
    const fs::path grid_svg = dir_ / "sub" / "grid.SVG";  // any case; the folder is created
    save_line_plot_grid_png({p, p}, 2, grid_svg.string(), 320, 240, "two");
    const std::string grid = head(grid_svg);
    EXPECT_EQ(grid.rfind("<?xml", 0), 0u);
    EXPECT_NE(grid.find("<svg"), std::string::npos);
    EXPECT_NE(grid.find("curves"), std::string::npos);  // the panel title stays text

    const fs::path pdf = dir_ / "lines.pdf";
    save_line_plot(p, pdf.string());
    EXPECT_EQ(head(pdf).rfind("%PDF", 0), 0u);
}
