// The process's heap as glibc reports it, for /metrics. mallinfo2 walks
// every arena under its lock (1.9-3.5 ms with 1,000 streams open), so it
// runs in a detached actor of its own, never on an HTTP I/O thread or a
// worker of the scheduler. Its status answers {"in_use":B,"free":B}:
// bytes allocated and not freed (mmapped blocks included), and bytes
// freed but kept by the allocator.
#pragma once

#include <caf/fwd.hpp>

#include "protocol/actors.hpp"

namespace ragtor::http {

status_api spawn_heap_sampler(caf::actor_system& sys);

}  // namespace ragtor::http
