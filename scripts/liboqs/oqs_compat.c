/*
 * oqs_compat.c - symbols that liboqs-python 0.16 needs and liboqs 0.13 lacks.
 *
 * Why this exists: the newest liboqs source on a package registry we can reach is
 * 0.13.0 (inside the crates.io crate oqs-sys 0.11.0+liboqs-0.13.0), but the only
 * liboqs-python on PyPI is 0.16, whose import binds OQS_SIG_supports_ctx_str
 * (added to liboqs in 0.14). Without it `import oqs` fails with AttributeError.
 *
 * The definition below matches liboqs 0.14's: an algorithm supports context
 * strings iff its OQS_SIG object says so. It is compiled into liboqs.so itself
 * (scripts/liboqs/compat.cmake adds it to the `oqs` target), so every consumer
 * of the library - Python, bench_c - sees one consistent symbol set.
 */
#include <stdbool.h>
#include <oqs/oqs.h>

OQS_API bool OQS_SIG_supports_ctx_str(const char *alg_name);

OQS_API bool OQS_SIG_supports_ctx_str(const char *alg_name) {
	OQS_SIG *sig = OQS_SIG_new(alg_name);
	if (sig == NULL) {
		return false;
	}
	bool supported = sig->sig_with_ctx_support;
	OQS_SIG_free(sig);
	return supported;
}
