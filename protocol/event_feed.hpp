// A turn's events handed over inside one process. When the subscriber of a
// turn (the HTTP connection's sink actor) lives in the same process as the
// turn's stream actor, the stream gives each batch straight to the
// connection's channel through the sink's registered feed instead of
// messaging the sink: one actor message and one scheduling fewer per
// batch, which with a slow model is one per token. A subscriber on another
// node has no feed here and gets its batches as messages (atom::events).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include <caf/fwd.hpp>

#include "protocol/messages.hpp"

namespace ragtor {

class event_feed {
 public:
  virtual ~event_feed() = default;

  // Called on the stream actor's thread, batches in order; false when the
  // reader has gone (the batch is dropped, as a message to a sink that
  // quit would be).
  virtual bool deliver(std::vector<stream_event>&& batch) = 0;

  // Delivers `batch`, marking got_done first when it holds `done`: what
  // the stream and the sink (for batches from another node) both call.
  bool hand_over(std::vector<stream_event>&& batch) {
    if (!batch.empty() && batch.back().kind == event_kind::done)
      got_done = true;
    return deliver(std::move(batch));
  }

  // Set before the batch holding `done` is delivered: a sink that sees its
  // turn end without it ends the client's stream itself.
  std::atomic<bool> got_done{false};
};

// The feed of a local sink actor, registered while its connection follows
// a turn. Keyed by the actor's control block, which stays put while the
// actor lives (its handle in the registering code keeps it alive).
void register_local_feed(const caf::actor_control_block* sink, std::shared_ptr<event_feed> feed);
void unregister_local_feed(const caf::actor_control_block* sink);
// The feed of `sink`, or null when it has none (e.g. a proxy of a remote
// actor).
std::shared_ptr<event_feed> find_local_feed(const caf::actor_control_block* sink);

}  // namespace ragtor
