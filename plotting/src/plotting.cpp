// QCustomPlot rendering of the plain plotting structs into offscreen pixmaps, composed with
// QPainter into grids and saved as PNG. Follows QCustomPlot's colour-map demo (QCPColorMap +
// QCPColorScale + QCPMarginGroup); cells are drawn without interpolation, row 0 at the top.
#include "plotting/plotting.h"

#include <QApplication>
#include <QImage>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QPixmap>
#include <QSvgGenerator>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "plotting/qcp_heatmap.h"
#include "qcustomplot.h"

namespace plotting {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

void require(bool condition, const std::string& message) {
    if (!condition) throw std::invalid_argument(message);
}

void require_application() {
    if (!qobject_cast<QApplication*>(QCoreApplication::instance()))
        throw std::logic_error(
            "plotting: no QApplication; create an plotting::OffscreenSession first");
}

void check(const Heatmap& m) {
    require(m.rows > 0 && m.cols > 0, "heatmap '" + m.title + "': rows and cols must be > 0, got " +
                                          std::to_string(m.rows) + " x " + std::to_string(m.cols));
    require(m.values.size() == static_cast<size_t>(m.rows) * static_cast<size_t>(m.cols),
            "heatmap '" + m.title + "': " + std::to_string(m.values.size()) + " values for a " +
                std::to_string(m.rows) + " x " + std::to_string(m.cols) + " matrix");
    require(m.row_labels.empty() || m.row_labels.size() == static_cast<size_t>(m.rows),
            "heatmap '" + m.title + "': " + std::to_string(m.row_labels.size()) +
                " row labels for " + std::to_string(m.rows) + " rows");
    require(m.col_labels.empty() || m.col_labels.size() == static_cast<size_t>(m.cols),
            "heatmap '" + m.title + "': " + std::to_string(m.col_labels.size()) +
                " column labels for " + std::to_string(m.cols) + " columns");
}

void check(const LinePlot& p) {
    for (const Series& s : p.series) {
        require(s.x.size() == s.y.size(), "line plot '" + p.title + "', series '" + s.name +
                                              "': " + std::to_string(s.x.size()) + " x values, " +
                                              std::to_string(s.y.size()) + " y values");
        require((s.band_lo.empty() && s.band_hi.empty()) ||
                    (s.band_lo.size() == s.x.size() && s.band_hi.size() == s.x.size()),
                "line plot '" + p.title + "', series '" + s.name +
                    "': the band needs as many lo and hi values as x values");
    }
}

void check_size(int width, int height) {
    require(width >= 16 && height >= 16 && width <= 20000 && height <= 20000,
            "image size " + std::to_string(width) + " x " + std::to_string(height) +
                " outside 16..20000 pixels");
}

/// Smallest power-of-two stride (1, 2, 4, 8, ...) that keeps n labels at least min_px apart on
/// an axis of `pixels` pixels: positions then tick at 0, 8, 16, ... in every panel alike.
int label_stride(int n, int pixels, int min_px) {
    const double needed = static_cast<double>(n) * min_px / std::max(pixels, 1);
    int stride = 1;
    while (stride < needed) stride *= 2;
    return stride;
}

/// Text ticks at every stride-th index (and always 0), labels from `labels` or the index.
QSharedPointer<QCPAxisTickerText> index_ticker(int n, const std::vector<std::string>& labels,
                                               int pixels, int min_px) {
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    const int stride = label_stride(n, pixels, min_px);
    for (int i = 0; i < n; i += stride)
        ticker->addTick(i,
                        labels.empty() ? QString::number(i) : qs(labels[static_cast<size_t>(i)]));
    ticker->setSubTickCount(0);
    return ticker;
}

bool has_long_label(const std::vector<std::string>& labels) {
    return std::any_of(labels.begin(), labels.end(),
                       [](const std::string& s) { return s.size() > 3; });
}

void add_title(QCustomPlot& plot, const std::string& title, int point_size) {
    if (title.empty()) return;
    auto* text = new QCPTextElement(&plot, qs(title), QFont("sans", point_size, QFont::Bold));
    plot.plotLayout()->insertRow(0);
    plot.plotLayout()->addElement(0, 0, text);
}

/// A plot drawing `m`, laid out for width x height pixels; kept alive while it is painted.
std::unique_ptr<QCustomPlot> build_heatmap(const Heatmap& m, int width, int height) {
    check(m);
    check_size(width, height);
    auto owned = std::make_unique<QCustomPlot>();
    QCustomPlot& plot = *owned;
    plot.setNoAntialiasingOnDrag(true);
    QCPAxisRect* rect = plot.axisRect();
    QCPAxis* x = rect->axis(QCPAxis::atBottom);
    QCPAxis* y = rect->axis(QCPAxis::atLeft);

    auto* map = new QCPColorMap(x, y);
    map->setInterpolate(false);
    map->setTightBoundary(false);
    map->data()->setSize(m.cols, m.rows);
    // Cell centres at integer coordinates, one unit wide (a single row or column too).
    map->data()->setRange(qcp_cell_range(m.cols), qcp_cell_range(m.rows));
    for (int r = 0; r < m.rows; ++r)
        for (int c = 0; c < m.cols; ++c)
            map->data()->setCell(c, r, m.values[static_cast<size_t>(r) * m.cols + c]);
    const ColorRange range = heatmap_color_range(m);

    auto* scale = new QCPColorScale(&plot);
    plot.plotLayout()->addElement(0, 1, scale);
    scale->setType(QCPAxis::atRight);
    scale->setBarWidth(12);
    map->setColorScale(scale);
    scale->setGradient(heatmap_gradient(m.symmetric));
    scale->setDataRange(QCPRange(range.lo, range.hi));
    if (!m.value_label.empty()) scale->axis()->setLabel(qs(m.value_label));
    auto* group = new QCPMarginGroup(&plot);
    rect->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    scale->setMarginGroup(QCP::msBottom | QCP::msTop, group);
    add_title(plot, m.title, 10);

    // Matrix orientation: column index left to right, row 0 at the top.
    x->setRange(-0.5, m.cols - 0.5);
    y->setRange(-0.5, m.rows - 0.5);
    y->setRangeReversed(true);
    if (m.cols == 1) x->setRange(-0.5, 0.5);
    if (m.rows == 1) y->setRange(-0.5, 0.5);
    x->grid()->setVisible(false);
    y->grid()->setVisible(false);
    const QFont tick_font("sans", m.rows > 40 || m.cols > 40 ? 7 : 8);
    x->setTickLabelFont(tick_font);
    y->setTickLabelFont(tick_font);
    const bool rotate = has_long_label(m.col_labels);
    x->setTicker(index_ticker(m.cols, m.col_labels, width - 160, rotate ? 13 : 28));
    y->setTicker(index_ticker(m.rows, m.row_labels, height - 120, 13));
    if (rotate) x->setTickLabelRotation(90);
    if (!m.x_label.empty()) x->setLabel(qs(m.x_label));
    if (!m.y_label.empty()) y->setLabel(qs(m.y_label));
    return owned;
}

/// Curve colours: Tableau 10 for up to 10 series; beyond that, hues spaced evenly around the
/// colour wheel so that no two curves share a colour.
QColor series_color(size_t i, size_t n) {
    static const QColor tableau[] = {
        {31, 119, 180}, {255, 127, 14},  {44, 160, 44},   {214, 39, 40},  {148, 103, 189},
        {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
    if (n <= 10) return tableau[i];
    return QColor::fromHsvF(static_cast<double>(i) / static_cast<double>(n), 0.85,
                            i % 2 ? 0.65 : 0.9);
}

std::unique_ptr<QCustomPlot> build_line_plot(const LinePlot& p, int width, int height) {
    check(p);
    check_size(width, height);
    auto owned = std::make_unique<QCustomPlot>();
    QCustomPlot& plot = *owned;
    double lo = INFINITY, hi = -INFINITY, xlo = INFINITY, xhi = -INFINITY;
    size_t named = 0;
    size_t colored = 0;
    for (const Series& s : p.series) colored += !s.dashed;
    size_t color_index = 0;
    for (size_t i = 0; i < p.series.size(); ++i) {
        const Series& s = p.series[i];
        QColor color = s.dashed ? QColor(90, 90, 90) : series_color(color_index, colored);
        if (!s.dashed && p.sequential_colors)
            color = heatmap_gradient(false).color(
                colored > 1 ? static_cast<double>(color_index) / static_cast<double>(colored - 1)
                            : 0.0,
                QCPRange(0, 1));
        if (!s.dashed) ++color_index;
        if (!s.band_lo.empty()) {
            // The band: a filled channel between two pen-less graphs, out of the legend.
            QCPGraph* low = plot.addGraph();
            QCPGraph* high = plot.addGraph();
            low->setData(QVector<double>(s.x.begin(), s.x.end()),
                         QVector<double>(s.band_lo.begin(), s.band_lo.end()));
            high->setData(QVector<double>(s.x.begin(), s.x.end()),
                          QVector<double>(s.band_hi.begin(), s.band_hi.end()));
            low->setPen(Qt::NoPen);
            high->setPen(Qt::NoPen);
            low->setName(
                QString());  // addGraph names them "Graph N"; unnamed stay out of the legend
            high->setName(QString());
            QColor fill = color;
            fill.setAlpha(55);
            high->setBrush(QBrush(fill));
            high->setChannelFillGraph(low);
            for (size_t k = 0; k < s.x.size(); ++k)
                for (double v : {s.band_lo[k], s.band_hi[k]})
                    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
        }
        QCPGraph* g = plot.addGraph();
        g->setData(QVector<double>(s.x.begin(), s.x.end()),
                   QVector<double>(s.y.begin(), s.y.end()));
        QPen pen(color, s.dashed ? 1.2 : 1.6);
        if (s.dashed)
            pen.setStyle(s.dotted ? Qt::DotLine : s.dash_dot ? Qt::DashDotLine : Qt::DashLine);
        g->setPen(pen);
        if (s.markers) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 6));
        if (s.scatter) {
            // QCPGraph sorts its points by x; without a line that order draws nothing wrong.
            g->setLineStyle(QCPGraph::lsNone);
            g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, color, 7));
        }
        g->setName(qs(s.name));
        if (!s.name.empty()) ++named;
        for (size_t k = 0; k < s.x.size(); ++k) {
            if (std::isfinite(s.y[k])) lo = std::min(lo, s.y[k]), hi = std::max(hi, s.y[k]);
            if (std::isfinite(s.x[k])) xlo = std::min(xlo, s.x[k]), xhi = std::max(xhi, s.x[k]);
        }
    }
    if (!(lo <= hi)) lo = 0, hi = 1;
    if (!(xlo <= xhi)) xlo = 0, xhi = 1;
    const double pad = hi > lo ? 0.05 * (hi - lo) : 0.5;
    lo = std::isfinite(p.y_min) ? p.y_min : lo - pad;
    hi = std::isfinite(p.y_max) ? p.y_max : hi + pad;
    if (!(lo < hi)) hi = lo + 1;
    if (xlo == xhi) xlo -= 0.5, xhi += 0.5;
    // Points drawn as discs would be cut at the edge: a scatter gets the y axis' margin in x.
    if (std::any_of(p.series.begin(), p.series.end(), [](const Series& s) { return s.scatter; })) {
        const double xpad = 0.05 * (xhi - xlo);
        xlo -= xpad, xhi += xpad;
    }
    plot.xAxis->setRange(xlo, xhi);
    plot.yAxis->setRange(lo, hi);
    if (!p.x_tick_labels.empty()) {
        const int n = static_cast<int>(p.x_tick_labels.size());
        const bool rotate = has_long_label(p.x_tick_labels);
        plot.xAxis->setTicker(index_ticker(n, p.x_tick_labels, width - 100, rotate ? 13 : 28));
        if (rotate) plot.xAxis->setTickLabelRotation(90);
    }
    plot.xAxis->setTickLabelFont(QFont("sans", 8));
    plot.yAxis->setTickLabelFont(QFont("sans", 8));
    if (!p.x_label.empty()) plot.xAxis->setLabel(qs(p.x_label));
    if (!p.y_label.empty()) plot.yAxis->setLabel(qs(p.y_label));
    if (named > 1) {
        // The legend goes under the plot, wrapped at 6 entries per row, so it never hides data.
        plot.legend->setVisible(true);
        plot.legend->setFont(QFont("sans", 7));
        plot.legend->setIconSize(16, 8);
        plot.legend->setRowSpacing(0);
        plot.axisRect()->insetLayout()->take(plot.legend);
        plot.plotLayout()->addElement(1, 0, plot.legend);
        plot.legend->setWrap(6);  // before setFillOrder, which rearranges with the new wrap
        plot.legend->setFillOrder(QCPLegend::foColumnsFirst);
        plot.legend->setBorderPen(Qt::NoPen);
        plot.plotLayout()->setRowStretchFactor(1, 0.001);
        for (int i = 0; i < plot.graphCount(); ++i)
            if (plot.graph(i)->name().isEmpty()) plot.graph(i)->removeFromLegend();
    }
    add_title(plot, p.title, 10);
    return owned;
}

void ensure_parent(const std::string& path) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) throw std::runtime_error(path + ": cannot create the directory: " + ec.message());
}

enum class Format { kPng, kPdf, kSvg };

/// The format a path names by its extension, in any case: .svg, .pdf; anything else PNG.
Format format_of(const std::string& path) {
    std::string ext = std::filesystem::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return ext == ".svg" ? Format::kSvg : ext == ".pdf" ? Format::kPdf : Format::kPng;
}

/// Writes `panels` as one figure, `columns` to a row, each cell_width x cell_height, under an
/// optional title (one or more lines, 22 pixels each plus 16), in the format `path` names. PNG:
/// each panel rendered to pixels. PDF and SVG: the panels painted as vectors (a colour map
/// stays an embedded image) at the PNG's resolution, so text sits where it does in the PNG.
void save_figure(const std::vector<std::unique_ptr<QCustomPlot>>& panels, int columns,
                 int cell_width, int cell_height, const std::string& title,
                 const std::string& path) {
    require(columns > 0, "grid: columns must be > 0, got " + std::to_string(columns));
    const int n = static_cast<int>(panels.size());
    const int cols = std::max(1, std::min(columns, n));
    const int rows = std::max(1, (n + cols - 1) / cols);
    const int title_lines =
        title.empty() ? 0 : 1 + static_cast<int>(std::count(title.begin(), title.end(), '\n'));
    const int title_height = title.empty() ? 0 : 16 + 22 * title_lines;
    const int width = cols * cell_width, height = rows * cell_height + title_height;
    QImage image(width, height, QImage::Format_RGB32);
    image.fill(Qt::white);
    auto paint = [&](QCPPainter& painter, bool vector) {
        if (!title.empty()) {
            painter.setFont(QFont("sans", 13, QFont::Bold));
            painter.drawText(QRect(0, 0, width, title_height), Qt::AlignCenter, qs(title));
        }
        for (int i = 0; i < n; ++i) {
            const QPoint at((i % cols) * cell_width, title_height + (i / cols) * cell_height);
            QCustomPlot& panel = *panels[static_cast<size_t>(i)];
            if (!vector) {
                painter.drawPixmap(at, panel.toPixmap(cell_width, cell_height));
                continue;
            }
            painter.save();
            painter.translate(at);
            panel.toPainter(&painter, cell_width, cell_height);
            painter.restore();
        }
    };
    ensure_parent(path);
    const Format format = format_of(path);
    if (format == Format::kPng) {
        QCPPainter painter(&image);
        paint(painter, false);
        painter.end();
        if (!image.save(qs(path), "PNG"))
            throw std::runtime_error(path + ": cannot write the PNG file");
        return;
    }
    // QCustomPlot's recipe for vector output (its savePdf): vectorized, no cosmetic pens.
    const int dpi = image.logicalDpiX();
    const char* kind = format == Format::kSvg ? "SVG" : "PDF";
    auto draw = [&](QPaintDevice* device) {
        QCPPainter painter;
        if (!painter.begin(device)) return false;
        painter.setMode(QCPPainter::pmVectorized);
        painter.setMode(QCPPainter::pmNonCosmetic);
        painter.setWindow(QRect(0, 0, width, height));
        painter.fillRect(QRect(0, 0, width, height), Qt::white);
        paint(painter, true);
        return painter.end();
    };
    bool ok = false;
    if (format == Format::kSvg) {
        QSvgGenerator svg;
        svg.setFileName(qs(path));
        svg.setSize(QSize(width, height));
        svg.setViewBox(QRect(0, 0, width, height));
        svg.setResolution(dpi);
        if (!title.empty()) svg.setTitle(qs(title));
        ok = draw(&svg);
    } else {
        QPdfWriter pdf(qs(path));
        pdf.setCreator("tupe");
        if (!title.empty()) pdf.setTitle(qs(title));
        pdf.setResolution(dpi);
        pdf.setPageSize(QPageSize(QSizeF(width * 72.0 / dpi, height * 72.0 / dpi), QPageSize::Point,
                                  QString(), QPageSize::ExactMatch));
        pdf.setPageMargins(QMarginsF(0, 0, 0, 0), QPageLayout::Point);
        ok = draw(&pdf);
    }
    std::error_code ec;
    if (!ok || !std::filesystem::exists(path, ec) || std::filesystem::file_size(path, ec) == 0)
        throw std::runtime_error(path + ": cannot write the " + kind + " file");
}

QtMessageHandler previous_handler = nullptr;

/// Drops Qt's "QStandardPaths: XDG_RUNTIME_DIR not set" notice (harmless for offscreen PNGs,
/// but noise on a CLI's stderr); everything else goes to the previous handler.
void quiet_handler(QtMsgType type, const QMessageLogContext& context, const QString& message) {
    if (type == QtWarningMsg && message.startsWith(QLatin1String("QStandardPaths:"))) return;
    if (previous_handler)
        previous_handler(type, context, message);
    else
        std::fprintf(stderr, "%s\n", qPrintable(qFormatLogMessage(type, context, message)));
}

}  // namespace

ColorRange heatmap_color_range(const Heatmap& m) {
    double lo = INFINITY, hi = -INFINITY, absmax = 0;
    for (double v : m.values)
        if (std::isfinite(v)) {
            lo = std::min(lo, v);
            hi = std::max(hi, v);
            absmax = std::max(absmax, std::abs(v));
        }
    if (m.symmetric) {
        if (absmax == 0) absmax = 1;
        lo = -absmax;
        hi = absmax;
    } else if (!(lo <= hi)) {  // no finite value
        lo = 0;
        hi = 1;
    } else if (lo == hi) {
        lo -= 0.5;
        hi += 0.5;
    }
    if (std::isfinite(m.range_min)) lo = m.range_min;
    if (std::isfinite(m.range_max)) hi = m.range_max;
    if (!(lo < hi)) hi = lo + 1;
    return {lo, hi};
}

OffscreenSession::OffscreenSession() {
    if (QCoreApplication::instance()) return;
    previous_handler = qInstallMessageHandler(quiet_handler);
    installed_handler_ = true;
    // A CLI never shows a window: render offscreen unless the user chose a platform (a stale
    // DISPLAY over ssh would otherwise abort the process inside QApplication).
    if (!std::getenv("QT_QPA_PLATFORM")) ::setenv("QT_QPA_PLATFORM", "offscreen", 0);
    static int argc = 1;
    static char name[] = "tupe";
    static char* argv[] = {name, nullptr};
    app_ = std::make_unique<QApplication>(argc, argv);
}

OffscreenSession::~OffscreenSession() {
    app_.reset();
    if (installed_handler_) qInstallMessageHandler(previous_handler);
}

void save_heatmap(const Heatmap& map, const std::string& path, int width, int height) {
    require_application();
    std::vector<std::unique_ptr<QCustomPlot>> panels;
    panels.push_back(build_heatmap(map, width, height));
    save_figure(panels, 1, width, height, {}, path);
}

void save_heatmap_grid(const std::vector<Heatmap>& maps, int columns, const std::string& path,
                       int cell_width, int cell_height, const std::string& title) {
    require_application();
    require(!maps.empty(), "heatmap grid " + path + ": no maps");
    std::vector<std::unique_ptr<QCustomPlot>> panels;
    for (const Heatmap& m : maps) panels.push_back(build_heatmap(m, cell_width, cell_height));
    save_figure(panels, columns, cell_width, cell_height, title, path);
}

void save_line_plot(const LinePlot& plot, const std::string& path, int width, int height) {
    require_application();
    std::vector<std::unique_ptr<QCustomPlot>> panels;
    panels.push_back(build_line_plot(plot, width, height));
    save_figure(panels, 1, width, height, {}, path);
}

void save_line_plot_grid(const std::vector<LinePlot>& plots, int columns, const std::string& path,
                         int cell_width, int cell_height, const std::string& title) {
    require_application();
    require(!plots.empty(), "line plot grid " + path + ": no plots");
    std::vector<std::unique_ptr<QCustomPlot>> panels;
    for (const LinePlot& p : plots) panels.push_back(build_line_plot(p, cell_width, cell_height));
    save_figure(panels, columns, cell_width, cell_height, title, path);
}

}  // namespace plotting
