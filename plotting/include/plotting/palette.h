// The colour scales of every heatmap the project draws, offscreen (plotting.cpp) and on screen
// (the desktop app's HeatmapPlot): diverging blue-white-red for signed maps (ColorBrewer RdBu,
// 0 is white) and sequential viridis otherwise (matplotlib's, at five stops), as RGB stops, plus
// the grey of NaN cells. Plain C++ with no Qt; plotting/qcp_heatmap.h turns it into QCustomPlot.
#pragma once

#include <array>

namespace plotting {

/// An 8-bit RGB colour.
struct Rgb {
    int r = 0, g = 0, b = 0;
};

/// One colour of a scale at `position` in [0, 1] (0 = the low end of the range).
struct PaletteStop {
    double position = 0;
    Rgb color;
};

/// A colour scale: stops in increasing position, colours interpolated in RGB between them.
using Palette = std::array<PaletteStop, 5>;

/// Diverging blue-white-red (ColorBrewer RdBu): 0 sits at 0.5 of a symmetric range, in white,
/// so the sign reads at a glance.
inline constexpr Palette kDivergingPalette = {{{0.00, {33, 102, 172}},
                                               {0.25, {103, 169, 207}},
                                               {0.50, {247, 247, 247}},
                                               {0.75, {239, 138, 98}},
                                               {1.00, {178, 24, 43}}}};

/// Sequential and perceptually ordered (matplotlib's viridis at five stops).
inline constexpr Palette kSequentialPalette = {{{0.00, {68, 1, 84}},
                                                {0.25, {59, 82, 139}},
                                                {0.50, {33, 145, 140}},
                                                {0.75, {94, 201, 98}},
                                                {1.00, {253, 231, 37}}}};

/// The colour of a NaN cell (left blank).
inline constexpr Rgb kNanColor = {190, 190, 190};

/// The scale of a heatmap: diverging for a signed (symmetric) map, sequential otherwise.
inline constexpr const Palette& heatmap_palette(bool symmetric) {
    return symmetric ? kDivergingPalette : kSequentialPalette;
}

}  // namespace plotting
