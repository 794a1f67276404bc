// launch.cu — the launch counter behind tw_launch_count (kernels.h).
//
// LAUNCH (common.cuh) calls tw_count_launch before every kernel launch. The
// count is per host thread, so that a caller that makes all of one op's
// launcher calls on one thread (engine/cuda locks its goroutine to its
// thread for each op) can attribute the launches between two reads to that
// op alone, whatever other threads launch meanwhile.
#include "common.cuh"
#include "kernels.h"

static thread_local int64_t launches;

extern "C" void tw_count_launch(void) { launches++; }

extern "C" int64_t tw_launch_count(void) { return launches; }
