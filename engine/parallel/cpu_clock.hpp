// CPU clocks of this process, for the step's and the outer sync's CPU figures.
#pragma once

#include <ctime>

namespace holmes::parallel {

// CPU time of the whole process (every thread: training, communication, Gloo's I/O, kernel
// work on their behalf), milliseconds. Under a CPU quota (a cgroup) this is what the quota caps.
inline double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

// CPU seconds the calling thread has run so far.
inline double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace holmes::parallel
