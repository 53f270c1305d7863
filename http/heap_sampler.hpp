// glibc's heap figures for /metrics, read on a thread of their own:
// mallinfo2 walks every arena under its lock, 2-3.5 ms at 1,000 open
// streams, too long for an I/O thread that serves streams. Scrapes that
// come while a read is under way share its figures.
#pragma once

#include <functional>

namespace ragtor::http {

struct heap_figures {
  double in_use = 0;  // allocated and not freed (all arenas, mmapped blocks included)
  double free = 0;    // freed but kept by the allocator
};

// Calls `done` with fresh figures, on the sampler's thread.
void sample_heap(std::function<void(heap_figures)> done);

}  // namespace ragtor::http
