#include "common/html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace holmes::html {

namespace {

// Layout rules that keep every element inside the page at any width: SVGs scale down to the
// column, long names wrap.
constexpr const char* kStyle = R"(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1240px;margin:0 auto;padding:12px 20px 40px}
h1{font-size:20px;margin:10px 0 4px}h2{font-size:16px;margin:22px 0 6px;border-bottom:1px solid #ddd}
p,li{overflow-wrap:anywhere}
svg{max-width:100%;height:auto;display:block;background:#fff}
svg.mem{display:inline-block;vertical-align:middle;margin-right:6px}
svg text{font:11px system-ui,sans-serif;fill:#333}
svg .t{font-size:13px;font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
svg .s{font-size:9px}
table{border-collapse:collapse;margin:6px 0;max-width:100%}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:middle;overflow-wrap:anywhere}
th{background:#f0f0f0}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.facts{display:flex;flex-wrap:wrap;gap:4px 18px;margin:4px 0}
.warn{color:#a33}.missing{color:#a33;font-weight:600}
.legend{display:flex;flex-wrap:wrap;gap:2px 14px;margin:4px 0;font-size:12px}
.sw{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px;border:1px solid #0003}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.charts>svg{flex:0 1 600px;max-width:100%}
)";

double finite_or(double v, double fallback) { return std::isfinite(v) ? v : fallback; }

// Tick labels: no more digits than the tick step needs.
std::string tick_label(double v, double step) {
  if (std::fabs(v) < step * 1e-9) return "0";
  const double a = std::fabs(v);
  if (a >= 1e9) return fmt::format("{:g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:g}k", v / 1e3);
  const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step))));
  return fmt::format("{:.{}f}", v, decimals);
}

std::string value_text(double v, const std::string& unit) {
  if (unit == "B") return human_bytes(v);
  return fmt::format("{:.4g} {}", v, unit);
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string page(const std::string& title, const std::string& body, int refresh_s) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  if (refresh_s > 0) out += fmt::format("<meta http-equiv=\"refresh\" content=\"{}\">\n", refresh_s);
  out += "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n";
  out += "<title>" + escape(title) + "</title>\n<style>" + kStyle + "</style></head>\n<body><main>\n";
  out += body;
  out += "</main></body></html>\n";
  return out;
}

std::string coord(double v) {
  if (!std::isfinite(v)) v = 0;
  std::string s = fmt::format("{:.1f}", v);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (b >= 1000 && u < 5) b /= 1000, ++u;
  return fmt::format("{:.1f} {}", b, units[u]);
}

std::string stage_colour(int stage, int stages) {
  // Viridis-like ramp (purple, blue, teal, green, yellow): ordered, and apart from the link
  // classes' blue, green and red by lightness.
  static constexpr double kAnchors[][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {222, 200, 30}};
  const double f = stages > 1 ? std::clamp(double(stage) / (stages - 1), 0.0, 1.0) : 0;
  const double at = f * 4;
  const int i = std::min(3, static_cast<int>(at));
  const double t = at - i;
  int rgb[3];
  for (int c = 0; c < 3; ++c) rgb[c] = static_cast<int>(std::lround(kAnchors[i][c] + t * (kAnchors[i + 1][c] - kAnchors[i][c])));
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, count);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9 && ticks.size() < 50; t += step) ticks.push_back(t);
  return ticks;
}

std::string line_chart(const LineChart& c) {
  // The legend goes beside the title when both fit on one line, else on a line of its own.
  double legend_w = 0;
  for (const Series& s : c.series) legend_w += 22 + 6.2 * static_cast<double>(s.name.size());
  const bool legend_below = 58 + 7.5 * static_cast<double>(c.title.size()) + legend_w > c.width - 14;
  const double left = 58, right = 14, top = legend_below ? 40 : 26, bottom = 40;
  const double legend_y = legend_below ? 22 : 7;
  const double pw = c.width - left - right, ph = c.height - top - bottom;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const Series& s : c.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
        y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
      }
  if (c.has_floor && std::isfinite(c.floor)) y0 = std::min(y0, c.floor), y1 = std::max(y1, c.floor);
  const bool empty = !std::isfinite(x0);
  if (empty) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (c.y_from_zero) y0 = std::min(0.0, y0);
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + std::max(1e-9, std::fabs(y0) * 0.1 + (y0 == 0 ? 1 : 0));
  const double pad = (y1 - y0) * 0.04;
  if (!c.y_from_zero || y0 < 0) y0 -= pad;
  y1 += pad;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return top + (y1 - y) / (y1 - y0) * ph; };

  std::string out = fmt::format(
      "<svg class=\"chart\" data-chart=\"{}\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n<text class=\"t\" x=\"{}\" y=\"16\">{}</text>\n",
      escape(c.id), c.width, c.height, c.width, c.height, coord(left), escape(c.title));
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#ccc\"/>\n", coord(left),
                     coord(top), coord(pw), coord(ph));
  const std::vector<double> xt = nice_ticks(x0, x1), yt = nice_ticks(y0, y1);
  const double xs = xt.size() > 1 ? xt[1] - xt[0] : 1, ys = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double t : xt)
    out += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#eee\"/><text x=\"{0}\" y=\"{3}\" "
                       "text-anchor=\"middle\">{4}</text>\n",
                       coord(px(t)), coord(top), coord(top + ph), coord(top + ph + 13), tick_label(t, xs));
  for (double t : yt)
    out += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#eee\"/><text x=\"{3}\" y=\"{4}\" "
                       "text-anchor=\"end\">{5}</text>\n",
                       coord(left), coord(left + pw), coord(py(t)), coord(left - 4), coord(py(t) + 4),
                       tick_label(t, ys));
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", coord(left + pw / 2),
                     coord(c.height - 6), escape(c.x_label));
  out += fmt::format("<text x=\"12\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 12 {0})\">{1}</text>\n",
                     coord(top + ph / 2), escape(c.y_label));
  if (empty)
    out += fmt::format("<text class=\"missing\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">no data yet</text>\n",
                       coord(left + pw / 2), coord(top + ph / 2));
  if (c.has_floor && std::isfinite(c.floor))
    out += fmt::format("<line class=\"floor\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#555\" "
                       "stroke-dasharray=\"5 4\"/><text x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
                       coord(left), coord(left + pw), coord(py(c.floor)), coord(left + pw - 4), coord(py(c.floor) - 4),
                       escape(c.floor_label));
  // Series, then their legend along the top right.
  double lx = left + pw;
  for (size_t k = c.series.size(); k-- > 0;) {
    const Series& s = c.series[k];
    std::vector<std::pair<double, double>> pts;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) pts.emplace_back(px(s.x[i]), py(s.y[i]));
    const size_t rows = pts.size();
    if (pts.size() > kMaxPoints) {
      // Per pixel column: first, lowest, highest, last: the curve's envelope is kept.
      std::vector<std::pair<double, double>> reduced;
      for (size_t i = 0; i < pts.size();) {
        size_t j = i;
        const double col = std::floor(pts[i].first);
        size_t lo = i, hi = i;
        while (j < pts.size() && std::floor(pts[j].first) == col) {
          if (pts[j].second < pts[lo].second) lo = j;
          if (pts[j].second > pts[hi].second) hi = j;
          ++j;
        }
        reduced.push_back(pts[i]);
        for (size_t m : {std::min(lo, hi), std::max(lo, hi)})
          if (m != i && m != j - 1) reduced.push_back(pts[m]);
        if (j - 1 != i) reduced.push_back(pts[j - 1]);
        i = j;
      }
      pts = std::move(reduced);
    }
    std::string points;
    points.reserve(pts.size() * 12);
    for (const auto& [x, y] : pts) points += coord(x) + "," + coord(y) + " ";
    if (!points.empty()) points.pop_back();
    out += fmt::format("<polyline class=\"curve\" data-series=\"{}\" data-points=\"{}\" data-rows=\"{}\" fill=\"none\" "
                       "stroke=\"{}\" stroke-width=\"1.6\"{} points=\"{}\"><title>{}</title></polyline>\n",
                       escape(s.name), pts.size(), rows, escape(s.colour),
                       s.dashed ? " stroke-dasharray=\"4 3\"" : "", points, escape(s.name));
    if (pts.size() == 1)  // a single point draws no line: a dot shows it
      out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"/>\n", coord(pts[0].first),
                         coord(pts[0].second), escape(s.colour));
    const double w = 22 + 6.2 * static_cast<double>(s.name.size());
    lx -= w;
    if (lx < 2) continue;  // more series than the legend holds: the curves' own titles name them
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
                       coord(lx), coord(legend_y), escape(s.colour), coord(lx + 13), coord(legend_y + 9), escape(s.name));
  }
  out += "</svg>\n";
  return out;
}

std::string stacked_bars(const std::string& id, const std::vector<BarRow>& rows, const std::string& unit, int width,
                         double marker, const std::string& marker_label) {
  // Room for the longest note after a full-length bar (about 6.2 px per character at 11 px).
  size_t note_chars = 0, label_chars = 0;
  for (const BarRow& r : rows) note_chars = std::max(note_chars, r.note.size()), label_chars = std::max(label_chars, r.label.size());
  const double label_w = std::clamp(6.4 * double(label_chars) + 12, 60.0, 220.0);
  const double note_w = std::clamp(6.4 * double(note_chars) + 12, 40.0, width / 2.0), row_h = 22, top = marker > 0 ? 18 : 6;
  const double bar_w = width - label_w - note_w;
  double scale = marker > 0 ? marker : 0;
  for (const BarRow& r : rows) {
    double total = 0;
    for (const Segment& s : r.segments) total += std::max(0.0, finite_or(s.value, 0));
    scale = std::max(scale, total);
  }
  if (scale <= 0) scale = 1;
  const double height = top + row_h * static_cast<double>(rows.size()) + 6;
  std::string out = fmt::format("<svg class=\"bars\" data-chart=\"{}\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
                                "xmlns=\"http://www.w3.org/2000/svg\">\n",
                                escape(id), width, coord(height), width, coord(height));
  for (size_t i = 0; i < rows.size(); ++i) {
    const BarRow& r = rows[i];
    const double y = top + row_h * static_cast<double>(i);
    out += fmt::format("<g class=\"bar-row\" data-label=\"{}\"><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                       escape(r.label), coord(label_w - 6), coord(y + 14), escape(r.label));
    double x = label_w;
    for (const Segment& s : r.segments) {
      const double v = std::max(0.0, finite_or(s.value, 0));
      const double w = v / scale * bar_w;
      if (w > 0)
        out += fmt::format("<rect class=\"seg\" data-name=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"16\" "
                           "fill=\"{}\"><title>{}: {}</title></rect>\n",
                           escape(s.name), coord(x), coord(y + 2), coord(w), escape(s.colour), escape(s.name),
                           escape(value_text(v, unit)));
      x += w;
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text></g>\n", coord(x + 5), coord(y + 14), escape(r.note));
  }
  if (marker > 0) {
    const double mx = label_w + marker / scale * bar_w;
    out += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"12\" y2=\"{1}\" stroke=\"#000\" stroke-dasharray=\"3 2\"/>"
                       "<text x=\"{0}\" y=\"10\" text-anchor=\"middle\">{2}</text>\n",
                       coord(mx), coord(height - 4), escape(marker_label));
  }
  out += "</svg>\n";
  return out;
}

std::string legend(const std::vector<std::pair<std::string, std::string>>& name_colour) {
  std::string out = "<div class=\"legend\">";
  for (const auto& [name, colour] : name_colour)
    out += fmt::format("<span><i class=\"sw\" style=\"background:{}\"></i>{}</span>", escape(colour), escape(name));
  return out + "</div>\n";
}

}  // namespace holmes::html
