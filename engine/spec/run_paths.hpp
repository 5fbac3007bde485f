// Where a run's outputs live, stated once: everything that writes a run (the loop, the
// checkpoint code, the run record) and everything that reads one back (export, eval, sample,
// --resume PATH) builds its paths here.
//   <job.output_dir>/
//     run.json                 the run record (engine/checkpoint/run_folder)
//     writer.lock              held by the process writing the run (engine/checkpoint/writer_lock)
//     <log.metrics>            metrics.jsonl by default; "" disables it
//     checkpoints/             unless checkpoint.dir names another folder
//     final/model.bin, final/job.yaml
//     tokenizer/               the data's tokenizer (engine/train/run_tokenizer.hpp)
//     plan.json                the plan the run runs under (--plan-only --format json's text)
#pragma once

#include <string>

#include "engine/spec/job_spec.hpp"

namespace holmes::spec {

struct RunPaths {
  std::string output_dir;
  std::string checkpoints;  // checkpoint.dir, or <output_dir>/checkpoints
  std::string metrics;      // <output_dir>/<log.metrics>; "" when log.metrics is empty
  std::string run_record;   // <output_dir>/run.json
  std::string writer_lock;  // <output_dir>/writer.lock
  std::string final_dir;    // <output_dir>/final
  std::string final_model;  // <final_dir>/model.bin
  std::string final_spec;   // <final_dir>/job.yaml
  std::string tokenizer;    // <output_dir>/tokenizer
  std::string plan;         // <output_dir>/plan.json: the plan the run runs under (rank 0 writes it)

  static constexpr const char* kRunRecord = "run.json";
  static constexpr const char* kWriterLock = "writer.lock";
  static constexpr const char* kCheckpoints = "checkpoints";
  static constexpr const char* kFinal = "final";
  static constexpr const char* kModelFile = "model.bin";
  static constexpr const char* kTokenizer = "tokenizer";
  static constexpr const char* kPlan = "plan.json";

  // The paths of the job's run.
  static RunPaths of(const JobSpec& spec) {
    RunPaths p = folder(spec.job.output_dir, spec.log.metrics);
    if (!spec.checkpoint.dir.empty()) p.checkpoints = spec.checkpoint.dir;
    return p;
  }
  // The default layout of a run folder someone points to (export, eval, --resume PATH).
  static RunPaths folder(const std::string& output_dir, const std::string& metrics_name = "metrics.jsonl") {
    RunPaths p;
    p.output_dir = output_dir;
    p.checkpoints = output_dir + "/" + kCheckpoints;
    p.metrics = metrics_name.empty() ? "" : output_dir + "/" + metrics_name;
    p.run_record = output_dir + "/" + kRunRecord;
    p.writer_lock = output_dir + "/" + kWriterLock;
    p.final_dir = output_dir + "/" + kFinal;
    p.final_model = p.final_dir + "/" + kModelFile;
    p.final_spec = p.final_dir + "/job.yaml";
    p.tokenizer = output_dir + "/" + kTokenizer;
    p.plan = output_dir + "/" + kPlan;
    return p;
  }
};

}  // namespace holmes::spec
