/*
 * falcon_fuzz.c - libFuzzer target: falcon_vt against liboqs on fuzzer-chosen input.
 *
 * Input layout (every byte string is a valid input):
 *   [0] flags: bits 0-1 variant; bit 2 raw key bytes from the input (else a pool key);
 *       bit 3 raw key of exactly the variant's length (else length from [1]);
 *       bit 5 through the cache; bit 6 the AVX2 code (when the CPU has it)
 *   [1] pool key index, or the raw key's length / 8 (bits 3..10) plus [1] & 7
 *   [2..3] message length (little-endian, cut to what is left)
 *   then the raw key (if any), the message, and the signature (all the rest).
 * LLVMFuzzerInitialize makes each variant's keys and valid signatures with liboqs and,
 * when QMEMO_FUZZ_SEEDS names a folder, writes them there as seed inputs (both key
 * forms), so the fuzzer starts from valid signatures and mutates its way out.
 * A disagreement prints both verdicts and aborts, which libFuzzer reports with the input.
 * The signature body also goes to our s2 decoders and PQClean's, compared value by
 * value (falcon_arith.h): a verdict alone would hide a wrong coefficient.
 *
 * Run: see tests/integration/test_falcon_vt_native.py and docs/methodology.md.
 */
#include "falcon_arith.h"
#include "falcon_pool.h"

#define FUZZ_KEYS 4
#define FUZZ_ITEMS 16

static pool pools[QFV_VARIANT_COUNT];
static qfv_cache *cache;
static int have_avx2;
static arith_decoder decoders[2];
static int decoder_count;

static void write_seed(const char *dir, int variant, size_t item, int raw, const pool *p) {
	static uint8_t buf[4 + POOL_MAX_PK + POOL_MAX_MSG + POOL_MAX_SIG];
	const pool_item *it = &p->items[item];
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
	snprintf(path, sizeof path, "%s/seed-%d-%zu-%d", dir, variant, item, raw);
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
	for (int v = 0; v < QFV_VARIANT_COUNT; v++) {
		if (pool_make(&pools[v], qfv_variant_name(v), FUZZ_KEYS, FUZZ_ITEMS, 1000u + (uint64_t) v) != 0) {
			abort();
		}
		for (size_t i = 0; seeds != NULL && i < FUZZ_ITEMS; i++) {
			write_seed(seeds, v, i, 0, &pools[v]);
			write_seed(seeds, v, i, 1, &pools[v]);
		}
	}
	cache = qfv_cache_new(8);
	have_avx2 = qfv_select_implementation("avx2") == 0;
	decoder_count = arith_decoders(decoders);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (size < 4) {
		return 0;
	}
	uint8_t flags = data[0];
	const pool *p = &pools[flags & 3];
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
	const char *impl = have_avx2 && (flags & 64) ? "avx2" : "clean";
	qfv_select_implementation(impl);
	int want = pool_liboqs_verdict(p->oqs, pk, pk_len, msg, msg_len, sig, sig_len);
	int got = (flags & 32) ? qfv_verify_cached(cache, flags & 3, pk, pk_len, msg, msg_len, sig, sig_len)
	                       : qfv_verify(flags & 3, pk, pk_len, msg, msg_len, sig, sig_len);
	if (got != want) {
		fprintf(stderr, "DISAGREEMENT %s impl %s %s: liboqs %d, falcon_vt %d (pk %zu, msg %zu, sig %zu bytes)\n",
		        qfv_variant_name(flags & 3), impl, (flags & 32) ? "cached" : "uncached", want, got, pk_len, msg_len,
		        sig_len);
		abort();
	}
	unsigned logn = (flags & 3) == QFV_FALCON_1024 || (flags & 3) == QFV_FALCON_PADDED_1024 ? 10 : 9;
	if (sig_len > 41 && arith_decode_case(sig + 41, sig_len - 41, logn, decoders, decoder_count) != 0) {
		abort(); /* past the header byte and the 40-byte nonce: the compressed s2 */
	}
	return 0;
}
