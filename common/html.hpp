// Self-contained HTML pages with inline SVG (the plan picture, the run report): escaping of
// every string that comes from a user (host names, job names, file paths), one page frame
// with its inline style, and the charts both pages draw. No script, no network: a page opens
// on a cluster without internet. Pure: no files, no clock.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace holmes::html {

// `text` with & < > " ' replaced by entities: safe inside element text and quoted attributes.
std::string escape(std::string_view text);

// A whole page: doctype, charset, the shared style, `<title>` and `body` (already HTML).
// refresh_s > 0 adds <meta http-equiv="refresh"> (a run report opened while the run writes).
std::string page(const std::string& title, const std::string& body, int refresh_s = 0);

// A number for an SVG coordinate: one decimal, no trailing ".0" (keeps 4096-rank pages small).
std::string coord(double v);

// "1.2 GB" (decimal units, as the plan's text prints bytes).
std::string human_bytes(double bytes);

// The colour of pipeline stage `stage` of `stages`: a hue ramp from blue (first) to red (last).
std::string stage_colour(int stage, int stages);

// Up to ~`count` round tick values covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int count = 5);

struct Series {
  std::string name{};    // legend text (escaped when drawn)
  std::string colour{};  // CSS colour
  std::vector<double> x{}, y{};  // same length; non-finite y values are left out
  bool dashed = false;
};

// A line chart. Every series is one <polyline class="curve" data-series=NAME data-points=N>
// with one point per finite (x, y) when it has at most kMaxPoints of them, else the points
// reduced to each pixel column's first, lowest, highest and last (data-points is then the
// number of points drawn and data-rows the number given). `floor` (finite) draws a
// horizontal dashed line labelled `floor_label`. `id` becomes data-chart.
struct LineChart {
  std::string id{}, title{}, x_label{}, y_label{};
  std::vector<Series> series{};
  double floor = 0;
  bool has_floor = false;
  std::string floor_label{};
  bool y_from_zero = false;
  int width = 560, height = 260;
};
inline constexpr size_t kMaxPoints = 4000;
std::string line_chart(const LineChart& chart);

// A horizontal stacked bar row set: one row per `BarRow`, segments drawn left to right on a
// common scale (the largest row total), each segment with a <title> naming it and its value.
struct Segment {
  std::string name{}, colour{};
  double value = 0;
};
struct BarRow {
  std::string label{};
  std::vector<Segment> segments{};
  std::string note{};  // text after the bar (e.g. "0.52 s, 1.8x slower")
};
// `unit` formats values in titles ("s", "GB"...); `id` becomes data-chart; `marker` > 0 draws
// a vertical line at that value labelled `marker_label` (usable device memory).
std::string stacked_bars(const std::string& id, const std::vector<BarRow>& rows, const std::string& unit,
                         int width = 760, double marker = 0, const std::string& marker_label = "");

// A colour legend: one swatch + escaped name per entry.
std::string legend(const std::vector<std::pair<std::string, std::string>>& name_colour);

}  // namespace holmes::html
