#include "comm/gloo_store.hpp"

namespace holmes::comm {

GlooStoreAdapter::GlooStoreAdapter(std::shared_ptr<holmes::comm::Store> store, Millis timeout)
    : store_(std::move(store)), timeout_(timeout) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) { store_->set(key, data); }

std::vector<char> GlooStoreAdapter::get(const std::string& key) { return store_->get(key, timeout_); }

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) { store_->wait(keys, timeout_); }

void GlooStoreAdapter::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  // Gloo passes its context time-out; a zero or negative one means "none" there, which we
  // never allow: fall back to ours.
  store_->wait(keys, timeout.count() > 0 ? timeout : timeout_);
}

}  // namespace holmes::comm
