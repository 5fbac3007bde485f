// detect_launch_env: Slurm (multi-node, several tasks per node, odd node lists), torchrun,
// the local launcher, a single process, precedence, and bad values. Pure: no real env.
#include <catch2/catch.hpp>
#include <set>

#include "engine/launch/launch_env.hpp"
#include "common/errors.hpp"

using namespace holmes;
using namespace holmes::launch;
using Env = std::map<std::string, std::string>;

namespace {

// srun -N3 with 4,4,3 tasks; this is the task with global rank 9 (node 2, local 1).
Env slurm_three_nodes() {
  return {{"SLURM_PROCID", "9"},           {"SLURM_NTASKS", "11"},
          {"SLURM_LOCALID", "1"},          {"SLURM_NODEID", "2"},
          {"SLURM_NNODES", "3"},           {"SLURM_TASKS_PER_NODE", "4(x2),3"},
          {"SLURM_JOB_NODELIST", "gpu-a[08-09],gpu-b7"}, {"SLURM_JOB_ID", "123456"},
          {"SLURM_STEP_ID", "0"}};
}

std::string error_of(const Env& env, int nproc = 0) {
  try {
    detect_launch_env(env, nproc, "job");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("no launcher variables: one process", "[launch]") {
  auto e = detect_launch_env({{"HOME", "/root"}}, 0, "job");
  CHECK(e.source == "single");
  CHECK(e.rank == 0);
  CHECK(e.world_size == 1);
  CHECK(e.local_world_size == 1);
  CHECK(e.num_nodes == 1);
  CHECK(e.master_addr == "127.0.0.1");
  CHECK(e.master_port == 0);
}

TEST_CASE("Slurm: several nodes, uneven tasks per node, zero-padded node list", "[launch]") {
  auto e = detect_launch_env(slurm_three_nodes(), 0, "job");
  CHECK(e.source == "slurm");
  CHECK(e.rank == 9);
  CHECK(e.world_size == 11);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 3);
  CHECK(e.node_rank == 2);
  CHECK(e.num_nodes == 3);
  CHECK(e.hosts == std::vector<std::string>{"gpu-a08", "gpu-a09", "gpu-b7"});
  CHECK(e.master_addr == "gpu-a08");
  CHECK(e.master_port == derive_slurm_port(123456, 0, "job"));
  CHECK(e.master_port >= kSlurmPortBase);
  CHECK(e.master_port < kSlurmPortBase + kSlurmPortSpan);
  CHECK(e.job_token.rfind("slurm-", 0) == 0);
}

TEST_CASE("Slurm: the step's variables win over the job's, MASTER_* override", "[launch]") {
  Env env = slurm_three_nodes();
  env["SLURM_STEP_NUM_TASKS"] = "8";
  env["SLURM_STEP_NUM_NODES"] = "2";
  env["SLURM_STEP_TASKS_PER_NODE"] = "4(x2)";
  env["SLURM_STEP_NODELIST"] = "gpu-a09,gpu-b7";
  env["SLURM_PROCID"] = "5";
  env["SLURM_NODEID"] = "1";
  env["SLURM_STEP_ID"] = "3";
  auto e = detect_launch_env(env, 0, "job");
  CHECK(e.world_size == 8);
  CHECK(e.num_nodes == 2);
  CHECK(e.local_world_size == 4);
  CHECK(e.master_addr == "gpu-a09");
  CHECK(e.master_port == derive_slurm_port(123456, 3, "job"));
  env["MASTER_ADDR"] = "10.0.0.1";
  env["MASTER_PORT"] = "4321";
  e = detect_launch_env(env, 0, "job");
  CHECK(e.master_addr == "10.0.0.1");
  CHECK(e.master_port == 4321);
}

TEST_CASE("Slurm port: deterministic, differs between jobs and steps", "[launch]") {
  CHECK(derive_slurm_port(1, 0, "a") == derive_slurm_port(1, 0, "a"));
  std::set<int> ports;
  for (int job = 0; job < 50; ++job) ports.insert(derive_slurm_port(1000 + job, 0, "a"));
  CHECK(ports.size() > 45);
  CHECK(derive_slurm_port(7, 0, "a") != derive_slurm_port(7, 1, "a"));
}

TEST_CASE("Slurm tasks-per-node syntax", "[launch]") {
  CHECK(parse_slurm_tasks_per_node("4(x2),3", "V") == std::vector<int>{4, 4, 3});
  CHECK(parse_slurm_tasks_per_node("8", "V") == std::vector<int>{8});
  CHECK(parse_slurm_tasks_per_node("1,2(x3),1", "V") == std::vector<int>{1, 2, 2, 2, 1});
  for (const char* bad : {"", "4(x)", "4(2)", "x,3", "4(x2", "4,,3", "-1", "4(x0)"})
    CHECK_THROWS_AS(parse_slurm_tasks_per_node(bad, "SLURM_TASKS_PER_NODE"), UserError);
}

TEST_CASE("Slurm with --nproc-per-node: one launcher task per node", "[launch]") {
  Env env = {{"SLURM_PROCID", "1"},   {"SLURM_NTASKS", "2"},       {"SLURM_NODEID", "1"},
             {"SLURM_NNODES", "2"},   {"SLURM_TASKS_PER_NODE", "1(x2)"},
             {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "0"}};
  auto e = detect_launch_env(env, 4, "job");
  CHECK(e.source == "local");
  CHECK(e.rank == 4);
  CHECK(e.world_size == 8);
  CHECK(e.local_world_size == 4);
  CHECK(e.node_rank == 1);
  CHECK(e.master_addr == "n1");
  env["SLURM_TASKS_PER_NODE"] = "2,1";
  env["SLURM_NTASKS"] = "3";
  CHECK_THAT(error_of(env, 4), Catch::Contains("one task per node"));
}

TEST_CASE("torchrun variables", "[launch]") {
  Env env = {{"RANK", "5"},        {"WORLD_SIZE", "8"},      {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
             {"GROUP_RANK", "1"},  {"MASTER_ADDR", "host0"}, {"MASTER_PORT", "29400"}};
  auto e = detect_launch_env(env, 0, "job");
  CHECK(e.source == "torchrun");
  CHECK(e.rank == 5);
  CHECK(e.world_size == 8);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 4);
  CHECK(e.node_rank == 1);
  CHECK(e.num_nodes == 2);
  CHECK(e.master_addr == "host0");
  CHECK(e.master_port == 29400);
  // Only RANK and WORLD_SIZE: one node, local rank = rank, default port.
  e = detect_launch_env({{"RANK", "2"}, {"WORLD_SIZE", "3"}}, 0, "job");
  CHECK(e.local_rank == 2);
  CHECK(e.local_world_size == 3);
  CHECK(e.num_nodes == 1);
  CHECK(e.master_port == kDefaultMasterPort);
}

TEST_CASE("the Slurm job, step and restart count are named in the start-up line", "[launch]") {
  Env env = slurm_three_nodes();
  env["SLURM_STEP_ID"] = "2";
  auto e = detect_launch_env(env, 0, "job");
  CHECK(e.slurm_job == "Slurm job 123456 step 2");
  CHECK_THAT(describe(e), Catch::EndsWith("master gpu-a08:" + std::to_string(e.master_port) +
                                          ", Slurm job 123456 step 2"));
  env["SLURM_RESTART_COUNT"] = "0";  // a first run: nothing to say
  CHECK(detect_launch_env(env, 0, "job").slurm_job == "Slurm job 123456 step 2");
  env["SLURM_RESTART_COUNT"] = "1";
  CHECK(detect_launch_env(env, 0, "job").slurm_job == "Slurm job 123456 step 2, restart 1");
  // A worker of `--nproc-per-node` inside an srun task: torchrun-style rank, the task's job.
  env["RANK"] = "1";
  env["WORLD_SIZE"] = "2";
  CHECK_THAT(describe(detect_launch_env(env, 0, "job")), Catch::Contains("Slurm job 123456 step 2, restart 1"));
  CHECK(detect_launch_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}}, 0, "job").slurm_job.empty());
}

TEST_CASE("torchrun variables win over Slurm's inside an srun step", "[launch]") {
  Env env = slurm_three_nodes();
  env["RANK"] = "3";
  env["WORLD_SIZE"] = "4";
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = "1234";
  env["HOLMES_JOB_TOKEN"] = "abc";
  auto e = detect_launch_env(env, 0, "job");
  CHECK(e.source == "torchrun");
  CHECK(e.rank == 3);
  CHECK(e.world_size == 4);
  CHECK(e.job_token == "abc");
}

TEST_CASE("local launcher alone", "[launch]") {
  auto e = detect_launch_env({}, 3, "job");
  CHECK(e.source == "local");
  CHECK(e.world_size == 3);
  CHECK(e.local_world_size == 3);
  CHECK(e.master_port == 0);
  CHECK(e.job_token.empty());
}

TEST_CASE("bad or partial launcher variables name the variable and the value", "[launch]") {
  CHECK_THAT(error_of({{"RANK", "0"}}), Catch::Contains("WORLD_SIZE"));
  CHECK_THAT(error_of({{"WORLD_SIZE", "2"}}), Catch::Contains("RANK"));
  CHECK_THAT(error_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}}), Catch::Contains("RANK=4"));
  CHECK_THAT(error_of({{"RANK", "one"}, {"WORLD_SIZE", "4"}}), Catch::Contains("RANK='one'"));
  CHECK_THAT(error_of({{"RANK", "0"}, {"WORLD_SIZE", "4x"}}), Catch::Contains("WORLD_SIZE='4x'"));
  CHECK_THAT(error_of({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}),
             Catch::Contains("LOCAL_RANK=2"));
  CHECK_THAT(error_of({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}}),
             Catch::Contains("MASTER_ADDR"));
  CHECK_THAT(error_of({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", "70000"}}),
             Catch::Contains("MASTER_PORT=70000"));
  CHECK_THAT(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}, 2), Catch::Contains("--nproc-per-node"));
  Env slurm = slurm_three_nodes();
  slurm["SLURM_PROCID"] = "11";
  CHECK_THAT(error_of(slurm), Catch::Contains("SLURM_PROCID=11"));
  slurm = slurm_three_nodes();
  slurm["SLURM_TASKS_PER_NODE"] = "4(x3)";
  CHECK_THAT(error_of(slurm), Catch::Contains("SLURM_TASKS_PER_NODE=4(x3)"));
  slurm = slurm_three_nodes();
  slurm["SLURM_LOCALID"] = "3";  // node 2 has only 3 tasks
  CHECK_THAT(error_of(slurm), Catch::Contains("SLURM_LOCALID=3"));
  slurm = slurm_three_nodes();
  slurm["SLURM_JOB_NODELIST"] = "gpu[3-1]";
  CHECK_THAT(error_of(slurm), Catch::Contains("gpu[3-1]"));
  slurm = slurm_three_nodes();
  slurm.erase("SLURM_NTASKS");
  CHECK_THAT(error_of(slurm), Catch::Contains("SLURM_NTASKS"));
  slurm = slurm_three_nodes();
  slurm.erase("SLURM_JOB_ID");
  CHECK_THAT(error_of(slurm), Catch::Contains("SLURM_JOB_ID"));
}

TEST_CASE("Slurm: a batch script (SLURM_PROCID without a step) is told to use srun", "[launch]") {
  // What sbatch --ntasks=4 gives the script itself: no SLURM_STEP_ID, no SLURM_STEP_*.
  Env batch = {{"SLURM_PROCID", "0"},    {"SLURM_NTASKS", "4"},         {"SLURM_LOCALID", "0"},
               {"SLURM_NODEID", "0"},    {"SLURM_NNODES", "1"},         {"SLURM_TASKS_PER_NODE", "4"},
               {"SLURM_JOB_NODELIST", "vm"}, {"SLURM_JOB_ID", "12"}};
  CHECK_THAT(error_of(batch), Catch::Contains("SLURM_NTASKS=4 and SLURM_PROCID=0 are set but SLURM_STEP_ID is not"));
  CHECK_THAT(error_of(batch), Catch::Contains("batch script of job 12"));
  batch["SLURM_NNODES"] = "2";  // sbatch --nodes=2 --ntasks-per-node=1, then --nproc-per-node without srun
  batch["SLURM_NTASKS"] = "2";
  batch["SLURM_TASKS_PER_NODE"] = "1(x2)";
  CHECK_THAT(error_of(batch, 4), Catch::Contains("srun holmes-train"));
  // One task: the script may run holmes-train itself (one process, or --nproc-per-node on its node).
  batch["SLURM_NNODES"] = "1";
  batch["SLURM_NTASKS"] = "1";
  batch["SLURM_TASKS_PER_NODE"] = "1";
  CHECK(detect_launch_env(batch, 0, "job").world_size == 1);
  CHECK(detect_launch_env(batch, 4, "job").world_size == 4);
  batch["SLURM_NTASKS"] = "4";
  batch["SLURM_TASKS_PER_NODE"] = "4";
  batch["SLURM_STEPID"] = "0";  // srun's older name for the step id
  CHECK(detect_launch_env(batch, 0, "job").world_size == 4);
}
