// Offscreen figures (PNG, PDF or SVG, by the file's extension) from plain data: heatmaps (colour
// scale, token or position tick labels, a symmetric diverging range for signed maps), line plots,
// and grids of either, drawn with QCustomPlot (its colour-map demo). The structs and this header
// are plain C++ with no Qt or torch, so torch code (the `tupe` CLI) can fill them and the desktop
// app can draw the same structs on screen. Matrices are row-major: values[r * cols + c], row 0
// drawn at the top.
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <vector>

class QApplication;

namespace plotting {

/// A matrix to draw as a colour map. Row r, column c is values[r * cols + c]; row 0 at the top.
struct Heatmap {
    std::string title;
    int rows = 0, cols = 0;
    std::vector<double> values;  ///< row-major, rows * cols; NaN cells are left blank (grey)
    std::vector<std::string> row_labels;  ///< empty: 0, 1, 2, ...; else exactly `rows` labels
    std::vector<std::string> col_labels;  ///< empty: 0, 1, 2, ...; else exactly `cols` labels
    /// Signed map: range [-m, m] with m = max |value|, diverging blue-white-red (0 is white).
    /// Otherwise [min, max] on a sequential (viridis) scale. See heatmap_color_range.
    bool symmetric = false;
    std::string x_label, y_label;
    std::string value_label;  ///< label of the colour scale, e.g. "logit"
    /// Fixed colour range (e.g. shared by panels that are compared); NaN = from the data.
    double range_min = std::numeric_limits<double>::quiet_NaN();
    double range_max = std::numeric_limits<double>::quiet_NaN();
};

/// The ends of a heatmap's colour scale; lo < hi.
struct ColorRange {
    double lo = 0, hi = 1;
};

/// The colour range every renderer of `map` uses (offscreen and on screen): symmetric maps
/// [-m, m] with m = max |finite value| (1 when that is 0); others [min, max] of the finite
/// values, widened by 0.5 both ways when they are equal and [0, 1] when there is none. A finite
/// range_min / range_max replaces that end; hi = lo + 1 when the ends would not be ordered.
/// The colours are plotting/palette.h's heatmap_palette(map.symmetric).
ColorRange heatmap_color_range(const Heatmap& map);

/// One curve of a LinePlot; x and y have the same length.
struct Series {
    std::string name;
    std::vector<double> x, y;
    /// Optional shaded band around the curve (e.g. the spread over seeds): empty, or the
    /// same length as x.
    std::vector<double> band_lo, band_hi;
    bool dashed = false;    ///< A reference line (a floor, a chance level): dashed, grey
    bool dotted = false;    ///< With dashed: dotted instead (a second reference line)
    bool dash_dot = false;  ///< With dashed: dash-dot instead (a third reference line)
    bool markers = false;   ///< A circle at each point (few points: one point alone shows)
    /// Points only, no line: a scatter (the points need not be in x order, e.g. a PCA path).
    bool scatter = false;
};

/// Curves on shared axes; a legend appears when there is more than one named series.
struct LinePlot {
    std::string title;
    std::string x_label, y_label;
    std::vector<Series> series;
    /// Text labels for x = 0, 1, 2, ... (e.g. tokens); empty = numeric ticks.
    std::vector<std::string> x_tick_labels;
    double y_min = std::numeric_limits<double>::quiet_NaN();  ///< NaN = from the data
    double y_max = std::numeric_limits<double>::quiet_NaN();
    /// Colour the series in order along the sequential (viridis) scale instead of distinct
    /// hues: for series that are steps of one quantity (e.g. bins of positions).
    bool sequential_colors = false;
};

/// Makes rendering possible in a process without a GUI (CLI, tests). When no Qt application
/// exists it sets QT_QPA_PLATFORM=offscreen (unless the variable is set: the user's choice
/// wins) and creates a QApplication; it destroys only what it created. Offscreen whether or not
/// DISPLAY is set: the PNGs look the same, no window ever opens, and a stale DISPLAY (ssh)
/// cannot abort the process. While it lives, Qt's XDG_RUNTIME_DIR notice stays off stderr.
/// Create one on the main thread before any save_* call and keep it alive while drawing.
class OffscreenSession {
  public:
    OffscreenSession();
    ~OffscreenSession();
    OffscreenSession(const OffscreenSession&) = delete;
    OffscreenSession& operator=(const OffscreenSession&) = delete;

  private:
    std::unique_ptr<QApplication> app_;
    bool installed_handler_ = false;
};

// The file's extension picks the format, in any case: ".svg" an SVG (QSvgGenerator), ".pdf" a
// PDF, anything else a PNG. SVG and PDF keep axes, curves and text as vectors (a colour map is
// an embedded image) and are laid out as the PNG of the same pixel size.

/// Renders `map` at width x height pixels to `path`. Throws std::invalid_argument for
/// inconsistent sizes (values, labels), std::logic_error without a QApplication (see
/// OffscreenSession), std::runtime_error naming the path when the file cannot be written.
void save_heatmap(const Heatmap& map, const std::string& path, int width = 640, int height = 560);

/// Renders `maps` as a grid with `columns` panels per row, each cell_width x cell_height
/// pixels, under an optional overall title (one or more lines, 22 pixels each plus 16). Each panel
/// keeps its own colour scale unless its range is fixed. Errors as save_heatmap.
void save_heatmap_grid(const std::vector<Heatmap>& maps, int columns, const std::string& path,
                       int cell_width = 420, int cell_height = 380, const std::string& title = {});

/// Renders `plot` at width x height pixels to `path`. Errors as save_heatmap.
void save_line_plot(const LinePlot& plot, const std::string& path, int width = 720,
                    int height = 420);

/// Renders `plots` as a grid with `columns` panels per row. Errors as save_heatmap.
void save_line_plot_grid(const std::vector<LinePlot>& plots, int columns, const std::string& path,
                         int cell_width = 520, int cell_height = 340,
                         const std::string& title = {});

// The earlier names, kept for their callers (the CLI): the same functions, so a path ending in
// .svg or .pdf writes that format there too.
inline void save_heatmap_png(const Heatmap& map, const std::string& path, int width = 640,
                             int height = 560) {
    save_heatmap(map, path, width, height);
}
inline void save_heatmap_grid_png(const std::vector<Heatmap>& maps, int columns,
                                  const std::string& path, int cell_width = 420,
                                  int cell_height = 380, const std::string& title = {}) {
    save_heatmap_grid(maps, columns, path, cell_width, cell_height, title);
}
inline void save_line_plot_png(const LinePlot& plot, const std::string& path, int width = 720,
                               int height = 420) {
    save_line_plot(plot, path, width, height);
}
inline void save_line_plot_grid_png(const std::vector<LinePlot>& plots, int columns,
                                    const std::string& path, int cell_width = 520,
                                    int cell_height = 340, const std::string& title = {}) {
    save_line_plot_grid(plots, columns, path, cell_width, cell_height, title);
}

}  // namespace plotting
