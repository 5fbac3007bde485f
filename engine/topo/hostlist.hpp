// Slurm hostlist expressions: "node[01-04,07],gpu-a[1-2]" <-> the host names they stand for.
// Reference behaviour: `scontrol show hostnames` / `scontrol show hostlist`.
#pragma once

#include <string>
#include <vector>

namespace holmes::topo {

// Expands an expression, left to right, duplicates kept (as scontrol does):
//   - commas (or white space) outside brackets separate expressions;
//   - inside brackets, a comma-separated list of numbers and ranges "lo-hi";
//   - a range is zero-padded to the width of its lower bound when that has a leading zero
//     ("[08-10]" -> 08 09 10; "[8-10]" -> 8 9 10);
//   - several bracket groups multiply out, the leftmost varying slowest
//     ("a[1-2]b[3-4]" -> a1b3 a1b4 a2b3 a2b4).
// Throws UserError naming the expression on unbalanced or nested brackets, empty names or
// ranges, lo > hi, non-digits in a range, or more than kMaxHostlistHosts names.
std::vector<std::string> expand_hostlist(const std::string& expression);

inline constexpr size_t kMaxHostlistHosts = 1 << 20;

// The reverse: names ending in a number are grouped by prefix and digit width, sorted and
// merged into ranges ("n1 n2 n3 n5 x" -> "n[1-3,5],x"). Duplicates are dropped; groups keep
// the order in which their first name appeared. expand_hostlist(compress_hostlist(v)) holds
// the same set of names as v.
std::string compress_hostlist(const std::vector<std::string>& names);

}  // namespace holmes::topo
