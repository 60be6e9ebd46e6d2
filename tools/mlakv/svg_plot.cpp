// SPDX-License-Identifier: Apache-2.0
#include "svg_plot.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace mlakv::tool {
namespace {

constexpr double kWidth = 760, kHeight = 480;
constexpr double kLeft = 90, kRight = 30, kTop = 50, kBottom = 70;

std::string escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// A round step giving about `n` ticks over [0, top].
double tick_step(double top, int n) {
  const double raw = top / n;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10.0 * magnitude;
}

}  // namespace

std::string render_svg(const std::string& title, const std::vector<PlotPoint>& points) {
  double x_top = 1.0, y_top = 1e-6;
  for (const PlotPoint& p : points) {
    x_top = std::max(x_top, p.bytes_per_token);
    y_top = std::max(y_top, p.error * 100.0);
  }
  const double x_step = tick_step(x_top * 1.05, 6), y_step = tick_step(y_top * 1.1, 5);
  x_top = std::ceil(x_top * 1.05 / x_step) * x_step;
  y_top = std::ceil(y_top * 1.1 / y_step) * y_step;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const auto px = [&](double x) { return kLeft + plot_w * x / x_top; };
  const auto py = [&](double y) { return kTop + plot_h * (1.0 - y / y_top); };

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"28\" font-size=\"15\" text-anchor=\"middle\">{3}</text>\n",
      kWidth, kHeight, kWidth / 2, escape(title));
  // Grid, ticks and axis titles.
  for (double x = 0; x <= x_top + 1e-9; x += x_step) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e4e4e4\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        px(x), kTop, kTop + plot_h, kTop + plot_h + 18, x / 1024.0);
  }
  for (double y = 0; y <= y_top + 1e-12; y += y_step) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e4e4e4\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
        kLeft, py(y), kLeft + plot_w, kLeft - 8, py(y) + 4, y);
  }
  svg += fmt::format(
      "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" fill=\"none\" stroke=\"#444\"/>\n"
      "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">KV cache per token, all layers (KiB)</text>\n"
      "<text transform=\"translate(24 {6}) rotate(-90)\" text-anchor=\"middle\">"
      "sparse attention output error (relative RMS, %)</text>\n",
      kLeft, kTop, plot_w, plot_h, kLeft + plot_w / 2, kHeight - 22, kTop + plot_h / 2);
  // One mark per format; labels alternate sides so neighbours stay readable.
  for (std::size_t i = 0; i < points.size(); ++i) {
    const PlotPoint& p = points[i];
    const double x = px(p.bytes_per_token), y = py(p.error * 100.0);
    svg += fmt::format(
        "<circle class=\"mark\" data-format=\"{0}\" cx=\"{1:.1f}\" cy=\"{2:.1f}\" r=\"{3}\" fill=\"{4}\"/>"
        "<text x=\"{5:.1f}\" y=\"{6:.1f}\" text-anchor=\"{7}\"{8}>{0}</text>\n",
        escape(p.label), x, y, p.recommended ? 7 : 5, p.recommended ? "#d62728" : "#1f77b4", i % 2 == 0 ? x + 9 : x - 9,
        y - 6 - 10.0 * static_cast<double>(i % 3), i % 2 == 0 ? "start" : "end",
        p.recommended ? " font-weight=\"bold\"" : "");
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace mlakv::tool
