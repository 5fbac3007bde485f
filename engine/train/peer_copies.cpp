// Peer copies of the shards at checkpoint steps, and the re-plan's restore from them (peer_copies.hpp).
#include "engine/train/peer_copies.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace holmes::train {

namespace {

comm::Bytes bytes_of(const std::string& s) { return comm::Bytes(s.begin(), s.end()); }
std::string text_of(const comm::Bytes& b) { return std::string(b.begin(), b.end()); }

comm::Millis millis(double s) { return comm::Millis(static_cast<int64_t>(s * 1e3)); }

std::string mirror_key(int64_t step, int rank) { return fmt::format("mirror/{}/{}", step, rank); }
std::string step_name(int generation, int64_t step) { return fmt::format("{}-{}", generation, step); }

// A transfer's tag: one per shard (send_recv matches peer and tag).
uint32_t tag_of(int rank) { return 0x50000000u + static_cast<uint32_t>(rank); }

void check_intact(const checkpoint::ShardImage& img, int from, const char* what) {
  if (!checkpoint::image_intact(img))
    throw std::runtime_error(fmt::format("{}: the copy of rank {}'s shard from rank {} does not have the CRC32C it was "
                                         "sent with ({:08x}): corrupted in transit", what, img.file.rank, from,
                                         img.file.crc32c));
}

}  // namespace

int buddy_of(const plan::Plan& plan, int rank) {
  std::map<int, std::vector<std::pair<int, int>>> by_node;  // node -> (local rank, rank)
  for (const plan::RankInfo& r : plan.ranks) by_node[r.node].push_back({r.local_rank, r.rank});
  if (by_node.size() < 2) return -1;
  for (auto& [node, ranks] : by_node) std::sort(ranks.begin(), ranks.end());
  const plan::RankInfo& me = plan.ranks.at(rank);
  // The ring: the nodes of this node's island when it has two or more (the copies stay on the
  // island's fast links), else every node of the plan.
  std::vector<int> ring;
  for (const plan::IslandInfo& island : plan.islands)
    if (std::find(island.nodes.begin(), island.nodes.end(), me.node) != island.nodes.end())
      for (int n : island.nodes)
        if (by_node.count(n) > 0) ring.push_back(n);
  if (ring.size() < 2) {
    ring.clear();
    for (const auto& [node, ranks] : by_node) ring.push_back(node);
  }
  const auto& mine = by_node.at(me.node);
  const size_t local = static_cast<size_t>(
      std::find_if(mine.begin(), mine.end(), [&](const auto& p) { return p.second == rank; }) - mine.begin());
  const size_t at = static_cast<size_t>(std::find(ring.begin(), ring.end(), me.node) - ring.begin());
  const auto& next = by_node.at(ring[(at + 1) % ring.size()]);
  return next.at(local % next.size()).second;
}

MirrorMeta MirrorMeta::of(const checkpoint::SaveContext& c, int generation) {
  MirrorMeta m;
  m.generation = generation;
  m.step = c.step;
  m.tokens_seen = c.tokens_seen;
  m.data_sequences = c.data_sequences;
  m.data_seq_len = c.data_seq_len;
  m.world = c.world;
  m.seed = c.seed;
  m.plan_hash = c.plan_hash;
  m.run_id = c.run_id;
  m.precision = c.precision;
  return m;
}

std::string MirrorMeta::text() const {
  return fmt::format("generation {}\nstep {}\ntokens_seen {}\ndata_sequences {}\ndata_seq_len {}\nworld {}\nseed {}\n"
                     "plan_hash {}\nrun_id {}\nprecision {}\n",
                     generation, step, tokens_seen, data_sequences, data_seq_len, world, seed, plan_hash, run_id,
                     precision);
}

MirrorMeta MirrorMeta::parse(const std::string& text) {
  MirrorMeta m;
  std::istringstream in(text);
  std::string line;
  int seen = 0;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : line.substr(sp + 1);
    try {
      if (key == "generation") m.generation = std::stoi(value);
      else if (key == "step") m.step = std::stoll(value);
      else if (key == "tokens_seen") m.tokens_seen = std::stoll(value);
      else if (key == "data_sequences") m.data_sequences = std::stoll(value);
      else if (key == "data_seq_len") m.data_seq_len = std::stoi(value);
      else if (key == "world") m.world = std::stoi(value);
      else if (key == "seed") m.seed = std::stoull(value);
      else if (key == "plan_hash") m.plan_hash = std::stoull(value);
      else if (key == "run_id") m.run_id = value;
      else if (key == "precision") m.precision = value;
      else continue;
    } catch (const std::exception&) {
      throw std::runtime_error(fmt::format("peer copies: malformed record line '{}'", line));
    }
    ++seen;
  }
  if (seen != 10) throw std::runtime_error(fmt::format("peer copies: a record of {} keys, expected 10", seen));
  return m;
}

PeerCopies::PeerCopies(const plan::Plan& plan, int rank, int generation, std::shared_ptr<comm::Store> store,
                       comm::ProcessGroup* group)
    : rank_(rank), generation_(generation), buddy_(buddy_of(plan, rank)), store_(std::move(store)), group_(group) {
  for (const plan::RankInfo& r : plan.ranks)
    if (r.rank != rank && buddy_of(plan, r.rank) == rank) wards_.push_back(r.rank);
}

void PeerCopies::mirror(std::span<const checkpoint::ShardState> states, const checkpoint::SaveContext& ctx) {
  checkpoint::ShardImage own = checkpoint::shard_image(states, ctx);
  auto images = std::make_shared<std::map<int, checkpoint::ShardImage>>();
  if (buddy_ >= 0 && group_ != nullptr) {
    if (published_ >= 0) store_->remove(mirror_key(published_, rank_));
    comm::set_string(*store_, mirror_key(ctx.step, rank_), checkpoint::file_entry_text(own.file));
    published_ = ctx.step;
    std::vector<comm::P2POp> ops{{comm::P2POp::kSend, std::span<float>(own.payload), buddy_, tag_of(rank_)}};
    for (int w : wards_) {
      const std::string key = mirror_key(ctx.step, w);
      checkpoint::CheckpointFile f = checkpoint::file_entry_of_text(
          comm::get_string(*store_, key, group_->default_timeout()), "peer copies: " + key);
      checkpoint::ShardImage& in = (*images)[w];
      in.payload.resize(checkpoint::image_floats(f));
      in.file = std::move(f);
    }
    for (int w : wards_) ops.push_back({comm::P2POp::kRecv, std::span<float>((*images)[w].payload), w, tag_of(w)});
    group_->send_recv(ops);
    for (int w : wards_) check_intact(images->at(w), w, "peer copies");
  }
  (*images)[rank_] = std::move(own);
  held_ = HeldCopies{MirrorMeta::of(ctx, generation_), rank_, std::move(images)};
}

std::optional<PeerSource> peer_source(const std::optional<HeldCopies>& mine, int64_t disk_step,
                                      const model::GptConfig& model, comm::Store& store, comm::ProcessGroup& group,
                                      int rank, int world, double timeout_s) {
  // 1. What every survivor holds, and the newest checkpoint each sees in the folder.
  std::string held = fmt::format("disk {}\n", disk_step);
  if (mine) {
    const std::string name = step_name(mine->meta.generation, mine->meta.step);
    comm::set_string(store, "peer/meta/" + name, mine->meta.text());
    for (const auto& [o, img] : *mine->images) {
      comm::set_string(store, fmt::format("peer/index/{}/{}", name, o), checkpoint::file_entry_text(img.file));
      held += fmt::format("{} {} {} {}\n", mine->meta.generation, mine->meta.step, o, o == mine->own_rank ? 1 : 0);
    }
  }
  const auto all = comm::store_all_gather(store, "peer/held", rank, world, bytes_of(held), millis(timeout_s));
  // 2. Per (step, generation): each shard's holder, the rank whose own shard it is first,
  //    then the lowest rank.
  int64_t disk = -1;
  struct Holder {
    int rank = -1;
    bool own = false;
  };
  std::map<std::pair<int64_t, int>, std::map<int, Holder>> copies;
  for (int j = 0; j < world; ++j) {
    std::istringstream in(text_of(all[static_cast<size_t>(j)]));
    std::string first;
    while (in >> first) {
      if (first == "disk") {
        int64_t d = -1;
        in >> d;
        disk = std::max(disk, d);
        continue;
      }
      int64_t step = 0;
      int o = 0, own = 0;
      in >> step >> o >> own;
      Holder& h = copies[{step, std::stoi(first)}][o];
      if (h.rank < 0 || (own && !h.own)) h = {j, own != 0};
    }
  }
  // 3. The newest step held whole.
  for (auto it = copies.rbegin(); it != copies.rend(); ++it) {
    const auto [step, generation] = it->first;
    if (step < disk) break;
    const std::string name = step_name(generation, step);
    const MirrorMeta meta = MirrorMeta::parse(comm::get_string(store, "peer/meta/" + name, millis(timeout_s)));
    bool whole = true;
    for (int o = 0; o < meta.world && whole; ++o) whole = it->second.count(o) > 0;
    if (!whole) continue;
    PeerSource src;
    checkpoint::CheckpointInfo& info = src.info;
    info.dir = fmt::format("the peer copies of step {}", step);
    info.step = step;
    info.format_version = checkpoint::kCheckpointFormatVersion;
    info.model = model;
    info.tokens_seen = meta.tokens_seen;
    info.seed = meta.seed;
    info.data_sequences = meta.data_sequences;
    info.data_seq_len = meta.data_seq_len;
    info.world = meta.world;
    info.run_id = meta.run_id;
    info.plan_hash = meta.plan_hash;
    info.precision = meta.precision;
    for (int o = 0; o < meta.world; ++o) {
      const std::string key = fmt::format("peer/index/{}/{}", name, o);
      info.files.push_back(checkpoint::file_entry_of_text(comm::get_string(store, key, millis(timeout_s)),
                                                          "peer copies: " + key));
      src.holder[o] = it->second.at(o).rank;
    }
    src.fetch = [mine, files = info.files, holder = src.holder, &store, &group, rank, world,
                 timeout_s](const std::vector<size_t>& wanted) -> checkpoint::PieceReader {
      std::string want;
      for (size_t i : wanted) want += fmt::format("{}\n", files.at(i).rank);
      const auto wants = comm::store_all_gather(store, "peer/want", rank, world, bytes_of(want), millis(timeout_s));
      auto received = std::make_shared<std::map<int, checkpoint::ShardImage>>();
      std::vector<comm::P2POp> ops;
      for (int j = 0; j < world; ++j) {
        std::istringstream in(text_of(wants[static_cast<size_t>(j)]));
        for (int o; in >> o;) {
          const int from = holder.at(o);
          if (j == rank && from != rank) {
            checkpoint::ShardImage& img = (*received)[o];
            img.file = files.at(static_cast<size_t>(o));
            img.payload.resize(checkpoint::image_floats(img.file));
          } else if (j != rank && from == rank) {
            ops.push_back({comm::P2POp::kSend, std::span<float>(mine->images->at(o).payload), j, tag_of(o)});
          }
        }
      }
      for (auto& [o, img] : *received) ops.push_back({comm::P2POp::kRecv, std::span<float>(img.payload), holder.at(o), tag_of(o)});
      group.send_recv(ops);
      for (const auto& [o, img] : *received) check_intact(img, holder.at(o), "re-plan");
      const checkpoint::PieceReader from_peers = checkpoint::image_reader(received);
      const checkpoint::PieceReader held =
          mine ? checkpoint::image_reader(mine->images) : checkpoint::PieceReader{};
      return [received, from_peers, held](const checkpoint::CheckpointFile& f, const checkpoint::CheckpointPiece& p) {
        return received->count(f.rank) > 0 || !held ? from_peers(f, p) : held(f, p);
      };
    };
    return src;
  }
  return std::nullopt;
}

}  // namespace holmes::train
