// Writing a checkpoint: every rank its shard file, rank 0 the manifest and the commit marker.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "comm/store.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "engine/checkpoint/checkpoint_io.hpp"
#include "engine/checkpoint/checkpoint_manifest.hpp"
#include "engine/checkpoint/private_state.hpp"

namespace holmes::checkpoint {

namespace fs = std::filesystem;

namespace {

// A run of the flat buffer of state s this rank saves: [begin, end) inside tensor t, and
// where the run's moments start in s's packed exp_avg / exp_avg_sq arrays.
struct Segment {
  const ShardState* s;
  const model::ParamTensor* t;
  size_t begin, end, packed;
};

// Owned ranges cut at tensor boundaries, state after state (model chunk order). A last stage's
// tied copy of wte is skipped (it equals wte, saved by the first stage), and so are replicated
// tensors on TP ranks > 0.
std::vector<Segment> segments_of(std::span<const ShardState> states) {
  std::vector<Segment> out;
  for (const ShardState& s : states) {
    if (!s.writes) continue;
    size_t packed = 0;
    for (const auto& [b, e] : s.owned) {
      for (const auto& t : s.layout->tensors()) {
        const size_t lo = std::max(b, t.offset), hi = std::min(e, t.offset + t.numel);
        const bool replica = t.split_dim < 0 && s.config->tp_rank > 0;
        if (lo < hi && !t.tied_copy && !replica) out.push_back({&s, &t, lo, hi, packed + (lo - b)});
      }
      packed += e - b;
    }
  }
  return out;
}

CheckpointPiece piece_of(const Segment& g, TensorKind kind, uint64_t offset) {
  const auto& t = *g.t;
  return {.tensor = t.name, .kind = kind, .full_shape = t.full_shape, .shard_shape = t.shape,
          .split_dim = t.split_dim, .split_parts = t.split_parts, .tp_index = t.tp_index, .tp_count = t.tp_count,
          .begin = static_cast<int64_t>(g.begin - t.offset), .end = static_cast<int64_t>(g.end - t.offset),
          .offset = offset};
}

comm::Millis timeout_of(const SaveContext& c) { return comm::Millis(static_cast<int64_t>(c.timeout_s * 1e3)); }

// Every rank waits here for every other (no-op for one rank).
void barrier(const SaveContext& c, const std::string& name) {
  if (c.store && c.world > 1) comm::store_all_gather(*c.store, name, c.rank, c.world, {}, timeout_of(c), c.give_up);
}

}  // namespace

std::string prepare_checkpoint(const std::string& ckpt_dir, const SaveContext& c) {
  const std::string dir = checkpoint_step_dir(ckpt_dir, c.step);
  if (c.rank == 0) {
    fs::create_directories(dir);
    if (fs::remove(dir + "/" + kMarkerName)) fsync_dir(dir);  // incomplete until the new commit
  }
  barrier(c, fmt::format("ckpt/step-{}/begin", c.step));  // the loop saves each step once: unique keys
  if (c.rank != 0) fs::create_directories(dir);
  return dir;
}

namespace {

// The shard file write_checkpoint_shard writes: its name, size and pieces (params of the
// segments of every state, then exp_avg, then exp_avg_sq, after the header); crc32c 0.
CheckpointFile shard_file_of(const std::vector<Segment>& segs, const SaveContext& c) {
  CheckpointFile f{.name = shard_file_name(c.rank), .rank = c.rank, .bytes = kHeaderBytes, .crc32c = 0, .pieces = {}};
  for (TensorKind kind : {TensorKind::kParam, TensorKind::kExpAvg, TensorKind::kExpAvgSq})
    for (const auto& g : segs) {
      f.pieces.push_back(piece_of(g, kind, f.bytes));
      f.bytes += (g.end - g.begin) * sizeof(float);
    }
  return f;
}

// Where segment g's floats of `kind` are in its state.
const float* source_of(const Segment& g, TensorKind kind) {
  const ShardState& s = *g.s;
  return kind == TensorKind::kParam ? s.params + g.begin
         : kind == TensorKind::kExpAvg ? s.exp_avg + g.packed
                                       : s.exp_avg_sq + g.packed;
}

}  // namespace

ShardImage shard_image(std::span<const ShardState> states, const SaveContext& c) {
  const auto segs = segments_of(states);
  ShardImage img{shard_file_of(segs, c), {}};
  img.payload.resize((img.file.bytes - kHeaderBytes) / sizeof(float));
  size_t piece = 0;
  for (TensorKind kind : {TensorKind::kParam, TensorKind::kExpAvg, TensorKind::kExpAvgSq})
    for (const auto& g : segs)
      std::copy_n(source_of(g, kind), g.end - g.begin,
                  img.payload.data() + (img.file.pieces[piece++].offset - kHeaderBytes) / sizeof(float));
  img.file.crc32c = crc32c(img.payload.data(), img.payload.size() * sizeof(float));
  return img;
}

size_t image_floats(const CheckpointFile& f) {
  return f.bytes < kHeaderBytes ? 0 : static_cast<size_t>((f.bytes - kHeaderBytes) / sizeof(float));
}

bool image_intact(const ShardImage& img) {
  return img.payload.size() * sizeof(float) + kHeaderBytes == img.file.bytes &&
         crc32c(img.payload.data(), img.payload.size() * sizeof(float)) == img.file.crc32c;
}

std::string file_entry_text(const CheckpointFile& f) { return file_entry_json(f); }

CheckpointFile file_entry_of_text(const std::string& text, const std::string& what) {
  return parse_file_entry_text(text, what);
}

uint64_t checkpoint_bytes_of_rank(std::span<const ShardState> states, const SaveContext& c, uint64_t private_bytes) {
  const CheckpointFile f = shard_file_of(segments_of(states), c);
  uint64_t bytes = f.bytes + file_entry_json(f).size();
  if (private_bytes > 0) bytes += private_state_file_bytes(private_bytes);
  // Rank 0: the manifest around the entries (its ",\n    " separators included) and the marker.
  if (c.rank == 0)
    bytes += manifest_json(c, {}).size() + static_cast<uint64_t>(c.world) * 6 +
             fmt::format("step {}\n", c.step).size();
  return bytes;
}

// Writes rank-NNNNN.bin as shard_file_of lays it out.
CheckpointFile write_checkpoint_shard(const std::string& dir, std::span<const ShardState> states,
                                      const SaveContext& c) {
  const auto segs = segments_of(states);
  CheckpointFile f = shard_file_of(segs, c);
  DurableFile out(dir + "/" + f.name);
  char head[kHeaderBytes];
  encode_header({.format_version = kCheckpointFormatVersion, .rank = static_cast<uint32_t>(c.rank),
                       .world = static_cast<uint32_t>(c.world), .step = c.step, .payload_bytes = f.bytes - kHeaderBytes},
                      head);
  out.write(head, sizeof head);
  size_t piece = 0;
  for (TensorKind kind : {TensorKind::kParam, TensorKind::kExpAvg, TensorKind::kExpAvgSq}) {
    for (const auto& g : segs) {
      if (f.pieces[piece++].offset != out.bytes()) throw std::logic_error("checkpoint: shard layout mismatch");
      out.write(source_of(g, kind), (g.end - g.begin) * sizeof(float));
    }
  }
  out.commit();
  fsync_dir(dir);
  f.bytes = out.bytes();
  f.crc32c = out.crc();
  return f;
}

SaveResult commit_checkpoint(const std::string& ckpt_dir, const CheckpointFile& file, const SaveContext& c) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = checkpoint_step_dir(ckpt_dir, c.step), key = fmt::format("ckpt/step-{}", c.step);
  SaveResult r{.dir = dir, .seconds = 0, .bytes = file.bytes, .total_bytes = file.bytes};
  std::vector<std::string> entries{file_entry_json(file)};
  if (c.store && c.world > 1) {
    const comm::Bytes mine(entries[0].begin(), entries[0].end());
    entries.clear();
    for (const auto& b : comm::store_all_gather(*c.store, key + "/files", c.rank, c.world, mine, timeout_of(c), c.give_up))
      entries.emplace_back(b.begin(), b.end());
  }
  if (c.rank == 0) {
    r.total_bytes = 0;
    for (const auto& e : entries) r.total_bytes += std::stoull(e.substr(e.find("\"bytes\": ") + 9));
    write_text_durably(dir + "/" + kManifestName, manifest_json(c, entries));
    write_text_durably(dir + "/" + kMarkerName, fmt::format("step {}\n", c.step));
    if (c.keep > 0) prune_checkpoints(ckpt_dir, c.keep, c.run_id);
  }
  barrier(c, key + "/committed");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

SaveResult save_checkpoint(const std::string& ckpt_dir, std::span<const ShardState> states, const SaveContext& c) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = prepare_checkpoint(ckpt_dir, c);
  SaveResult r = commit_checkpoint(ckpt_dir, write_checkpoint_shard(dir, states, c), c);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace holmes::checkpoint
