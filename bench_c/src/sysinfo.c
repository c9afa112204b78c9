/* sysinfo.c - see sysinfo.h. Linux first; other systems get "unknown" fields. */
#include "sysinfo.h"

#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <oqs/oqs.h>
#include <sodium.h>

#include "timing.h"

/* Set by the Makefile; the fallbacks keep a hand-built binary honest. */
#ifndef QB_BUILD_CFLAGS
#define QB_BUILD_CFLAGS "unknown"
#endif
#ifndef QB_SECP256K1_VERSION
#define QB_SECP256K1_VERSION "unknown"
#endif

/* CPU flags worth recording: the vector units liboqs dispatches on, the hash and AES
 * instructions, and whether the TSC is invariant (constant_tsc, nonstop_tsc) and we
 * run under a hypervisor (whose TSC may be emulated). */
static const char *const INTERESTING_FLAGS[] = {
	"avx2", "avx512f", "bmi2", "popcnt", "aes", "sha_ni", "constant_tsc", "nonstop_tsc", "hypervisor",
};

static void chomp(char *s) {
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ')) {
		s[--n] = '\0';
	}
}

static void read_first_line(const char *path, char *out, size_t len) {
	out[0] = '\0';
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		return;
	}
	if (fgets(out, (int) len, f) == NULL) {
		out[0] = '\0';
	}
	fclose(f);
	chomp(out);
}

static bool has_word(const char *list, const char *word) {
	size_t wl = strlen(word);
	for (const char *p = list; (p = strstr(p, word)) != NULL; p += wl) {
		bool start = p == list || p[-1] == ' ' || p[-1] == '\t';
		bool end = p[wl] == '\0' || p[wl] == ' ' || p[wl] == '\n';
		if (start && end) {
			return true;
		}
	}
	return false;
}

static void read_cpuinfo(qb_sysinfo *s) {
	strcpy(s->cpu_model, "unknown");
	s->cpu_flags[0] = '\0';
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f == NULL) {
		return;
	}
	char line[4096];
	bool have_model = false, have_flags = false;
	while (fgets(line, sizeof line, f) != NULL && !(have_model && have_flags)) {
		char *colon = strchr(line, ':');
		if (colon == NULL) {
			continue;
		}
		char *value = colon + 1;
		while (*value == ' ' || *value == '\t') {
			value++;
		}
		chomp(value);
		if (!have_model && strncmp(line, "model name", 10) == 0) {
			snprintf(s->cpu_model, sizeof s->cpu_model, "%s", value);
			have_model = true;
		} else if (!have_flags && (strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0)) {
			for (size_t i = 0; i < sizeof INTERESTING_FLAGS / sizeof INTERESTING_FLAGS[0]; i++) {
				if (has_word(value, INTERESTING_FLAGS[i])) {
					size_t used = strlen(s->cpu_flags);
					snprintf(s->cpu_flags + used, sizeof s->cpu_flags - used, "%s%s", used ? " " : "",
					         INTERESTING_FLAGS[i]);
				}
			}
			have_flags = true;
		}
	}
	fclose(f);
}

void qb_utc_now(char *buf, size_t len) {
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void read_loadavg(double out[3]) {
	out[0] = out[1] = out[2] = -1.0;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f == NULL) {
		return;
	}
	if (fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3) {
		out[0] = out[1] = out[2] = -1.0;
	}
	fclose(f);
}

static void write_loadavg(qb_json *j, const char *key, const double la[3]) {
	qb_json_array(j, key);
	for (int i = 0; i < 3; i++) {
		if (la[i] < 0) {
			qb_json_null(j, NULL);
		} else {
			qb_json_num(j, NULL, la[i]);
		}
	}
	qb_json_end(j);
}

void qb_loadavg_json(qb_json *j, const char *key) {
	double la[3];
	read_loadavg(la);
	write_loadavg(j, key, la);
}

void qb_sysinfo_collect(qb_sysinfo *s) {
	memset(s, 0, sizeof *s);
	read_cpuinfo(s);
	s->cores_online = sysconf(_SC_NPROCESSORS_ONLN);
	read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", s->governor, sizeof s->governor);
	struct utsname u;
	if (uname(&u) == 0) {
		snprintf(s->kernel, sizeof s->kernel, "%s %s", u.sysname, u.release);
		snprintf(s->machine, sizeof s->machine, "%s", u.machine);
	}
	qb_utc_now(s->date_utc, sizeof s->date_utc);
	read_loadavg(s->loadavg);
	s->ticks_hz = qb_ticks_hz();
	s->liboqs_avx2 = OQS_CPU_has_extension(OQS_CPU_EXT_AVX2);
}

void qb_sysinfo_print(FILE *f, const qb_sysinfo *s) {
	fprintf(f, "System\n======\n");
	fprintf(f, "CPU:              %s (%ld cores online)\n", s->cpu_model, s->cores_online);
	fprintf(f, "CPU flags:        %s\n", s->cpu_flags[0] ? s->cpu_flags : "(none of interest)");
	fprintf(f, "Governor:         %s\n", s->governor[0] ? s->governor : "(not readable)");
	fprintf(f, "Kernel:           %s %s\n", s->kernel, s->machine);
	fprintf(f, "Compiler:         %s, flags: %s\n", __VERSION__, QB_BUILD_CFLAGS);
	fprintf(f, "liboqs:           %s (AVX2 code path %s)\n", OQS_version(),
	        s->liboqs_avx2 ? "active" : "NOT active: portable C");
	fprintf(f, "OpenSSL:          %s\n", OpenSSL_version(OPENSSL_VERSION));
	fprintf(f, "libsodium:        %s\n", sodium_version_string());
	fprintf(f, "libsecp256k1:     %s\n", QB_SECP256K1_VERSION);
	fprintf(f, "Tick counter:     %s at %.1f MHz (TSC ticks: a fixed reference rate, not core cycles)\n",
	        qb_ticks_source(), s->ticks_hz / 1e6);
	fprintf(f, "Load average:     %.2f %.2f %.2f\n", s->loadavg[0], s->loadavg[1], s->loadavg[2]);
	fprintf(f, "Date (UTC):       %s\n\n", s->date_utc);
}

void qb_sysinfo_json(qb_json *j, const char *key, const qb_sysinfo *s) {
	qb_json_object(j, key);
	qb_json_str(j, "cpu_model", s->cpu_model);
	qb_json_int(j, "cores_online", s->cores_online);
	qb_json_str(j, "cpu_flags", s->cpu_flags);
	qb_json_str(j, "governor", s->governor[0] ? s->governor : NULL);
	qb_json_str(j, "kernel", s->kernel);
	qb_json_str(j, "machine", s->machine);
	qb_json_str(j, "compiler", __VERSION__);
	qb_json_str(j, "cflags", QB_BUILD_CFLAGS);
	qb_json_str(j, "liboqs_version", OQS_version());
	qb_json_bool(j, "liboqs_avx2_active", s->liboqs_avx2 != 0);
	qb_json_str(j, "openssl_version", OpenSSL_version(OPENSSL_VERSION));
	qb_json_str(j, "libsodium_version", sodium_version_string());
	qb_json_str(j, "libsecp256k1_version", QB_SECP256K1_VERSION);
	qb_json_object(j, "tsc");
	qb_json_str(j, "source", qb_ticks_source());
	qb_json_num(j, "hz", s->ticks_hz);
	qb_json_bool(j, "invariant", has_word(s->cpu_flags, "constant_tsc") && has_word(s->cpu_flags, "nonstop_tsc"));
	qb_json_str(j, "unit", "TSC ticks at a fixed reference rate; not core clock cycles");
	qb_json_end(j);
	write_loadavg(j, "loadavg", s->loadavg);
	qb_json_str(j, "date_utc", s->date_utc);
	qb_json_end(j);
}
