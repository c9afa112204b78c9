/* timing.h - the two clocks every benchmark reads.
 *
 * Wall time comes from CLOCK_MONOTONIC, read once per batch of operations (never per
 * call: a clock read costs tens of nanoseconds, which is noise we do not want in a
 * 20 us verification). Alongside it we read the CPU's free-running counter: RDTSC on
 * x86, CNTVCT_EL0 on AArch64. On every CPU made in the last fifteen years that counter
 * ticks at a FIXED reference rate, not at the core's current clock, so we call its
 * readings "TSC ticks" and never "cycles"; its rate is measured against
 * CLOCK_MONOTONIC at start-up and recorded next to every result.
 *
 * This module must not allocate and must stay usable from any thread.
 */
#ifndef QB_TIMING_H
#define QB_TIMING_H

#include <stdbool.h>
#include <stdint.h>

/* Seconds on CLOCK_MONOTONIC (arbitrary origin). */
double qb_now_s(void);

/* True when this build can read a tick counter (x86 TSC or AArch64 CNTVCT). */
bool qb_ticks_available(void);

/* Current tick-counter value; 0 when unavailable. */
uint64_t qb_ticks(void);

/* Name of the counter read by qb_ticks(): "rdtsc", "cntvct_el0" or "none". */
const char *qb_ticks_source(void);

/* Tick rate in Hz measured against CLOCK_MONOTONIC (cached after the first call);
 * 0 when unavailable. */
double qb_ticks_hz(void);

/* Sleep for the given number of seconds (used by the multicore timer thread). */
void qb_sleep_s(double seconds);

#endif
