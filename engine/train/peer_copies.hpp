// Peer copies for a single pipeline that re-plans on its survivors (parallel.elastic with one
// replica; docs/elastic.md "A single pipeline that loses a node").
//
// At every checkpoint step each rank keeps, in host memory, the image of the shard file it
// writes (checkpoint::shard_image: its params and owned AdamW moments, the same pieces and
// bytes) and sends it to its *buddy*, a rank on another node (of its island where it can),
// which keeps it too. After a loss the survivors hold every rank's shard of that step unless a
// node and the node its copy went to were both lost; they then reshard from those copies, moving each piece over the network
// to the rank of the new plan that needs it, and the checkpoint folder (which for a job across
// sites may sit across the slow link) is not read. Where the copies are incomplete, or the
// folder holds a newer complete checkpoint, the survivors read the folder as before.
//
// Store keys (under the generation's store):
//   mirror/<step>/<rank>      the rank's shard file entry (checkpoint::file_entry_text) while
//                             its buddy receives it; removed at the rank's next mirror
//   peer/index/<G>-<step>/<old>   after a re-plan: the file entry of a shard some survivor
//                                 holds, mirrored by generation G at that step
//   peer/meta/<G>-<step>      the saving context of that step (MirrorMeta::text)
//   peer/held/<rank>, peer/want/<rank>   all-gathers of what each survivor holds and needs
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "comm/store.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "engine/plan/plan.hpp"

namespace holmes::train {

// The buddy of `rank`: the rank at the same local index (modulo that node's ranks) on the next
// node of its island, the island's nodes in a ring, so that the copy travels on the island's
// links; on the next node of the plan (all nodes in a ring) when its island has one node. -1
// when the plan has one node.
int buddy_of(const plan::Plan& plan, int rank);

// What a checkpoint's manifest records besides the files, for a step held as peer copies.
struct MirrorMeta {
  int generation = 0;  // of the ranks that mirrored it (their numbering names the shards)
  int64_t step = 0, tokens_seen = 0, data_sequences = -1;
  int data_seq_len = 0, world = 1;
  uint64_t seed = 0, plan_hash = 0;
  std::string run_id, precision;
  static MirrorMeta of(const checkpoint::SaveContext& c, int generation);
  std::string text() const;  // one "key value" per line
  static MirrorMeta parse(const std::string& text);  // std::runtime_error when malformed
};

// The copies one rank holds: its own shard and those of the ranks whose buddy it is, all of
// one step (a mirror that fails half-way keeps the previous step's).
struct HeldCopies {
  MirrorMeta meta;
  int own_rank = -1;  // this rank's number in the generation that mirrored
  std::shared_ptr<std::map<int, checkpoint::ShardImage>> images;  // by that generation's rank
};

class PeerCopies {
 public:
  // `group`: every rank of the generation, group rank = rank (a group of its own: the loop's
  // world group may be in use by a background reduction). `store`: the generation's store.
  PeerCopies(const plan::Plan& plan, int rank, int generation, std::shared_ptr<comm::Store> store,
             comm::ProcessGroup* group);

  // Collective over the group, at a checkpoint step: keeps this rank's image of `states`,
  // sends it to the buddy and receives the images of the ranks whose buddy this is. On a
  // failure (CommError, StoreError) the copies held before stay as they were. A transfer that
  // arrives with another CRC32C than its sender's is a std::runtime_error.
  void mirror(std::span<const checkpoint::ShardState> states, const checkpoint::SaveContext& ctx);

  // What this rank holds; nullopt before the first mirror.
  const std::optional<HeldCopies>& held() const { return held_; }
  int buddy() const { return buddy_; }
  const std::vector<int>& wards() const { return wards_; }  // the ranks whose buddy this is

 private:
  int rank_, generation_, buddy_;
  std::vector<int> wards_;
  std::shared_ptr<comm::Store> store_;
  comm::ProcessGroup* group_;
  std::optional<HeldCopies> held_;
  int64_t published_ = -1;  // the step of this rank's mirror/<step>/<rank> key
};

// Where the survivors of a re-plan take their state from: the peer copies of one step, every
// shard held by some survivor.
struct PeerSource {
  checkpoint::CheckpointInfo info;  // as a manifest of that step would read; dir names the source
  std::map<int, int> holder;        // old rank -> the survivor (new rank) that sends its shard
  // Collective over the new generation: every rank asks for the files (indices into
  // info.files) it needs (checkpoint::files_to_read), the holders send them; returns a reader
  // over what this rank then holds.
  std::function<checkpoint::PieceReader(const std::vector<size_t>& files)> fetch;
};

// Collective over the new generation (rank `rank` of `world`, its store and a group of every
// rank): every survivor says which copies it holds (`mine`, possibly none) and the newest
// checkpoint step in the folder it sees (`disk_step`, -1 for none). Returns the copies of the
// newest step of which the survivors hold every shard, when that step is not older than the
// folder's newest (the largest any survivor sees); nullopt otherwise: every rank decides the
// same. `model`: the job's global model (the manifest's).
std::optional<PeerSource> peer_source(const std::optional<HeldCopies>& mine, int64_t disk_step,
                                      const model::GptConfig& model, comm::Store& store, comm::ProcessGroup& group,
                                      int rank, int world, double timeout_s);

}  // namespace holmes::train
