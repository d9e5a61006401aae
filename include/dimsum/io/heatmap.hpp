#pragma once
/// \file
/// `heatmap_svg(pattern, row_labels, col_labels, title)`: an attention
/// pattern (two named dims: rows, then columns) as a standalone SVG heatmap
/// with labelled axes and the value in each cell; `save_heatmap_svg` writes
/// it to a file. No dependencies beyond the standard library.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <dimsum/core/errors.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

namespace detail {
inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}
inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
}  // namespace detail

/// The SVG of a rank-2 expression: one cell per (row, column), shaded from
/// white (the minimum) to dark blue (the maximum; NaN cells are grey), rows
/// labelled on the left, columns on top. The label counts must match the
/// extents (`shape_error` otherwise).
template <named_expression E>
std::string heatmap_svg(const E& pattern, const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& col_labels, const std::string& title = "") {
  static_assert(dims_of_t<E>::size == 2, "dimsum: heatmap_svg needs a tensor with two dims (rows, columns)");
  auto t = eval(pattern);
  const auto ext = t.extents();
  const std::size_t rows = ext[0], cols = ext[1];
  using L = dims_of_t<E>;
  if (row_labels.size() != rows || col_labels.size() != cols)
    throw shape_error("heatmap_svg: " + std::to_string(row_labels.size()) + " row labels for dim '" +
                      std::string(L::names[0]) + "' of extent " + std::to_string(rows) + " and " +
                      std::to_string(col_labels.size()) + " column labels for dim '" + std::string(L::names[1]) +
                      "' of extent " + std::to_string(cols));
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const double v = double(t.data()[i]);
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (!(hi > lo)) hi = lo + 1;
  std::size_t longest = 1;
  for (const auto& l : row_labels) longest = std::max(longest, l.size());
  for (const auto& l : col_labels) longest = std::max(longest, l.size());
  const double cell = 48, margin = 16 + 7.5 * double(longest), top = margin + (title.empty() ? 0 : 24);
  const double width = margin + cell * double(cols) + 16, height = top + cell * double(rows) + 32;
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + detail::fmt("%.0f", width) + "\" height=\"" +
       detail::fmt("%.0f", height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  if (!title.empty())
    s += "  <text x=\"" + detail::fmt("%.1f", width / 2) + "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" +
         detail::xml_escape(title) + "</text>\n";
  s += "  <text x=\"8\" y=\"" + detail::fmt("%.1f", height - 8) + "\" fill=\"#555\">" +
       detail::xml_escape("rows: " + std::string(L::names[0]) + ", columns: " + std::string(L::names[1])) +
       "</text>\n";
  for (std::size_t j = 0; j < cols; ++j) {
    const double x = margin + cell * (double(j) + 0.5);
    s += "  <text class=\"col-label\" transform=\"translate(" + detail::fmt("%.1f", x) + "," +
         detail::fmt("%.1f", top - 6) + ") rotate(-60)\">" + detail::xml_escape(col_labels[j]) + "</text>\n";
  }
  for (std::size_t i = 0; i < rows; ++i) {
    const double y = top + cell * (double(i) + 0.5);
    s += "  <text class=\"row-label\" x=\"" + detail::fmt("%.1f", margin - 6) + "\" y=\"" + detail::fmt("%.1f", y + 4) +
         "\" text-anchor=\"end\">" + detail::xml_escape(row_labels[i]) + "</text>\n";
    for (std::size_t j = 0; j < cols; ++j) {
      const double v = double(t.data()[i * cols + j]);
      std::string fill = "#bbbbbb";
      if (std::isfinite(v)) {
        const double a = (v - lo) / (hi - lo);
        const int r = int(std::lround(255 - a * (255 - 8))), g = int(std::lround(255 - a * (255 - 48))),
                  b = int(std::lround(255 - a * (255 - 107)));
        char buf[16];
        std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
        fill = buf;
      }
      const double x = margin + cell * double(j), yy = top + cell * double(i);
      s += "  <rect class=\"cell\" x=\"" + detail::fmt("%.1f", x) + "\" y=\"" + detail::fmt("%.1f", yy) +
           "\" width=\"" + detail::fmt("%.0f", cell) + "\" height=\"" + detail::fmt("%.0f", cell) + "\" fill=\"" + fill +
           "\"><title>" + detail::xml_escape(row_labels[i] + " -> " + col_labels[j]) + ": " +
           detail::fmt("%.4f", v) + "</title></rect>\n";
      const bool dark = std::isfinite(v) && (v - lo) / (hi - lo) > 0.55;
      s += "  <text x=\"" + detail::fmt("%.1f", x + cell / 2) + "\" y=\"" + detail::fmt("%.1f", yy + cell / 2 + 4) +
           "\" text-anchor=\"middle\" font-size=\"10\" fill=\"" + (dark ? "#ffffff" : "#222222") + "\">" +
           detail::fmt("%.2f", v) + "</text>\n";
    }
  }
  s += "</svg>\n";
  return s;
}

/// Writes heatmap_svg(...) to `path`; a file that cannot be written throws
/// `dimsum::error`.
template <named_expression E>
void save_heatmap_svg(const std::string& path, const E& pattern, const std::vector<std::string>& row_labels,
                      const std::vector<std::string>& col_labels, const std::string& title = "") {
  const std::string svg = heatmap_svg(pattern, row_labels, col_labels, title);
  std::ofstream out(path, std::ios::binary);
  out << svg;
  if (!out) throw error("heatmap: cannot write '" + path + "'");
}

}  // namespace dimsum
