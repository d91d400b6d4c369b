/* Start and stop callgrind's counting from Python (ctypes): the measured requests only, not start-up. */
#include <valgrind/callgrind.h>

void tenk_measure_start(void) {
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
}

void tenk_measure_stop(void) {
    CALLGRIND_DUMP_STATS_AT("tenk-measured");
    CALLGRIND_STOP_INSTRUMENTATION;
}
