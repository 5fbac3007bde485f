#include "engine/checkpoint/checkpoint_manifest.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "common/errors.hpp"
#include "model/architecture.hpp"
#include "common/format.hpp"
#include "engine/checkpoint/checkpoint_io.hpp"

namespace holmes::checkpoint {

namespace {

std::string piece_json(const CheckpointPiece& p) {
  return fmt::format(
      "{{\"tensor\": {}, \"kind\": \"{}\", \"full_shape\": [{}], \"shard_shape\": [{}], \"split_dim\": {}, "
      "\"split_parts\": {}, \"tp_index\": {}, \"tp_count\": {}, \"begin\": {}, \"end\": {}, \"offset\": {}}}",
      json_quote(p.tensor), tensor_kind_name(p.kind), fmt::join(p.full_shape, ", "), fmt::join(p.shard_shape, ", "),
      p.split_dim, p.split_parts, p.tp_index, p.tp_count, p.begin, p.end, p.offset);
}

TensorKind parse_kind(const std::string& s, const std::string& file) {
  for (TensorKind k : {TensorKind::kParam, TensorKind::kExpAvg, TensorKind::kExpAvgSq})
    if (s == tensor_kind_name(k)) return k;
  throw UserError(fmt::format("{}: piece kind '{}' is not accepted, expected param, exp_avg or exp_avg_sq", file, s));
}

// node[key] as T, or a UserError naming the manifest and the key.
template <class T>
T need(const YAML::Node& node, const char* key, const std::string& file) {
  const YAML::Node v = node[key];
  if (!v) throw UserError(fmt::format("{}: malformed manifest: key '{}' is missing", file, key));
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    throw UserError(fmt::format("{}: malformed manifest: key '{}' has a value of the wrong type", file, key));
  }
}

uint64_t parse_hex(const std::string& s, const char* key, const std::string& file) {
  try {
    size_t used = 0;
    const uint64_t v = std::stoull(s, &used, 16);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  throw UserError(fmt::format("{}: malformed manifest: '{}' = '{}' is not a hexadecimal number", file, key, s));
}

CheckpointFile parse_file_entry(const YAML::Node& n, const std::string& file) {
  CheckpointFile f;
  f.name = need<std::string>(n, "name", file);
  f.rank = need<int>(n, "rank", file);
  f.bytes = need<uint64_t>(n, "bytes", file);
  f.crc32c = static_cast<uint32_t>(parse_hex(need<std::string>(n, "crc32c", file), "crc32c", file));
  for (const auto& pn : n["pieces"]) {
    CheckpointPiece p;
    p.tensor = need<std::string>(pn, "tensor", file);
    p.kind = parse_kind(need<std::string>(pn, "kind", file), file);
    p.full_shape = need<std::vector<int64_t>>(pn, "full_shape", file);
    p.shard_shape = need<std::vector<int64_t>>(pn, "shard_shape", file);
    p.split_dim = need<int>(pn, "split_dim", file);
    p.split_parts = need<int>(pn, "split_parts", file);
    p.tp_index = need<int>(pn, "tp_index", file);
    p.tp_count = need<int>(pn, "tp_count", file);
    p.begin = need<int64_t>(pn, "begin", file);
    p.end = need<int64_t>(pn, "end", file);
    p.offset = need<uint64_t>(pn, "offset", file);
    if (p.end < p.begin || p.offset < kHeaderBytes || p.offset + 4 * static_cast<uint64_t>(p.end - p.begin) > f.bytes)
      throw UserError(fmt::format("{}: piece {} [{}, {}) of {} lies outside the {} bytes of {}", file, p.tensor,
                                  p.begin, p.end, tensor_kind_name(p.kind), f.bytes, f.name));
    f.pieces.push_back(std::move(p));
  }
  return f;
}

}  // namespace

std::string shard_file_name(int rank) { return fmt::format("rank-{:05d}.bin", rank); }

CheckpointFile parse_file_entry_text(const std::string& text, const std::string& what) {
  YAML::Node n;
  try {
    n = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UserError(fmt::format("{}: malformed shard file entry: {}", what, e.what()));
  }
  return parse_file_entry(n, what);
}

std::string file_entry_json(const CheckpointFile& f) {
  std::string out = fmt::format("{{\"name\": {}, \"rank\": {}, \"bytes\": {}, \"crc32c\": \"{:08x}\", \"pieces\": [",
                                json_quote(f.name), f.rank, f.bytes, f.crc32c);
  for (size_t i = 0; i < f.pieces.size(); ++i) out += (i ? ",\n      " : "\n      ") + piece_json(f.pieces[i]);
  return out + "]}";
}

std::string manifest_json(const SaveContext& c, const std::vector<std::string>& file_entries) {
  const auto& m = c.model;
  std::string out = "{\n";
  out += fmt::format("  \"format\": \"holmes-train checkpoint\",\n  \"format_version\": {},\n", kCheckpointFormatVersion);
  out += fmt::format("  \"run\": {},\n", json_quote(c.run_id));
  out += fmt::format("  \"step\": {},\n  \"tokens_seen\": {},\n  \"seed\": {},\n", c.step, c.tokens_seen, c.seed);
  // The next step reads the stream's sequences from `sequences` on (data.train's mixture and
  // job.seed fix what each is): a resume under any plan continues there.
  if (c.data_sequences >= 0)
    out += fmt::format("  \"data_position\": {{\"sequences\": {}, \"seq_len\": {}, \"step\": {}}},\n",
                       c.data_sequences, c.data_seq_len, c.step);
  out += "  \"rng\": \"none: training draws no random numbers after initialisation\",\n";
  // The default architecture's manifests name none (as before there were others); the others
  // add their name and the options they read.
  std::string arch_keys;
  if (m.arch != model::kDefaultArch) {
    arch_keys = fmt::format(", \"arch\": {}", json_quote(m.arch));
    if (m.reads(model::kKvHeads)) arch_keys += fmt::format(", \"kv_heads\": {}", m.kv_heads);
    if (m.reads(model::kFfnHidden)) arch_keys += fmt::format(", \"ffn_hidden\": {}", m.ffn_hidden);
    if (m.reads(model::kRopeTheta)) arch_keys += fmt::format(", \"rope_theta\": {:.17g}", m.rope_theta);
    if (m.reads(model::kNormEps)) arch_keys += fmt::format(", \"norm_eps\": {:.9g}", m.norm_eps);
    if (m.reads(model::kTieEmbeddings)) arch_keys += fmt::format(", \"tie_embeddings\": {}", m.tie_embeddings);
  }
  out += fmt::format("  \"model\": {{\"layers\": {}, \"hidden\": {}, \"heads\": {}, \"vocab\": {}, \"padded_vocab\": {}, "
                     "\"max_seq_len\": {}{}}},\n", m.layers, m.hidden, m.heads, m.vocab, m.padded_vocab, m.max_seq_len,
                     arch_keys);
  out += fmt::format("  \"world\": {},\n  \"plan_hash\": \"{:016x}\",\n", c.world, c.plan_hash);
  out += fmt::format("  \"plan\": {},\n  \"job_spec\": {},\n", json_quote(c.plan_text),
                     json_quote(c.job_spec_text));
  // FP8 under current scaling keeps no scaling state between steps (model/fp8_recipe.hpp):
  // the recipe is all there is to record.
  if (!c.precision.empty())
    out += fmt::format("  \"numerics\": {{\"precision\": {}, \"scaling_state\": \"none\"}},\n",
                       json_quote(c.precision));
  if (c.tokenizer.hash != 0)
    out += fmt::format("  \"tokenizer\": {{\"hash\": \"{:016x}\", \"name\": {}, \"ids\": {}}},\n", c.tokenizer.hash,
                       json_quote(c.tokenizer.name), c.tokenizer.ids);
  out += "  \"files\": [";
  for (size_t i = 0; i < file_entries.size(); ++i) out += (i ? ",\n    " : "\n    ") + file_entries[i];
  return out + "\n  ]\n}\n";
}

CheckpointInfo parse_manifest(const std::string& dir) {
  const std::string file = dir + "/" + kManifestName;
  if (!std::filesystem::exists(file))
    throw UserError(fmt::format("{}: checkpoint manifest is missing (is {} a checkpoint folder step-NNNNNNNN?)", file, dir));
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    throw UserError(fmt::format("{}: malformed manifest (not valid JSON): {}", file, e.what()));
  }
  if (!root.IsMap()) throw UserError(fmt::format("{}: malformed manifest: not a JSON object", file));
  CheckpointInfo info;
  info.dir = dir;
  info.format_version = need<int>(root, "format_version", file);
  if (info.format_version > kCheckpointFormatVersion || info.format_version < 1)
    throw UserError(fmt::format("{}: format_version {} is not readable by this build, which reads version {}{}", file,
                                info.format_version, kCheckpointFormatVersion,
                                info.format_version > kCheckpointFormatVersion ? " (use a newer holmes-train)" : ""));
  if (root["run"]) info.run_id = need<std::string>(root, "run", file);  // absent before run ids
  info.step = need<int64_t>(root, "step", file);
  info.tokens_seen = need<int64_t>(root, "tokens_seen", file);
  info.seed = need<uint64_t>(root, "seed", file);
  // Manifests before the loader's position was recorded have a data_position with the step only.
  if (const YAML::Node p = root["data_position"]; p && p.IsMap() && p["sequences"]) {
    info.data_sequences = need<int64_t>(p, "sequences", file);
    info.data_seq_len = need<int>(p, "seq_len", file);
    if (info.data_sequences < 0 || info.data_seq_len < 1)
      throw UserError(fmt::format("{}: data_position {{sequences {}, seq_len {}}} is not a position (accepted: "
                                  "sequences >= 0, seq_len >= 1)", file, info.data_sequences, info.data_seq_len));
  }
  info.world = need<int>(root, "world", file);
  info.plan_hash = parse_hex(need<std::string>(root, "plan_hash", file), "plan_hash", file);
  info.plan_text = need<std::string>(root, "plan", file);
  info.job_spec_text = need<std::string>(root, "job_spec", file);
  if (const YAML::Node n = root["numerics"])  // absent before runs recorded it
    info.precision = need<std::string>(n, "precision", file);
  if (const YAML::Node t = root["tokenizer"]) {  // absent before runs recorded their tokenizer
    info.tokenizer.hash = parse_hex(need<std::string>(t, "hash", file), "tokenizer.hash", file);
    info.tokenizer.name = need<std::string>(t, "name", file);
    info.tokenizer.ids = need<uint32_t>(t, "ids", file);
  }
  const YAML::Node m = root["model"];
  if (!m || !m.IsMap()) throw UserError(fmt::format("{}: malformed manifest: key 'model' is missing", file));
  model::GptConfig& c = info.model;
  if (m["arch"]) {  // absent: the default architecture (manifests written before there were others, and its own)
    c.arch = need<std::string>(m, "arch", file);
    try {
      model::architecture(c.arch);
    } catch (const UserError& e) {
      throw UserError(fmt::format("{}: model.{}", file, e.what()));
    }
  }
  if (c.reads(model::kKvHeads)) c.kv_heads = need<int>(m, "kv_heads", file);
  if (c.reads(model::kFfnHidden)) c.ffn_hidden = need<int>(m, "ffn_hidden", file);
  if (c.reads(model::kRopeTheta)) c.rope_theta = need<double>(m, "rope_theta", file);
  if (c.reads(model::kNormEps)) c.norm_eps = need<float>(m, "norm_eps", file);
  if (c.reads(model::kTieEmbeddings)) c.tie_embeddings = need<bool>(m, "tie_embeddings", file);
  c.layers = need<int>(m, "layers", file);
  c.hidden = need<int>(m, "hidden", file);
  c.heads = need<int>(m, "heads", file);
  c.vocab = need<int>(m, "vocab", file);
  c.max_seq_len = need<int>(m, "max_seq_len", file);
  c.padded_vocab = need<int>(m, "padded_vocab", file);
  c.finalize();
  const YAML::Node files = root["files"];
  if (!files || !files.IsSequence() || static_cast<int>(files.size()) != info.world)
    throw UserError(fmt::format("{}: malformed manifest: 'files' must list one shard file per rank ({})", file, info.world));
  for (const auto& f : files) info.files.push_back(parse_file_entry(f, file));
  return info;
}

}  // namespace holmes::checkpoint
