// The QCustomPlot side of a plotting::Heatmap, shared by the offscreen renderer (plotting.cpp)
// and the desktop app's HeatmapPlot: the colour scale of plotting/palette.h as a
// QCPColorGradient and the data range that puts cell i at [i - 0.5, i + 0.5]. Includes Qt and
// QCustomPlot: only for code that draws, never for torch code (that uses plotting/plotting.h).
#pragma once

#include <QColor>

#include "plotting/palette.h"
#include "qcustomplot.h"

namespace plotting {

/// The gradient of `palette`: its stops, interpolated in RGB, NaN drawn in kNanColor.
inline QCPColorGradient qcp_gradient(const Palette& palette) {
    QCPColorGradient g;
    g.clearColorStops();
    for (const PaletteStop& s : palette)
        g.setColorStopAt(s.position, QColor(s.color.r, s.color.g, s.color.b));
    g.setColorInterpolation(QCPColorGradient::ciRGB);
    g.setNanHandling(QCPColorGradient::nhNanColor);
    g.setNanColor(QColor(kNanColor.r, kNanColor.g, kNanColor.b));
    return g;
}

/// The gradient of a heatmap: diverging when `symmetric` (signed maps), else sequential.
inline QCPColorGradient heatmap_gradient(bool symmetric) {
    return qcp_gradient(heatmap_palette(symmetric));
}

/// The QCPColorMapData key (or value) range of `cells` cells such that cell i is centred at i
/// and one unit wide: (0, cells - 1), or (-0.5, 0.5) for a single cell, which QCustomPlot
/// stretches over the whole range (a zero-width range would not be drawn at all).
inline QCPRange qcp_cell_range(int cells) {
    return cells > 1 ? QCPRange(0, cells - 1) : QCPRange(-0.5, 0.5);
}

}  // namespace plotting
