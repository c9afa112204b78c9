/* sysinfo.h - the machine and build a result was measured on.
 *
 * Printed as a header before any result (as liboqs's speed_sig does) and written into
 * every JSON file, so a number never travels without its CPU, core count, governor,
 * compiler flags, library versions, the code path liboqs dispatches to, the tick
 * counter's rate and the load average (this suite often shares its cores).
 */
#ifndef QB_SYSINFO_H
#define QB_SYSINFO_H

#include <stdio.h>

#include "json.h"

typedef struct {
	char cpu_model[128];
	long cores_online;
	char governor[32];     /* "" when not readable (containers, VMs) */
	char cpu_flags[160];   /* the flags that matter here, space-separated */
	char kernel[160];
	char machine[80];
	char date_utc[32];
	double loadavg[3];     /* -1 when unavailable */
	double ticks_hz;
	int liboqs_avx2;       /* OQS_CPU_has_extension(AVX2) */
} qb_sysinfo;

void qb_sysinfo_collect(qb_sysinfo *s);
void qb_sysinfo_print(FILE *f, const qb_sysinfo *s);
void qb_sysinfo_json(qb_json *j, const char *key, const qb_sysinfo *s);

/* Current UTC time as ISO 8601 (buf >= 21 bytes). */
void qb_utc_now(char *buf, size_t len);
/* Load averages (1, 5, 15 min) as a JSON array; nulls when unavailable. */
void qb_loadavg_json(qb_json *j, const char *key);

#endif
