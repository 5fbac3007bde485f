// The run report page (report.hpp): charts from the metrics rows, measured against planned,
// the plan picture. Pure: RunFiles in, HTML out.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/format.hpp"
#include "common/html.hpp"
#include "engine/tools/report.hpp"

namespace holmes::tools {

namespace {

using html::escape;

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return NAN;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Tokens per step: the plan's global batch x sequence when there is a plan, else what the
// rows say (tokens/s x step time).
double tokens_per_step(const RunFiles& f) {
  if (f.plan) return double(f.plan->global_batch) * f.plan->seq_len;
  std::vector<double> t;
  for (const MetricRow& r : f.rows) t.push_back(r.tokens_per_s * r.step_ms / 1e3);
  return std::round(median(t));
}

std::string loss_charts(const RunFiles& f) {
  html::Series loss{"loss", "#1f77b4", {}, {}}, val{"validation loss", "#d62728", {}, {}, true};
  // A diloco run's steps between outer syncs carry one replica's loss (loss_replica), not the
  // job's: their own curve, so the job's curve joins only the steps that have the job's.
  html::Series local{"", "#aec7e8", {}, {}};
  html::Series loss_t = loss, val_t = val, local_t = local;
  const double tps = tokens_per_step(f);
  double floor = NAN;
  for (const MetricRow& r : f.rows) {
    if (std::isfinite(r.entropy_floor)) floor = r.entropy_floor;
    if (std::isfinite(r.loss)) {
      const bool own = std::isfinite(r.loss_replica);
      if (own) local.name = local_t.name = fmt::format("loss of replica {:g} alone", r.loss_replica);
      html::Series &s = own ? local : loss, &t = own ? local_t : loss_t;
      s.x.push_back(r.step), s.y.push_back(r.loss);
      t.x.push_back(r.step * tps), t.y.push_back(r.loss);
    }
    if (std::isfinite(r.val_loss)) {
      val.x.push_back(r.step), val.y.push_back(r.val_loss);
      val_t.x.push_back(r.step * tps), val_t.y.push_back(r.val_loss);
    }
  }
  html::LineChart by_step{"loss-steps", "Loss against steps", "step", "loss (nats/token)", {loss}};
  html::LineChart by_tokens{"loss-tokens", "Loss against tokens", "tokens", "loss (nats/token)", {loss_t}};
  if (!local.x.empty()) by_step.series.push_back(local), by_tokens.series.push_back(local_t);
  if (!val.x.empty()) by_step.series.push_back(val), by_tokens.series.push_back(val_t);
  // A mixture: each source's validation loss, dashed, one colour per source by name.
  static const char* const kSourceColours[] = {"#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  std::vector<html::Series> sources;
  for (const MetricRow& r : f.rows)
    for (const auto& [name, value] : r.val_sources) {
      auto it = std::find_if(sources.begin(), sources.end(),
                             [&](const html::Series& s) { return s.name == "validation loss, " + name; });
      if (it == sources.end()) {
        sources.push_back({"validation loss, " + name, kSourceColours[sources.size() % 6], {}, {}, true});
        it = sources.end() - 1;
      }
      if (std::isfinite(value)) it->x.push_back(r.step), it->y.push_back(value);
    }
  for (html::Series& s : sources) {
    by_step.series.push_back(s);
    for (double& x : s.x) x *= tps;
    by_tokens.series.push_back(s);
  }
  for (html::LineChart* c : {&by_step, &by_tokens})
    if (std::isfinite(floor)) {
      c->has_floor = true, c->floor = floor;
      c->floor_label = fmt::format("entropy floor {:.4f}", floor);
    }
  return "<div class=\"charts\">" + html::line_chart(by_step) + html::line_chart(by_tokens) + "</div>\n";
}

std::string speed_charts(const RunFiles& f) {
  html::Series tok{"tokens/s", "#2ca02c", {}, {}}, mfu{"MFU %", "#9467bd", {}, {}}, ms{"step ms", "#8c564b", {}, {}};
  for (const MetricRow& r : f.rows) {
    if (!std::isfinite(r.loss)) continue;
    tok.x.push_back(r.step), tok.y.push_back(r.tokens_per_s);
    mfu.x.push_back(r.step), mfu.y.push_back(r.mfu);
    ms.x.push_back(r.step), ms.y.push_back(r.step_ms);
  }
  html::LineChart a{"tokens-per-s", "Tokens per second (the job)", "step", "tokens/s", {tok}};
  html::LineChart b{"mfu", "Model FLOPs utilisation", "step", "MFU (%)", {mfu}};
  html::LineChart c{"step-ms", "Step time (rank 0)", "step", "ms", {ms}};
  a.y_from_zero = b.y_from_zero = c.y_from_zero = true;
  return "<div class=\"charts\">" + html::line_chart(a) + html::line_chart(b) + html::line_chart(c) + "</div>\n";
}

// Each rank's share of its steps spent waiting on communication (log rows, drawn at the step
// their figures end at: figures_step), and its average
// split of the median step into compute and waiting.
std::string comm_section(const RunFiles& f) {
  size_t ranks = 0;
  for (const MetricRow& r : f.rows) ranks = std::max(ranks, r.comm_share_ranks.size());
  html::LineChart chart{"comm-share", "Communication wait, share of each rank's steps", "step", "waiting (%)", {}};
  chart.y_from_zero = true;
  std::string note;
  if (ranks > 0) {
    for (size_t k = 0; k < ranks; ++k) {
      html::Series s{fmt::format("rank {}", k), rank_colour(f, k, ranks), {}, {}};
      for (const MetricRow& r : f.rows)
        if (k < r.comm_share_ranks.size()) s.x.push_back(r.figures_step), s.y.push_back(100 * r.comm_share_ranks[k]);
      chart.series.push_back(std::move(s));
    }
    if (ranks > 8) note = "<p>One line per rank, coloured by its pipeline stage (a line's tooltip names it).</p>\n";
  } else {
    html::Series r0{"rank 0", "#1f77b4", {}, {}}, mx{"most-waiting rank", "#d62728", {}, {}, true};
    for (const MetricRow& r : f.rows) {
      if (std::isfinite(r.comm_share)) r0.x.push_back(r.step), r0.y.push_back(100 * r.comm_share);
      if (std::isfinite(r.comm_share_max)) mx.x.push_back(r.figures_step), mx.y.push_back(100 * r.comm_share_max);
    }
    chart.series.push_back(r0);
    if (!mx.x.empty()) chart.series.push_back(mx);
    note = "<p>The metrics hold rank 0's share and the largest of any rank (per-rank figures are written for jobs of "
           "2 to 256 ranks).</p>\n";
  }
  std::string out = note + "<div class=\"charts\">" + html::line_chart(chart) + "</div>\n";
  if (ranks > 0) {
    std::vector<double> ms;
    for (const MetricRow& r : f.rows) ms.push_back(r.step_ms);
    const double step_ms = median(ms);
    std::vector<html::BarRow> bars;
    for (size_t k = 0; k < ranks; ++k) {
      std::vector<double> share;
      for (const MetricRow& r : f.rows)
        if (k < r.comm_share_ranks.size()) share.push_back(r.comm_share_ranks[k]);
      double mean = 0;
      for (double s : share) mean += std::isfinite(s) ? s / double(share.size()) : 0;
      bars.push_back({fmt::format("rank {}", k),
                      {{"compute", "#4c72b0", step_ms * (1 - mean)}, {"communication wait", "#dd8452", step_ms * mean}},
                      fmt::format("{:.0f}% waiting", 100 * mean)});
    }
    out += fmt::format("<p>Median step {:.1f} ms split by each rank's mean share over the run:</p>\n", step_ms);
    out += html::stacked_bars("rank-split", bars, "ms");
    out += html::legend({{"compute", "#4c72b0"}, {"communication wait", "#dd8452"}});
  }
  return out;
}

std::string measured_vs_planned(const RunFiles& f) {
  std::string out;
  std::vector<double> ms, tok;
  for (const MetricRow& r : f.rows)
    if (std::isfinite(r.loss)) ms.push_back(r.step_ms), tok.push_back(r.tokens_per_s);
  const double step_s = median(ms) / 1e3;
  if (f.plan && std::isfinite(step_s)) {
    const plan::Estimate& e = f.plan->estimate;
    std::vector<html::BarRow> rows = {
        {"planned", {{"planned step time", "#999999", e.step_time_s}}, fmt::format("{:.4g} s", e.step_time_s)},
        {"measured (median)", {{"measured step time", "#1f77b4", step_s}},
         fmt::format("{:.4g} s, {:.2f}x the plan's", step_s, e.step_time_s > 0 ? step_s / e.step_time_s : 0)}};
    out += html::stacked_bars("step-measured-planned", rows, "s");
  }
  if (f.calibration) {
    const topo::Calibration& c = *f.calibration;
    out += fmt::format("<p>Calibration {} ({}):</p>\n", escape(f.calibration_path), escape(c.source));
    std::vector<html::BarRow> rows;
    if (c.device_tflops > 0)
      rows.push_back({"device TFLOP/s", {{"planned (declared)", "#999999", c.declared_tflops}}, "planned"}),
          rows.push_back({"", {{"measured", "#1f77b4", c.device_tflops}},
                          fmt::format("measured {:.4g} of {:.4g}", c.device_tflops, c.declared_tflops)});
    if (!rows.empty()) out += html::stacked_bars("calibration-compute", rows, "TFLOP/s");
    rows.clear();
    for (const auto& [kind, l] : c.links) {
      if (l.gbps_per_rank <= 0 && l.declared_gbps_per_rank <= 0) continue;
      rows.push_back({kind + " planned", {{"declared Gb/s per rank", "#999999", l.declared_gbps_per_rank}},
                      fmt::format("{:.4g} Gb/s", l.declared_gbps_per_rank)});
      rows.push_back({kind + " measured", {{"measured Gb/s per rank", "#1f77b4", l.gbps_per_rank}},
                      fmt::format("{:.4g} Gb/s (x{:.2f}), {:.0f} us", l.gbps_per_rank, l.efficiency, l.latency_us)});
    }
    if (!rows.empty()) out += html::stacked_bars("calibration-links", rows, "Gb/s");
    if (!c.stages.empty()) {
      out += "<table><tr><th>stage</th><th>layers</th><th>measured TFLOP/s per device</th><th>planned</th></tr>";
      for (const topo::StageCalibration& s : c.stages)
        out += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.4g}</td><td class=\"n\">{}</td></tr>",
                           s.stage, s.layers, s.tflops,
                           f.plan && size_t(s.stage) < f.plan->stages.size()
                               ? fmt::format("{:.4g}", f.plan->stages[s.stage].tflops)
                               : "-");
      out += "</table>\n";
    }
  }
  if (out.empty()) out = "<p class=\"missing\">Nothing to compare yet: no plan or no timed step.</p>\n";
  return out;
}

}  // namespace

std::string rank_colour(const RunFiles& f, size_t rank, size_t ranks) {
  static const char* const kRankColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                             "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  // A colour per rank while the legend can name them; past 8, the rank's stage colour.
  if (ranks <= 8) return kRankColours[rank % 8];
  if (f.plan && rank < f.plan->ranks.size())
    return html::stage_colour(f.plan->ranks[rank].at[schedule::Axis::kPp], f.plan->pp);
  return html::stage_colour(static_cast<int>(rank), static_cast<int>(ranks));
}

std::string format_report_html(const RunFiles& f, int refresh_s) {
  const std::string name = f.job.empty() ? f.dir : f.job;
  std::string body = fmt::format("<h1>holmes-train run: {}</h1>\n<div class=\"facts\">", escape(name));
  auto fact = [&](const std::string& k, const std::string& v) {
    body += fmt::format("<span><b>{}</b> {}</span>", escape(k), escape(v));
  };
  fact("folder", f.dir);
  if (!f.run_id.empty()) fact("run", f.run_id);
  if (!f.started.empty()) fact("started", f.started);
  fact("status", f.live ? fmt::format("running: {}{}", f.writer,
                                      refresh_s > 0 ? fmt::format(" (this page reloads every {} s)", refresh_s) : "")
                        : "not running (finished or stopped)");
  size_t train = 0;
  const MetricRow* last = nullptr;
  for (const MetricRow& r : f.rows)
    if (std::isfinite(r.loss)) ++train, last = &r;
  fact("rows", fmt::format("{} metrics rows, {} training steps", f.rows.size(), train));
  if (last) fact("last", fmt::format("step {:.0f}, loss {:.4f}", last->step, last->loss));
  body += "</div>\n";
  if (!f.missing.empty()) {
    body += "<h2>Missing or partial</h2>\n<ul class=\"missing-list\">";
    for (const std::string& m : f.missing) body += "<li class=\"missing\">" + escape(m) + "</li>";
    body += "</ul>\n";
  }
  body += "<h2>Loss</h2>\n" + loss_charts(f);
  body += "<h2>Speed</h2>\n" + speed_charts(f);
  body += "<h2>Compute and communication per rank</h2>\n" + comm_section(f);
  body += "<h2>Stragglers</h2>\n" + straggler_section(f);
  body += "<h2>Measured against planned</h2>\n" + measured_vs_planned(f);
  body += "<h2>Plan</h2>\n";
  body += f.plan ? plan::plan_html_section(*f.plan) : "<p class=\"missing\">No plan to draw (see above).</p>\n";
  return html::page("holmes-train run " + name, body, f.live ? refresh_s : 0);
}

}  // namespace holmes::tools
