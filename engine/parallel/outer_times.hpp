// Where one rank's outer syncs (parallel.outer: diloco, outer_sync.hpp) spent their time: the
// wall time of each part of the owner-slice exchange, the CPU time the process used meanwhile
// and the bytes sent. The log prints it after a step that synced (docs/diloco.md, "Where an
// outer sync's time goes"), metrics.jsonl carries it (docs/metrics.md) and every rank sums
// its own at the end of the run.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace holmes::parallel {

struct OuterTimes {
  int syncs = 0;          // fragments whose exchange started after this step (sent)
  int applied = 0;        // fragments whose exchange was applied after this step
  // Wall time, milliseconds. On the training thread: encode (1. the outer gradient, the
  // payloads of the N parts, the error feedback), outer_step (4. Nesterov on the anchor, the
  // weights), dp_gather (5. the replica's data-parallel all-gather of the slices) and wait (the
  // training thread waiting for the exchange beyond what the exchange's own parts below took:
  // the hand-off to the communication thread and back; with outer_overlap, the part of the
  // exchange the tau steps did not hide). On the thread that ran the exchange: to_owners (2. the
  // N - 1 pairwise rounds), average (3. decoding the N payloads of the owned part, their mean,
  // encoding it once), gather (the all-gather of the owners' payloads), decode (the N averages
  // decoded, the owner's error feedback). With outer_overlap the exchange ran beside the steps:
  // its parts are reported with the step that applies it.
  double encode_ms = 0, to_owners_ms = 0, average_ms = 0, gather_ms = 0, decode_ms = 0;
  double wait_ms = 0, outer_step_ms = 0, dp_gather_ms = 0;
  double total_ms = 0;    // wall time the training thread spent in the outer sync after this step
  double cpu_ms = 0;      // CPU time of the whole process (every thread) over total_ms
  double bytes = 0;       // bytes this rank sent over its outer group (the exchanges started)

  bool empty() const { return syncs == 0 && applied == 0; }
  // The exchange's parts on the communication thread.
  double exchange_ms() const { return to_owners_ms + average_ms + gather_ms + decode_ms; }
  OuterTimes& operator+=(const OuterTimes& o) {
    syncs += o.syncs, applied += o.applied;
    encode_ms += o.encode_ms, to_owners_ms += o.to_owners_ms, average_ms += o.average_ms;
    gather_ms += o.gather_ms, decode_ms += o.decode_ms, wait_ms += o.wait_ms;
    outer_step_ms += o.outer_step_ms, dp_gather_ms += o.dp_gather_ms;
    total_ms += o.total_ms, cpu_ms += o.cpu_ms, bytes += o.bytes;
    return *this;
  }
  // The parts by name, in the order they run: the metrics' keys are "outer_" + name + "_ms".
  std::vector<std::pair<const char*, double>> parts() const {
    return {{"encode", encode_ms},   {"to_owners", to_owners_ms}, {"average", average_ms},
            {"gather", gather_ms},   {"decode", decode_ms},       {"wait", wait_ms},
            {"outer_step", outer_step_ms}, {"dp_gather", dp_gather_ms}};
  }
  // "673 ms = encode 3.1 + to owners 250.2 + ... ; CPU 31 ms; 2.55 MB sent" (times in ms).
  std::string describe() const;
};

}  // namespace holmes::parallel
