// `holmes-train store`: serves one elastic job's TCP rendezvous store in a process of its own
// (engine/runtime/store_keeper.hpp). Rank 0 starts it by itself; run by hand on a host outside
// the job (MASTER_ADDR/MASTER_PORT pointing at it, HOLMES_STORE_HOSTED=1 and the same
// HOLMES_JOB_TOKEN for every rank), it lets the job survive the loss of rank 0's node.
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "cmd/commands.hpp"
#include "cmd/option_values.hpp"
#include "common/errors.hpp"
#include "engine/runtime/store_keeper.hpp"

namespace holmes::cmd {

Action add_store(CLI::App& parent) {
  auto* sub = parent.add_subcommand(
      "store", "Serve a job's rendezvous store (TCP) in a process of its own, until the job's ranks have gone");
  auto o = std::make_shared<runtime::KeeperOptions>();
  auto port = std::make_shared<int>(0);
  add_number(*sub, "--port", *port, "The port to listen on (the ranks' MASTER_PORT)", 1, 65535)->required();
  // What rank 0 passes when it starts the store for its job (not for users).
  sub->add_option("--ready-fd", o->ready_fd, "")->group("");
  sub->add_flag("--outlive-signals", o->outlive_signals, "")->group("");
  sub->add_flag("--follow-parent", o->follow_parent, "")->group("");
  return [o, port] {
    const char* token = std::getenv("HOLMES_JOB_TOKEN");
    if (token == nullptr || *token == '\0')
      throw UsageError("holmes-train store: HOLMES_JOB_TOKEN is not set; accepted: the job's token, the same value "
                       "given to every rank (the store refuses ranks that present another)");
    o->port = static_cast<uint16_t>(*port);
    o->token = token;
    return runtime::serve_job_store(*o);
  };
}

}  // namespace holmes::cmd
