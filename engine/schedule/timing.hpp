// The runner's timing of one step's pipeline tables (schedule.hpp), as engine/parallel/pipeline_stage.cpp
// walks them: the planner prices the pipeline's per-message waits with it (docs/results/cost-model-history.md,
// "Seventeenth round": the pipeline's loop).
//
// Each stage runs its list in order. A compute step starts when the stage is free and, for a
// forward (backward) of a virtual stage that has one before (after) it, when the receive of
// its input (output gradient) has ended. A comm step is posted when the stage reaches it and
// goes to the stage's communication thread, which starts it once the previous batch ended;
// the batch ends when every op's peer has started the batch holding the matching op, plus the
// transfer's time over that hop. Compute never waits for a send, only for what it reads.
// Each step's time is settled once, when the times it waits for are (linear in the steps).
#pragma once

#include <functional>
#include <span>

#include "engine/schedule/schedule.hpp"

namespace holmes::schedule {

// One micro-batch's passes on a stage (a chunk's under the interleaved schedule), seconds.
struct PassTimes {
  double forward_s = 0, backward_s = 0, weights_s = 0;  // weights_s: kWeights steps (zb-h1)
};

// The transfers over the boundary after virtual stage v: its activation to v + 1 and the
// gradient coming back, seconds each.
struct HopTimes {
  double activation_s = 0, gradient_s = 0;
};

// What one message waits beyond its hop's time, seconds: `direction` 0 the activation, 1 the
// gradient, over the boundary after virtual stage `boundary`, of micro-batch `micro`. Asked
// once per message of the step, in a fixed order (deterministic draws stay reproducible).
using MessageDelay = std::function<double(int direction, int boundary, int micro)>;

// When the last stage's last step ends, from 0. `passes` has one entry per stage, `hops`
// one per boundary (stages * chunks - 1); `delay`, where given, adds to each message's hop.
// Throws std::invalid_argument for sizes that do not match, and for the arguments
// schedule_steps refuses.
double pipeline_makespan(PipeSchedule kind, int stages, int micro_batches, int chunks, std::span<const PassTimes> passes,
                         std::span<const HopTimes> hops, const MessageDelay& delay = {});

// The mean makespan over `samples` steps whose messages each wait, beyond their hop, a delay
// drawn from an exponential distribution of mean delay_s[boundary] (pseudo-random, from
// `seed`: the same arguments give the same figure). A step's messages meet delays of their
// own, and the step waits for the latest of the paths they lie on: the mean of the makespan
// exceeds the makespan at the mean delay wherever messages lie on the pipeline's critical
// path (docs/results/cost-model-history.md, "Twentieth round"). Without a positive delay: pipeline_makespan.
double expected_pipeline_makespan(PipeSchedule kind, int stages, int micro_batches, int chunks,
                                  std::span<const PassTimes> passes, std::span<const HopTimes> hops,
                                  std::span<const double> delay_s, int samples, unsigned seed);

}  // namespace holmes::schedule
