// Process memory, FLOP accounting and the metrics JSON-lines file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace holmes::train {

// Resident set size of this process and its peak, in MiB (from /proc/self/status; 0 when
// unavailable).
double rss_mb();
double peak_rss_mb();

// Appends one JSON object per line. Values are numbers; keys are fixed identifiers.
class MetricsWriter {
 public:
  // Empty path = disabled. Creates parent folders. Throws UserError when it cannot write.
  // append: continue an existing file (a resumed run) instead of starting it over.
  explicit MetricsWriter(const std::string& path, bool append = false);
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  ~MetricsWriter();

  bool enabled() const { return file_ != nullptr; }
  // One object of numbers, {"rank": 3, "ratio": 1.45}.
  using Object = std::vector<std::pair<std::string, double>>;
  // `arrays`: keys whose value is a list of numbers (comm_share_ranks), after the fields,
  // each number to four significant digits; `lists`: keys whose value is a list of objects
  // (stragglers), after those, the objects' numbers written as the fields are.
  void write(const std::vector<std::pair<std::string, double>>& fields,
             const std::vector<std::pair<std::string, std::vector<double>>>& arrays = {},
             const std::vector<std::pair<std::string, std::vector<Object>>>& lists = {});

 private:
  std::FILE* file_ = nullptr;
};

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

// Moves the rows of the metrics file `path` whose step is after `last_kept` to the file `side`
// (appended), each marked first with `"<mark>": value`, and rewrites `path` with the rest (a
// temporary file renamed over it); returns how many moved. An empty `side` drops them (a
// resume's rows past its checkpoint). 0 when `path` is empty or absent. std::runtime_error
// naming the file that cannot be written.
int64_t set_aside_rows(const std::string& path, int64_t last_kept, const std::string& side, const std::string& mark,
                       int64_t value);

// The largest step of a row in the metrics file `path`; 0 when it has none (or is absent).
int64_t last_row_step(const std::string& path);

}  // namespace holmes::train
