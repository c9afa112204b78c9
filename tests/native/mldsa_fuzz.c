/*
 * mldsa_fuzz.c - libFuzzer target: mldsa_vt against liboqs on fuzzer-chosen input.
 *
 * Input layout (every byte string is a valid input):
 *   [0] flags: bits 0-1 parameter set (3 counts as 0); bit 2 raw key bytes from the
 *       input (else a pool key); bit 3 raw key of exactly the set's length (else length
 *       from [1]); bit 5 through the cache; bit 6 the AVX2 code (when the CPU has it)
 *   [1] pool key index, or the raw key's length / 8 (bits 3..10) plus [1] & 7
 *   [2..3] message length (little-endian, cut to what is left)
 *   then the raw key (if any), the message, and the signature (all the rest).
 * LLVMFuzzerInitialize makes each set's keys, signatures and lenient signatures
 * (mldsa_pool.h) and, when QMEMO_FUZZ_SEEDS names a folder, writes them there as seed
 * inputs (both key forms), so the fuzzer starts from valid signatures - and from
 * signatures only a missing z bound accepts - and mutates its way out.
 * mldsa_vt must give liboqs's portable verdict; OQS_SIG_verify may differ from it only
 * by accepting a z beyond FIPS 204's bound (mldsa_vt.h). Anything else prints both
 * verdicts and aborts, which libFuzzer reports with the input.
 *
 * Run: see tests/integration/test_mldsa_vt_native.py and docs/methodology.md.
 */
#include "mldsa_pool.h"

#define FUZZ_KEYS 4
#define FUZZ_ITEMS 8

static pool pools[QMV_VARIANT_COUNT];
static qmv_cache *caches[QMV_VARIANT_COUNT];
static int have_avx2;

static void write_seed(const char *dir, int variant, const pool_item *it, const char *kind, size_t index, int raw,
                       const pool *p) {
	static uint8_t buf[4 + POOL_MAX_PK + POOL_MAX_MSG + POOL_MAX_SIG];
	size_t len = 0;
	buf[len++] = (uint8_t) (variant | (raw ? 4 | 8 : 0));
	buf[len++] = (uint8_t) it->key;
	buf[len++] = (uint8_t) it->msg_len;
	buf[len++] = (uint8_t) (it->msg_len >> 8);
	if (raw) {
		memcpy(buf + len, p->pks + it->key * p->pk_len, p->pk_len);
		len += p->pk_len;
	}
	memcpy(buf + len, it->msg, it->msg_len);
	len += it->msg_len;
	memcpy(buf + len, it->sig, it->sig_len);
	len += it->sig_len;
	char path[4096];
	snprintf(path, sizeof path, "%s/seed-%d-%s-%zu-%d", dir, variant, kind, index, raw);
	FILE *f = fopen(path, "wb");
	if (f != NULL) {
		fwrite(buf, 1, len, f);
		fclose(f);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
	(void) argc, (void) argv;
	OQS_init();
	const char *seeds = getenv("QMEMO_FUZZ_SEEDS");
	for (int v = 0; v < QMV_VARIANT_COUNT; v++) {
		if (pool_make(&pools[v], qmv_variant_name(v), FUZZ_KEYS, FUZZ_ITEMS, 2000u + (uint64_t) v) != 0) {
			abort();
		}
		caches[v] = qmv_cache_new(v, 8);
		for (size_t i = 0; seeds != NULL && i < FUZZ_ITEMS; i++) {
			for (int raw = 0; raw < 2; raw++) {
				write_seed(seeds, v, &pools[v].items[i], "signed", i, raw, &pools[v]);
				write_seed(seeds, v, &pools[v].lenient[i], "lenient", i, raw, &pools[v]);
			}
		}
	}
	have_avx2 = qmv_select_implementation("avx2") == 0;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (size < 4) {
		return 0;
	}
	uint8_t flags = data[0];
	int variant = (flags & 3) % QMV_VARIANT_COUNT;
	const pool *p = &pools[variant];
	const uint8_t *pk;
	size_t pk_len, at = 4;
	if (flags & 4) {
		pk_len = (flags & 8) ? p->pk_len : (size_t) data[1] * 8 + (data[1] & 7);
		if (size - at < pk_len) {
			return 0;
		}
		pk = data + at;
		at += pk_len;
	} else {
		pk = p->pks + (data[1] % FUZZ_KEYS) * p->pk_len;
		pk_len = p->pk_len;
	}
	size_t msg_len = (size_t) data[2] | (size_t) data[3] << 8;
	if (msg_len > size - at) {
		msg_len = size - at;
	}
	const uint8_t *msg = data + at, *sig = msg + msg_len;
	size_t sig_len = size - at - msg_len;
	const char *impl = have_avx2 && (flags & 64) ? "avx2" : "ref";
	qmv_select_implementation(impl);
	int want = pool_ref_verdict(p, pk, pk_len, msg, msg_len, sig, sig_len);
	int oqs = pool_oqs_verdict(p, pk, pk_len, msg, msg_len, sig, sig_len);
	int got = (flags & 32) ? qmv_verify_cached(caches[variant], variant, pk, pk_len, msg, msg_len, sig, sig_len)
	                       : qmv_verify(variant, pk, pk_len, msg, msg_len, sig, sig_len);
	int oqs_explained = oqs == want || (oqs && !want && pool_z_out_of_bound(p, sig, sig_len) == 1);
	if (got != want || !oqs_explained) {
		fprintf(stderr, "DISAGREEMENT %s impl %s %s: liboqs ref %d, OQS_SIG_verify %d%s, mldsa_vt %d "
		        "(pk %zu, msg %zu, sig %zu bytes)\n", qmv_variant_name(variant), impl,
		        (flags & 32) ? "cached" : "uncached", want, oqs, oqs_explained ? "" : " (unexplained)", got, pk_len,
		        msg_len, sig_len);
		abort();
	}
	return 0;
}
