// ragtor's CAF scheduler: CAF 0.17.6's work-stealing coordinator with a
// different actor clock, and a sleeping worker woken after its lock is
// released rather than under it (scheduler.cpp, stealing_policy).
//
// CAF's clock (thread_safe_actor_clock) hands every timer operation to its
// thread through a 64-slot ring buffer: each request's timeout, each
// cancellation and each delayed message is an allocated event that wakes
// the clock thread, and a worker that finds the buffer full waits until
// that thread, which on two busy cores may not run for milliseconds,
// drains it. A turn makes a dozen requests, so a burst of turns woke the
// clock thread thousands of times and stalled workers behind it.
//
// The clock here keeps the same schedule (CAF's simple_actor_clock) under a
// mutex: an operation takes the lock and changes the schedule in place, and
// wakes the clock thread only when it made the earliest deadline earlier.
// The thread sleeps until the earliest deadline and ships what is due, as
// CAF's does. The same timeouts fire, at the same instants.
#pragma once

#include <cstdint>

#include <caf/fwd.hpp>

namespace ragtor {

// Makes the actor system built from `cfg` use ragtor's scheduler.
void use_ragtor_scheduler(caf::actor_system_config& cfg);

// Timer operations the running system's clock handled since it started, how
// many of them woke its thread, and the entries it holds now (/metrics:
// ragtor_actor_clock_*; all 0 when the system does not run ragtor's
// scheduler).
struct clock_counts {
  uint64_t operations = 0;
  uint64_t wakeups = 0;
  uint64_t pending = 0;  // timeouts and delayed messages not yet due
};
clock_counts clock_counts_of(caf::actor_system& sys);

}  // namespace ragtor
