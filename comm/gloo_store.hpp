// Lets Gloo's rendezvous (gloo::rendezvous::Context::connectFullMesh) run over our Store.
// Debian's libgloo has no TCP store of its own, so every Gloo context of the job connects
// through this adapter, usually over a PrefixStore per group.
#pragma once

#include <gloo/rendezvous/store.h>

#include <memory>

#include "comm/store.hpp"

namespace holmes::comm {

class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  // `timeout` bounds get() and the wait() overload Gloo calls without a time-out.
  GlooStoreAdapter(std::shared_ptr<holmes::comm::Store> store, Millis timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<holmes::comm::Store> store_;
  Millis timeout_;
};

}  // namespace holmes::comm
