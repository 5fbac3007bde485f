// One rank's slice of a plan, every decision resolved (engine/schedule/rank_plan.hpp): what
// start-up hands the executor. Pure: made from the plan and the rank alone.
#pragma once

#include "engine/plan/plan.hpp"
#include "engine/schedule/rank_plan.hpp"

namespace holmes::plan {

// Rank `rank` of `plan`: its coordinate and every axis's degree (the replica axis only for
// diloco replicas), its stage's layer chunks, the schedule and its step table, the batch
// shape, precision, recomputation and, with replicas, the outer sync. std::invalid_argument
// for a rank outside the plan or a plan whose parts disagree (a wiring error).
schedule::RankPlan rank_plan(const Plan& plan, int rank);

// The table a resolved parallel.schedule names.
schedule::PipeSchedule pipe_schedule(spec::Schedule schedule);

}  // namespace holmes::plan
