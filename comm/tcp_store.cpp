#include "comm/tcp_store.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "comm/errors.hpp"

namespace holmes::comm {

namespace {

// Wire protocol: request = op byte + fields; reply = status byte + fields.
enum Op : uint8_t { kHello = 1, kSet = 2, kGet = 3, kAdd = 4, kMissing = 5, kRemove = 6, kOnClose = 7 };
enum Status : uint8_t { kOk = 0, kNotFound = 1, kRefused = 2, kFailed = 3 };
constexpr const char* kMagic = "holmes-kv/1";

struct Conn {
  net::Fd fd;
  net::Bytes in;  // bytes received and not yet parsed into frames
  bool joined = false;
  std::vector<std::pair<std::string, net::Bytes>> on_close;  // set when the connection ends
};

using Map = std::unordered_map<std::string, net::Bytes>;

// Answers one request; returns false when the connection must be closed.
bool serve(Conn& c, const net::Bytes& frame, Map& kv, const std::string& token, net::Bytes& reply) {
  net::Reader r(frame);
  net::Writer w;
  uint8_t op = r.u8();
  if (!c.joined) {
    if (op != kHello || r.str() != kMagic) return false;  // not one of ours: drop silently
    std::string theirs = r.str();
    if (theirs != token) {
      reply = w.u8(kRefused)
                  .str(fmt::format("this store belongs to another job (its token fingerprint {}, yours {})",
                                   token_fingerprint(token), token_fingerprint(theirs)))
                  .take();
      return true;
    }
    c.joined = true;
    reply = w.u8(kOk).take();
    return true;
  }
  if (op == kSet) {
    std::string key = r.str();
    kv[key] = r.bytes();
    w.u8(kOk);
  } else if (op == kGet) {
    auto it = kv.find(r.str());
    if (it == kv.end()) w.u8(kNotFound);
    else w.u8(kOk).bytes(it->second);
  } else if (op == kAdd) {
    std::string key = r.str();
    int64_t delta = r.i64();
    int64_t value = 0;
    auto it = kv.find(key);
    if (it != kv.end()) {
      std::string text(it->second.begin(), it->second.end());
      char* end = nullptr;
      value = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0') {
        reply = w.u8(kFailed).str(fmt::format("add: key '{}' holds '{}', not an integer counter", key, text)).take();
        return true;
      }
    }
    value += delta;
    std::string text = std::to_string(value);
    kv[key] = net::Bytes(text.begin(), text.end());
    w.u8(kOk).i64(value);
  } else if (op == kMissing) {
    uint32_t n = r.u32();
    std::vector<std::string> left;
    for (uint32_t i = 0; i < n; ++i) {
      std::string k = r.str();
      if (!kv.count(k)) left.push_back(std::move(k));
    }
    w.u8(kOk).u32(static_cast<uint32_t>(left.size()));
    for (const auto& k : left) w.str(k);
  } else if (op == kRemove) {
    w.u8(kv.erase(r.str()) ? kOk : kNotFound);
  } else if (op == kOnClose) {
    std::string key = r.str();
    net::Bytes value = r.bytes();
    if (key.empty()) c.on_close.clear();
    else c.on_close.emplace_back(std::move(key), std::move(value));
    w.u8(kOk);
  } else {
    return false;
  }
  reply = w.take();
  return true;
}

// Reads what is available on `c`, answers every complete frame; false closes it.
bool pump(Conn& c, Map& kv, const std::string& token) {
  char buf[65536];
  ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  c.in.insert(c.in.end(), buf, buf + n);
  while (c.in.size() >= 4) {
    uint32_t len = net::Reader(c.in).u32();
    if (len > net::kMaxFrame) return false;
    if (c.in.size() < 4 + static_cast<size_t>(len)) break;
    net::Bytes frame(c.in.begin() + 4, c.in.begin() + 4 + len);
    c.in.erase(c.in.begin(), c.in.begin() + 4 + len);
    net::Bytes reply;
    try {
      if (!serve(c, frame, kv, token, reply)) return false;
      net::send_frame(c.fd.get(), reply, net::Clock::now() + std::chrono::seconds(10));
    } catch (const std::exception&) {
      return false;  // malformed request or a client that stopped reading
    }
    if (!c.joined) return false;  // refused: the reply told it why
  }
  return true;
}

}  // namespace

TcpStoreServer::TcpStoreServer(uint16_t port, std::string token) : token_(std::move(token)) {
  listen_ = net::listen_on(port);
  port_ = net::local_port(listen_.get());
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw StoreError("rendezvous store: cannot create a pipe");
  wake_read_ = net::Fd(p[0]);
  wake_write_ = net::Fd(p[1]);
  thread_ = std::thread([this] { run(); });
}

TcpStoreServer::~TcpStoreServer() {
  char c = 'x';
  [[maybe_unused]] auto rc = ::write(wake_write_.get(), &c, 1);
  if (thread_.joinable()) thread_.join();
}

void TcpStoreServer::run() {
  Map kv;
  std::map<int, Conn> conns;  // by fd
  for (;;) {
    std::vector<pollfd> fds{{wake_read_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}};
    for (auto& [fd, c] : conns) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    if (fds[1].revents & POLLIN) {
      int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        conns[fd].fd = net::Fd(fd);
        clients_.store(static_cast<int>(conns.size()));
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto it = conns.find(fds[i].fd);
      if (!pump(it->second, kv, token_)) {
        for (auto& [key, value] : it->second.on_close) kv[key] = std::move(value);
        conns.erase(it);
        clients_.store(static_cast<int>(conns.size()));
      }
    }
  }
}

std::shared_ptr<TcpStore> TcpStore::host(const TcpStoreOptions& options) {
  std::unique_ptr<TcpStoreServer> server;
  try {
    server = std::make_unique<TcpStoreServer>(options.port, options.token);
  } catch (const std::runtime_error& e) {
    throw StoreError(fmt::format("rank 0 cannot host the rendezvous store on port {}: {} (another job on this "
                                 "node may use it; set MASTER_PORT to a free port)",
                                 options.port, e.what()));
  }
  TcpStoreOptions o = options;
  o.host = "127.0.0.1";
  o.port = server->port();
  std::shared_ptr<TcpStore> store(new TcpStore(o));
  store->server_ = std::move(server);
  store->open();
  return store;
}

std::shared_ptr<TcpStore> TcpStore::connect(const TcpStoreOptions& options) {
  std::shared_ptr<TcpStore> store(new TcpStore(options));
  store->open();
  return store;
}

void TcpStore::open() {
  const auto deadline = net::Clock::now() + options_.timeout;
  std::string error;
  auto pause = Millis(10);
  for (;;) {
    fd_ = net::try_connect(options_.host, options_.port, error);
    if (fd_ || net::Clock::now() >= deadline) break;
    std::this_thread::sleep_for(pause);  // rank 0 may not be listening yet
    pause = std::min(pause * 2, Millis(500));
  }
  if (!fd_)
    throw StoreError(fmt::format("cannot reach the rendezvous store {} within {} ms (last error: {}); rank 0 "
                                 "hosts it: is it running, and are the address and port right?",
                                 describe(), options_.timeout.count(), error));
  net::Bytes reply = request(net::Writer().u8(kHello).str(kMagic).str(options_.token).take(), "join");
  net::Reader r(reply);
  if (r.u8() == kRefused)
    throw StoreError(fmt::format("rendezvous store {} refused to let this process join: {}. A stray or stale "
                                 "process of another job holds this address; use another MASTER_PORT or stop it",
                                 describe(), r.str()));
}

net::Bytes TcpStore::request(const net::Bytes& payload, const char* what) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto deadline = net::Clock::now() + options_.timeout;
  try {
    net::send_frame(fd_.get(), payload, deadline);
    return net::recv_frame(fd_.get(), deadline);
  } catch (const std::runtime_error& e) {
    throw StoreError(fmt::format("rendezvous store {}: {} failed: {} (rank 0 hosts the store; did it exit?)",
                                 describe(), what, e.what()));
  }
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  request(net::Writer().u8(kSet).str(key).bytes(value).take(), "set");
}

Bytes TcpStore::get(const std::string& key, Millis timeout) {
  wait({key}, timeout);
  net::Bytes reply = request(net::Writer().u8(kGet).str(key).take(), "get");
  net::Reader r(reply);
  if (r.u8() != kOk) throw StoreError(fmt::format("rendezvous store {}: key '{}' vanished", describe(), key));
  return r.bytes();
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  net::Bytes reply = request(net::Writer().u8(kAdd).str(key).i64(delta).take(), "add");
  net::Reader r(reply);
  if (r.u8() == kFailed) throw StoreError(fmt::format("rendezvous store {}: {}", describe(), r.str()));
  return r.i64();
}

std::vector<std::string> TcpStore::missing(const std::vector<std::string>& keys) {
  net::Writer w;
  w.u8(kMissing).u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
  net::Bytes reply = request(w.take(), "wait");
  net::Reader r(reply);
  r.u8();
  std::vector<std::string> left(r.u32());
  for (auto& k : left) k = r.str();
  return left;
}

bool TcpStore::on_close(const std::string& key, const Bytes& value) {
  request(net::Writer().u8(kOnClose).str(key).bytes(value).take(), "on_close");
  return true;
}

bool TcpStore::remove(const std::string& key) {
  net::Bytes reply = request(net::Writer().u8(kRemove).str(key).take(), "remove");
  return net::Reader(reply).u8() == kOk;
}

std::string TcpStore::describe() const { return fmt::format("tcp://{}:{}", options_.host, options_.port); }

}  // namespace holmes::comm
