// Counts heap allocations made through operator new in this test program (alloc_counter.cc
// replaces the global operators), to show that a session runs without allocating.
#pragma once

namespace alloc_counter {
long count();
}
