// What the trainer of an elastic replica job (parallel.elastic, docs/elastic.md) asks when a
// group across replicas fails: the runtime's session (engine/runtime/elastic.hpp) implements
// it over the rendezvous store. The trainer only says where it stands; who survives, the new
// groups and the new place come back from recover().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "engine/schedule/axes.hpp"

namespace holmes::parallel {

// The survivors' layout for this rank after a loss.
struct ReplicaRegroup {
  schedule::Place place;          // the replica coordinate and degree renumbered over the survivors
  comm::ProcessGroup* outer = nullptr;  // this coordinate's group across the surviving replicas (null: one left)
  std::vector<int> replicas;      // the replicas training from now on, numbered as at the start
  int replica = 0;                // this rank's replica, numbered as at the start
  // Replica coordinates (new numbering) that join now: they take the state of the first
  // coordinate that does not join over the new outer group (empty after a loss).
  std::vector<int> joined;
};

class ReplicaRecovery {
 public:
  virtual ~ReplicaRecovery() = default;
  // Whether another rank announced a failure of this generation (once per step: a rank that
  // learns of it here joins the recovery at once instead of at its next collective).
  virtual bool announced() = 0;
  // diloco: this rank read an announcement at the end of step `step` between two meetings
  // across replicas (its replica behind the one that met the failure: replicas drift between
  // syncs). It says it is alive and coming, so the decision waits for it, and trains on to its
  // next sum, exchange or log reduction across replicas, where it meets the failure at the
  // step every survivor registers.
  virtual void coming(int64_t step) = 0;
  // After this rank's outer exchange following step `step` (0-based) completed: true once every
  // member of the generation completed it (the exchange is applied), false when one failed (the
  // caller rolls back and calls recover). The store's verdict, the same on every rank.
  virtual bool exchange_complete(int64_t step) = 0;
  // Elastic sync replicas (exchange_complete(step) judges each step's update): this rank met a
  // failure across the replicas in step `step` before it counted itself in. It announces the
  // failure; the generation's first rank writes that verdict 0 at once, so the members waiting
  // for it recover too.
  virtual void refuse_update(int64_t step) = 0;
  // This rank met a failure across the replicas in step `step` that it takes up later (at the
  // step's verdict, or as the exchange begins): it says so now, when it was met.
  virtual void met_failure(int64_t /*step*/, const std::string& /*what*/, const std::string& /*later*/) {}
  // After a failure of a group across replicas in (or after) step `step`: registers this rank,
  // waits for the decision and returns the layout of the next generation. `exchange`: this
  // rank's outer exchange of that step was under way or waiting for its verdict. Throws when
  // the job (or this rank's replica) cannot go on.
  virtual ReplicaRegroup recover(int64_t step, bool exchange, const std::string& what) = 0;
  // After the exchange following step `step` was applied: whether its verdict admitted
  // replicas that rejoin. They join at the start of the next step (after the loop's work
  // between the two steps, done over the groups without them): admit() then makes the groups
  // with them and returns the layout.
  virtual bool admitted(int64_t step) = 0;
  virtual ReplicaRegroup admit() = 0;
  // After a join's state went from a survivor to the joiners: every member of the new
  // generation meets (survivors and joiners alike), so that a joiner lost during the join is
  // met by every survivor there (CommError), before any step of the new layout.
  virtual void joined() = 0;
};

}  // namespace holmes::parallel
