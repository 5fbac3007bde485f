// Checkpoints: one folder per saved step, shard files per rank, a manifest, a commit marker.
//
//   <checkpoint.dir>/step-00001000/
//     rank-00000.bin ... rank-<world-1>.bin   raw little-endian floats after a 64-byte header
//     manifest.json                           written by rank 0 (format in docs/checkpoints.md)
//     COMMITTED                               written last, after every rank has finished
//
// A shard file holds PIECES: a contiguous element range [begin, end) of one named tensor's
// shard (row-major in its shard shape) of one kind (param, exp_avg, exp_avg_sq). The manifest
// indexes every piece with the tensor's full shape and its TP split, so a checkpoint saved
// under one plan (tp x pp x dp, partition) is reassembled into any other: a loading rank maps
// each piece element to its full-tensor index and from there into its own shard.
// Replicated tensors are saved by TP rank 0 only; a last stage's tied copy of wte is not
// saved (it equals wte and loads from it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/store.hpp"
#include "engine/checkpoint/shard_state.hpp"
#include "model/gpt_config.hpp"

namespace holmes::checkpoint {

inline constexpr int kCheckpointFormatVersion = 1;

enum class TensorKind { kParam, kExpAvg, kExpAvgSq };
const char* tensor_kind_name(TensorKind kind);  // "param", "exp_avg", "exp_avg_sq"

// One slice of one named tensor inside a shard file.
struct CheckpointPiece {
  std::string tensor;  // HF GPT-2 name with the global layer index ("h.3.mlp.c_fc.weight")
  TensorKind kind = TensorKind::kParam;
  std::vector<int64_t> full_shape;   // whole tensor (wte: padded vocabulary rows, (Vp, C))
  std::vector<int64_t> shard_shape;  // the saving rank's shard of it
  int split_dim = -1, split_parts = 1, tp_index = 0, tp_count = 1;  // model/param_layout.hpp
  int64_t begin = 0, end = 0;  // element range within the shard tensor
  uint64_t offset = 0;         // byte offset of element `begin` in the file
};

struct CheckpointFile {
  std::string name;  // "rank-00003.bin", relative to the checkpoint folder
  int rank = 0;
  uint64_t bytes = 0;   // whole file, header included
  uint32_t crc32c = 0;  // of the whole file
  std::vector<CheckpointPiece> pieces;
};

// The tokenizer the run's data was made with (engine/tokenizer): its hash, name and ids.
struct RunTokenizer {
  uint64_t hash = 0;  // 0 = none recorded
  std::string name;
  uint32_t ids = 0;
};

struct CheckpointInfo {
  std::string dir;  // the step-NNNNNNNN folder
  int64_t step = 0;  // optimizer steps done; training continues at this 0-based step
  int format_version = 0;
  model::GptConfig model;  // global: tp = 1, one stage, padded_vocab as saved (finalized)
  int64_t tokens_seen = 0;
  uint64_t seed = 0;  // job.seed: batches are a pure function of (seed, stream position)
  // The loader's position: sequences of data_seq_len tokens the run had read from its stream
  // (engine/data/mixture.hpp); -1 in manifests written before it was recorded.
  int64_t data_sequences = -1;
  int data_seq_len = 0;
  int world = 1;      // ranks that saved it
  std::string run_id;  // the run that saved it (run_folder.hpp); "" = saved before runs had ids
  std::string job_spec_text, plan_text;
  uint64_t plan_hash = 0;
  RunTokenizer tokenizer;  // hash 0: not recorded (synthetic-free old runs, llm.c data)
  std::string precision;   // SaveContext::precision; "" when not recorded (older checkpoints)
  std::vector<CheckpointFile> files;
};

// Reads and checks <dir>/manifest.json and the COMMITTED marker, every file's size and
// (verify_checksums) its CRC32C and header. Throws holmes::UserError naming the file and what
// is wrong: missing marker, unreadable or malformed manifest, a future format version, a
// truncated, oversized or corrupted shard file.
CheckpointInfo open_checkpoint(const std::string& dir, bool verify_checksums = true);

// Size, header and (verify_checksum) CRC32C of one shard file against the manifest; what
// open_checkpoint does for every file. UserError naming the file and the problem.
void verify_checkpoint_file(const CheckpointInfo& info, const CheckpointFile& file, bool verify_checksum = true);

// The whole tensor `name` (full shape, row-major; wte with its padded vocabulary rows),
// reassembled from its slices. Throws UserError when the checkpoint does not hold all of it.
std::vector<float> read_full_tensor(const CheckpointInfo& info, const std::string& name,
                                    TensorKind kind = TensorKind::kParam);

// The newest complete checkpoint folder (step-* with a COMMITTED marker) under ckpt_dir;
// nullopt when there is none. Incomplete folders newer than it go to *skipped.
std::optional<std::string> find_latest_checkpoint(const std::string& ckpt_dir,
                                                  std::vector<std::string>* skipped = nullptr);

// The step-NNNNNNNN folders under ckpt_dir, newest first, with whether each is complete and
// the run that wrote it (read from its manifest without parsing the tensor index; "" when
// the manifest is missing or predates run ids).
struct StepFolder {
  int64_t step = 0;
  std::string path;
  bool complete = false;
  std::string run_id;
};
std::vector<StepFolder> list_step_folders(const std::string& ckpt_dir);

// What a path given as a checkpoint turned out to be, resolved to one complete step folder:
// the folder itself, a checkpoint.dir (its newest complete step) or a run's output folder
// (the newest complete step of <path>/checkpoints). `skipped` lists incomplete step folders
// newer than the one taken.
struct LocatedCheckpoint {
  std::string dir;
  std::string via;  // "" for a step folder, else how it was found ("the newest complete checkpoint in X")
  std::vector<std::string> skipped;
};
// nullopt when `path` is none of these; describe_checkpoint_path then says what it is.
std::optional<LocatedCheckpoint> locate_checkpoint(const std::string& path);
// What `path` holds, for an error message after "<path>: ": "checkpoint folder does not
// exist", "a file of 1234 bytes, not a checkpoint folder", "only incomplete checkpoints in
// DIR ...", "a folder of 3 entries (a, b, c) without a checkpoint", ...
std::string describe_checkpoint_path(const std::string& path);

// "<ckpt_dir>/step-00001000".
std::string checkpoint_step_dir(const std::string& ckpt_dir, int64_t step);

// Fills `state` (every param of the shard; with_optimizer: the moments of its owned ranges)
// from the checkpoint, whatever plan saved it. Throws UserError when the checkpoint's model
// shape differs from `job_model` (the job's global GptConfig) or lacks a slice the shard needs.
void load_shard_state(const CheckpointInfo& info, const model::GptConfig& job_model, ShardState& state,
                      bool with_optimizer);
// The same for every model chunk of a rank (interleaved: V states, each with its own layout and
// owned ranges) in one pass over the files: a piece goes to every state whose layout names its
// tensor, and each state must come out complete. Whether the saving plan had one chunk per rank
// or several does not matter (pieces are keyed by tensor name).
void load_shard_states(const CheckpointInfo& info, const model::GptConfig& job_model, std::span<ShardState> states,
                       bool with_optimizer);

// ---- A shard held in memory instead of a file (engine/train/peer_copies.hpp) ----

// The payload of the shard file write_checkpoint_shard would write for the same states and
// context (every piece's floats; piece p's at (p.offset - 64) / 4), with its file entry.
// file.crc32c is the CRC32C of the payload alone (a file's covers its header too).
struct ShardImage {
  CheckpointFile file;
  std::vector<float> payload;
};

// The floats of the payload of file f's image (its bytes less the header).
size_t image_floats(const CheckpointFile& f);

// Whether the payload still has the CRC32C its file entry records (a copy that travelled).
bool image_intact(const ShardImage& image);

// Reads piece p of file f: its (end - begin) floats, wherever the shard is held.
using PieceReader = std::function<std::vector<float>(const CheckpointFile& f, const CheckpointPiece& p)>;

// A reader over images held in memory, found by the rank that saved them (CheckpointFile::rank).
// std::runtime_error for a rank it does not hold or a piece outside the image.
PieceReader image_reader(std::shared_ptr<const std::map<int, ShardImage>> images);

// Indices into info.files of the files load_shard_states would read a piece of for `states`.
std::vector<size_t> files_to_read(const CheckpointInfo& info, std::span<const ShardState> states, bool with_optimizer);

// load_shard_states reading every piece through `read` instead of info.dir's files (info.dir
// then names the source in messages).
void load_shard_states(const CheckpointInfo& info, const model::GptConfig& job_model, std::span<ShardState> states,
                       bool with_optimizer, const PieceReader& read);

// A "files" entry of the manifest as text, and back (UserError naming `what` when malformed).
std::string file_entry_text(const CheckpointFile& f);
CheckpointFile file_entry_of_text(const std::string& text, const std::string& what);

// What the saving rank knows besides its shard.
struct SaveContext {
  int rank = 0, world = 1;
  comm::Store* store = nullptr;  // gathers shard indexes on rank 0 and orders the commit; null = 1 rank
  int64_t step = 0;              // steps done
  int64_t tokens_seen = 0;
  uint64_t seed = 0;
  int64_t data_sequences = -1;   // the loader's position (CheckpointInfo); -1 = not recorded
  int data_seq_len = 0;
  model::GptConfig model;  // global model (tp = 1, one stage)
  std::string run_id;      // the run saving it (run_folder.hpp); retention only touches its checkpoints
  std::string job_spec_text, plan_text;
  uint64_t plan_hash = 0;
  RunTokenizer tokenizer;
  // The numerics the run trained in (StepRunner::precision_record): "fp32", "bf16", or "fp8"
  // with its recipe. A record only: master weights and moments are fp32 in all, so any run
  // resumes any of them. "" writes none.
  std::string precision;
  int keep = 0;  // > 0: rank 0 keeps the newest `keep` complete checkpoints of run_id after the commit
  double timeout_s = 3600;  // longest wait for the other ranks (a dead rank must not hang the job)
  // Asked while the prepare or the commit waits for ranks (numbered as `rank`): a reason why
  // one of them will not come ends the wait (comm::StoreWaitAbandoned) instead of the time-out.
  // Empty: the waits last up to timeout_s.
  comm::StoreGiveUp give_up;
};

struct SaveResult {
  std::string dir;
  double seconds = 0;        // from the call to the commit (save_checkpoint) / of the commit
  uint64_t bytes = 0;        // this rank's shard file
  uint64_t total_bytes = 0;  // all ranks (rank 0 only; else = bytes)
};

// Collective over the SaveContext's ranks: each writes its shard file (temporary name, fsync,
// rename), rank 0 writes the manifest and, once every rank has finished, the commit marker,
// then prunes older checkpoints. A crash at any point leaves the previous checkpoint usable.
// Equals prepare_checkpoint + write_checkpoint_shard + commit_checkpoint.
// A rank holding several model chunks (interleaved) passes one state per chunk: all of them go
// into its one shard file.
SaveResult save_checkpoint(const std::string& ckpt_dir, std::span<const ShardState> states, const SaveContext& ctx);
inline SaveResult save_checkpoint(const std::string& ckpt_dir, const ShardState& state, const SaveContext& ctx) {
  return save_checkpoint(ckpt_dir, std::span<const ShardState>(&state, 1), ctx);
}

// The image of this rank's shard file (ShardImage), built in memory: no file is written.
ShardImage shard_image(std::span<const ShardState> states, const SaveContext& ctx);

// The phases of save_checkpoint, so that the shard can be written while training goes on.
// prepare (collective): creates the step folder; returns it. A committed folder of the same
// step (saved again after resuming from an older checkpoint) loses its marker first.
std::string prepare_checkpoint(const std::string& ckpt_dir, const SaveContext& ctx);
// Local, any thread: writes this rank's shard file (the pieces of every state) into the step folder.
CheckpointFile write_checkpoint_shard(const std::string& step_dir, std::span<const ShardState> states,
                                      const SaveContext& ctx);
inline CheckpointFile write_checkpoint_shard(const std::string& step_dir, const ShardState& state,
                                             const SaveContext& ctx) {
  return write_checkpoint_shard(step_dir, std::span<const ShardState>(&state, 1), ctx);
}
// What this rank adds to a checkpoint folder, computed without writing: its shard file (header
// and pieces exactly as write_checkpoint_shard lays them out), its private file
// (`private_bytes` > 0: StepRunner::private_state's size), its entry in the manifest and, on
// rank 0, the rest of the manifest and the commit marker. Summed over the ranks: the folder's
// size (the manifest's crc32c digits and step digits aside); a test ties it to a saved one.
uint64_t checkpoint_bytes_of_rank(std::span<const ShardState> states, const SaveContext& ctx,
                                  uint64_t private_bytes = 0);
// Collective, after every rank's write: manifest, commit marker, pruning (rank 0).
SaveResult commit_checkpoint(const std::string& ckpt_dir, const CheckpointFile& file, const SaveContext& ctx);

}  // namespace holmes::checkpoint
