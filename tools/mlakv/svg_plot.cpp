// SPDX-License-Identifier: Apache-2.0
#include "svg_plot.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace mlakv::tool {
namespace {

constexpr double kWidth = 760, kHeight = 500;
constexpr double kLeft = 90, kRight = 30, kTop = 70, kBottom = 70;
constexpr double kCharWidth = 7.0;   // a generous average for 12 px sans-serif
constexpr double kLabelHeight = 14;  // ascent 11 + descent 3

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

// A 1-2-5 step (1, 2, 5, 10, 20, ...) giving at most about `n` ticks over [0, top].
double tick_step(double top, int n) {
  const double raw = top / n;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10.0 * magnitude;
}

struct Box {
  double x0, y0, x1, y1;
  bool intersects(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  bool inside(const Box& o) const { return x0 >= o.x0 && x1 <= o.x1 && y0 >= o.y0 && y1 <= o.y1; }
};

// A label's box for text anchored at (x, y) (baseline), `start` or `end`.
Box label_box(double x, double y, double width, bool start) {
  return start ? Box{x, y - 11, x + width, y + 3} : Box{x - width, y - 11, x, y + 3};
}

struct Placement {
  double x, y;
  bool start;
  bool leader;  // moved away from its mark: drawn with a line back to it
  Box box;
};

double distance(const Box& b, double x, double y) {
  return std::hypot(std::max({b.x0 - x, 0.0, x - b.x1}), std::max({b.y0 - y, 0.0, y - b.y1}));
}

struct Mark {
  double x, y;
};

// The first candidate position, nearest first, whose box stays in `frame`,
// meets no obstacle and, unless a leader line ties it to its mark, is nearer
// its own mark than any other (so "bf16" never sits by the fp16 dot); the last
// resort is the first candidate.
Placement place_label(double cx, double cy, double width, const Box& frame, const std::vector<Box>& obstacles,
                      const std::vector<Mark>& marks) {
  std::vector<Placement> candidates;
  const auto add = [&](double x, double y, bool start, bool leader) {
    candidates.push_back({x, y, start, leader, label_box(x, y, width, start)});
  };
  add(cx + 9, cy + 4, true, false);
  add(cx - 9, cy + 4, false, false);
  add(cx + 6, cy - 9, true, false);
  add(cx - 6, cy - 9, false, false);
  add(cx + 6, cy + 18, true, false);
  add(cx - 6, cy + 18, false, false);
  for (int k = 1; k <= 12; ++k) {
    for (const double dy : {-16.0 * k - 6, 16.0 * k + 14}) {
      for (const double dx : {12.0 + 4 * k, -12.0 - 4 * k}) add(cx + dx, cy + dy, dx > 0, true);
    }
  }
  const auto unambiguous = [&](const Placement& c) {
    const double own = distance(c.box, cx, cy);
    return std::all_of(marks.begin(), marks.end(), [&](const Mark& m) {
      return (m.x == cx && m.y == cy) || distance(c.box, m.x, m.y) > own + 2.0;
    });
  };
  for (const Placement& c : candidates) {
    if (!c.box.inside(frame)) continue;
    if (!c.leader && !unambiguous(c)) continue;
    if (std::none_of(obstacles.begin(), obstacles.end(), [&](const Box& o) { return o.intersects(c.box); })) return c;
  }
  return candidates.front();
}

}  // namespace

std::string render_svg(const std::string& title, const std::vector<PlotPoint>& points, double threshold_percent) {
  double x_top = 1.0, y_top = 1e-6;  // KiB, %
  for (const PlotPoint& p : points) {
    x_top = std::max(x_top, p.bytes_per_token / 1024.0);
    y_top = std::max(y_top, p.error * 100.0);
  }
  if (threshold_percent >= 0.0) y_top = std::max(y_top, threshold_percent);
  const double x_step = tick_step(x_top * 1.05, 7), y_step = tick_step(y_top * 1.15, 6);
  x_top = std::ceil(x_top * 1.05 / x_step) * x_step;
  y_top = std::ceil(y_top * 1.15 / y_step) * y_step;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const auto px = [&](double kib) { return kLeft + plot_w * kib / x_top; };
  const auto py = [&](double percent) { return kTop + plot_h * (1.0 - percent / y_top); };
  const Box frame{kLeft, kTop, kLeft + plot_w, kTop + plot_h};

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"26\" font-size=\"15\" text-anchor=\"middle\">{3}</text>\n",
      kWidth, kHeight, kWidth / 2, escape(title));
  // Legend, above the frame where no mark can be.
  const double ly = 50;
  svg += fmt::format(
      "<g class=\"legend\">"
      "<circle cx=\"{0}\" cy=\"{1}\" r=\"7\" fill=\"#d62728\"/><text x=\"{2}\" y=\"{3}\">recommended format</text>"
      "<circle cx=\"{4}\" cy=\"{1}\" r=\"5\" fill=\"#1f77b4\"/><text x=\"{5}\" y=\"{3}\">other formats</text>",
      kLeft + 8, ly, kLeft + 20, ly + 4, kLeft + 170, kLeft + 180);
  if (threshold_percent >= 0.0) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#d62728\" stroke-dasharray=\"6 4\"/>"
        "<text x=\"{3}\" y=\"{4}\">error limit (--max-attention-error)</text>",
        kLeft + 290, ly, kLeft + 320, kLeft + 328, ly + 4);
  }
  svg += "</g>\n";
  // Grid, ticks and axis titles.
  for (int i = 0; i * x_step <= x_top + 1e-9; ++i) {
    const double x = i * x_step;
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e4e4e4\"/>"
        "<text class=\"x-tick\" x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        px(x), kTop, kTop + plot_h, kTop + plot_h + 18, x);
  }
  for (int i = 0; i * y_step <= y_top + 1e-12; ++i) {
    const double y = i * y_step;
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e4e4e4\"/>"
        "<text class=\"y-tick\" x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
        kLeft, py(y), kLeft + plot_w, kLeft - 8, py(y) + 4, y);
  }
  svg += fmt::format(
      "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" fill=\"none\" stroke=\"#444\"/>\n"
      "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">KV cache per token, all layers (KiB)</text>\n"
      "<text transform=\"translate(24 {6}) rotate(-90)\" text-anchor=\"middle\">"
      "sparse attention output error (relative RMS, %)</text>\n",
      kLeft, kTop, plot_w, plot_h, kLeft + plot_w / 2, kHeight - 22, kTop + plot_h / 2);

  // Obstacles for the labels: every mark, and the threshold line with its label.
  std::vector<Box> obstacles;
  std::vector<Mark> marks;
  for (const PlotPoint& p : points) {
    const double x = px(p.bytes_per_token / 1024.0), y = py(p.error * 100.0), r = (p.recommended ? 7 : 5) + 1;
    obstacles.push_back({x - r, y - r, x + r, y + r});
    marks.push_back({x, y});
  }
  if (threshold_percent >= 0.0) {
    const double y = py(threshold_percent);
    const std::string text = fmt::format("limit {:g}%", threshold_percent);
    const Box box = label_box(kLeft + plot_w - 4, y - 4, kCharWidth * static_cast<double>(text.size()), false);
    svg += fmt::format(
        "<line class=\"threshold\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#d62728\" "
        "stroke-dasharray=\"6 4\"/><text class=\"threshold-label\" x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\" "
        "fill=\"#d62728\" data-box=\"{5:.1f} {6:.1f} {7:.1f} {8:.1f}\">{9}</text>\n",
        kLeft, y, kLeft + plot_w, kLeft + plot_w - 4, y - 4, box.x0, box.y0, box.x1, box.y1, escape(text));
    obstacles.push_back(box);
    obstacles.push_back({kLeft, y - 1, kLeft + plot_w, y + 1});
  }
  // Marks first, then each label where it collides with nothing placed so far.
  for (const PlotPoint& p : points) {
    svg += fmt::format(
        "<circle class=\"mark\" data-format=\"{0}\" cx=\"{1:.1f}\" cy=\"{2:.1f}\" r=\"{3}\" fill=\"{4}\"/>\n",
        escape(p.label), px(p.bytes_per_token / 1024.0), py(p.error * 100.0), p.recommended ? 7 : 5,
        p.recommended ? "#d62728" : "#1f77b4");
  }
  for (const PlotPoint& p : points) {
    const double x = px(p.bytes_per_token / 1024.0), y = py(p.error * 100.0);
    const double width = kCharWidth * static_cast<double>(p.label.size());
    const Placement at = place_label(x, y, width, frame, obstacles, marks);
    obstacles.push_back(at.box);
    if (at.leader) {
      const double lx = at.start ? at.box.x0 - 2 : at.box.x1 + 2;
      const double ly_end = std::clamp(y, at.box.y0, at.box.y1);
      svg += fmt::format(
          "<line class=\"leader\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#888\"/>", x, y, lx,
          ly_end == y ? (at.box.y0 + at.box.y1) / 2 : ly_end);
    }
    svg += fmt::format(
        "<text class=\"label\" data-format=\"{0}\" x=\"{1:.1f}\" y=\"{2:.1f}\" text-anchor=\"{3}\" "
        "data-box=\"{4:.1f} {5:.1f} {6:.1f} {7:.1f}\"{8}>{0}</text>\n",
        escape(p.label), at.x, at.y, at.start ? "start" : "end", at.box.x0, at.box.y0, at.box.x1, at.box.y1,
        p.recommended ? " font-weight=\"bold\"" : "");
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace mlakv::tool
