// How an architecture is spelled in Hugging Face transformers: its config.json (model_type,
// architectures, keys) and its tensor names and layouts. engine/checkpoint/hf_format.cpp does
// the conversion and the file work for every architecture through this map.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"

namespace holmes::model {

// config.json's keys as read (engine/checkpoint reads the JSON). The getters throw
// holmes::UserError naming the file and the key when it is missing or of another type.
class HfConfigKeys {
 public:
  virtual ~HfConfigKeys() = default;
  virtual bool has(const char* key) const = 0;  // present and not null
  virtual int64_t integer(const char* key) const = 0;
  virtual double number(const char* key) const = 0;
  virtual bool boolean(const char* key) const = 0;
  virtual std::string text(const char* key) const = 0;
  virtual std::string dump(const char* key) const = 0;  // the value as the file writes it
  // holmes::UserError: "FILE: KEY = SEEN is not supported; accepted: ACCEPTED".
  [[noreturn]] virtual void refuse(const std::string& key, const std::string& seen,
                                   const std::string& accepted) const = 0;

  int64_t integer_or(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number_or(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }
  bool boolean_or(const char* key, bool fallback) const { return has(key) ? boolean(key) : fallback; }
  std::string text_or(const char* key, const std::string& fallback) const { return has(key) ? text(key) : fallback; }
};

// A config.json key and the job-spec key it corresponds to, with both values as text.
struct HfKeyPair {
  std::string hf_key, job_key, hf_value, job_value;
};

class HfMap {
 public:
  virtual ~HfMap() = default;
  virtual const char* model_type() const = 0;  // config.json model_type: "gpt2"
  // The `architectures` entries read as this model; the first is what an export writes.
  virtual std::vector<std::string> classes() const = 0;
  // Hugging Face names of our tensor `ours`, the one an export writes first, then others
  // published files use.
  virtual std::vector<std::string> tensor_names(const std::string& ours) const = 0;
  // True when Hugging Face stores `t` transposed, (in, out) against our Linear (out, in).
  virtual bool transposed(const ParamTensor& t) const { (void)t; return false; }
  // config.json of the whole model cfg.
  virtual std::string config_json(const GptConfig& cfg) const = 0;
  // The model config.json describes (tp = 1, one stage, finalized); refuses (keys.refuse) what
  // the model does not run.
  virtual GptConfig read_config(const HfConfigKeys& keys) const = 0;
  // The keys a job's model must agree on with a config.json of this architecture.
  virtual std::vector<HfKeyPair> compared_keys(const GptConfig& hf, const GptConfig& job) const = 0;
};

}  // namespace holmes::model
