// `holmes-train report RUN_DIR [--out FILE]`: the run's page (engine/tools/report.hpp).
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "cmd/commands.hpp"
#include "cmd/option_values.hpp"
#include "common/errors.hpp"
#include "engine/tools/report.hpp"

namespace holmes::cmd {

namespace {

struct ReportOptions {
  std::string run_dir, out, metrics = "metrics.jsonl";
  int refresh = 30;
};

// Written under a temporary name and renamed: a browser reloading the page never reads half.
void write_page(const std::string& path, const std::string& page) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
    out << page;
    if (!out) throw UserError(fmt::format("report: --out '{}': cannot write {}", path, tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw UserError(fmt::format("report: --out '{}': {}", path, ec.message()));
}

}  // namespace

Action add_report(CLI::App& parent) {
  auto* sub = parent.add_subcommand("report", "One HTML page of a run (loss, speed, communication, plan) from its "
                                              "output folder, also while it runs");
  auto o = std::make_shared<ReportOptions>();
  sub->add_option("RUN_DIR", o->run_dir, "The run's output folder (job.output_dir)")->required();
  sub->add_option("--out", o->out, "Page to write (default: RUN_DIR/report.html)")->option_text("FILE");
  sub->add_option("--metrics", o->metrics, "The metrics file's name in RUN_DIR (log.metrics)")
      ->capture_default_str()->option_text("NAME");
  add_number(*sub, "--refresh", o->refresh, "Seconds between reloads of the page while the run is live; 0 = never", 0);
  return [o] {
    const tools::RunFiles files = tools::read_run_files(o->run_dir, o->metrics);
    const std::string out = o->out.empty() ? o->run_dir + "/report.html" : o->out;
    write_page(out, tools::format_report_html(files, o->refresh));
    size_t steps = 0;
    for (const auto& r : files.rows) steps += r.loss == r.loss ? 1 : 0;
    fmt::print("report: wrote {} ({} metrics rows, {} training steps{}{})\n", out, files.rows.size(), steps,
               files.plan ? ", plan" : ", no plan", files.live ? ", run is live: the page reloads itself" : "");
    for (const auto& m : files.missing) fmt::print("report: note: {}\n", m);
    return 0;
  };
}

}  // namespace holmes::cmd
