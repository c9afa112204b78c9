/* schemes.h - every signature scheme we measure, behind one small interface.
 *
 * One wrapper per implementation, as liboqs's speed_sig has one per algorithm: the
 * liboqs schemes this liboqs was built with, and four classical baselines, ECDSA
 * secp256k1 through libsecp256k1 (what chains run) and through OpenSSL (what earlier
 * reports measured), Ed25519 through libsodium and through OpenSSL.
 *
 * Conventions every wrapper keeps, so the numbers compare like with like:
 *  - keys travel as bytes (public keys compressed where the scheme has a choice);
 *    a secret key may also be held in the library's own loaded form (`native`, e.g. an
 *    OpenSSL EVP_PKEY), because a signer loads its key once;
 *  - verify takes bytes in and returns a verdict: public-key decoding is part of its
 *    cost, as it is for a node checking a transaction (pk_load/verify_loaded, where a
 *    library offers them, measure the pre-parsed path separately);
 *  - ECDSA signs the SHA-256 of the message, and the hash is part of sign and verify,
 *    as hashing is inside every post-quantum scheme's sign and verify;
 *  - verify never reports an error for attacker-controlled bytes: a malformed key or
 *    signature is QB_INVALID; QB_ERROR means the library itself failed (out of memory).
 */
#ifndef QB_SCHEMES_H
#define QB_SCHEMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { QB_VALID = 0, QB_INVALID = 1, QB_ERROR = -1 } qb_verdict;

typedef struct qb_scheme qb_scheme;

typedef struct {
	uint8_t *pk; /* pk_bytes */
	uint8_t *sk; /* sk_bytes; cleansed on free */
	void *native; /* the library's loaded secret key, or NULL */
} qb_keypair;

struct qb_scheme {
	char id[64];             /* unique: "Falcon-512", "ECDSA-secp256k1/libsecp256k1" */
	const char *name;        /* "Falcon-512", "ECDSA-secp256k1" */
	const char *library;     /* "liboqs", "libsecp256k1", "OpenSSL", "libsodium" */
	char implementation[96]; /* library, version and code path */
	bool post_quantum;
	int nist_level; /* claimed NIST level; 0 for the classical (pre-quantum) schemes */
	/* Strong unforgeability as the library declares it (liboqs's OQS_SIG.suf_cma): when
	 * false, a modified encoding of a valid signature may verify (malleability),
	 * which inspect reports as a note rather than a surprise. */
	bool suf_cma;
	size_t pk_bytes, sk_bytes, sig_max_bytes;
	const void *impl; /* OQS_SIG *, secp256k1_context *, ... */

	int (*keypair)(const qb_scheme *s, qb_keypair *kp); /* 0 on success */
	int (*sign)(const qb_scheme *s, const qb_keypair *kp, const uint8_t *msg, size_t msg_len, uint8_t *sig,
	            size_t *sig_len); /* 0 on success; *sig_len in: capacity, out: length */
	qb_verdict (*verify)(const qb_scheme *s, const uint8_t *pk, const uint8_t *msg, size_t msg_len,
	                     const uint8_t *sig, size_t sig_len);
	void (*native_free)(void *native); /* NULL when keys are bytes only */

	/* Optional (NULL when the library verifies from bytes only). */
	void *(*pk_load)(const qb_scheme *s, const uint8_t *pk);
	qb_verdict (*verify_loaded)(const qb_scheme *s, const void *loaded_pk, const uint8_t *msg, size_t msg_len,
	                            const uint8_t *sig, size_t sig_len);
	void (*pk_free)(void *loaded_pk);
};

/* Set up liboqs and the classical libraries and list every scheme. 0 on success. */
int qb_schemes_init(void);
void qb_schemes_cleanup(void);

size_t qb_schemes_count(void);
const qb_scheme *qb_scheme_at(size_t i);

/* Resolve a comma-separated list into schemes. Items: an id ("Falcon-512",
 * "Ed25519/OpenSSL"), a name matching every implementation ("Ed25519"), or a group:
 * "all", "pq" (every liboqs scheme built), "classical", "falcon" (Falcon-512/1024 and
 * their padded variants). Case-insensitive; duplicates dropped. Returns the count, or
 * -1 after printing the unknown item to stderr. */
int qb_schemes_resolve(const char *list, const qb_scheme **out, size_t max);

/* Allocate a key pair's buffers (no keys yet); 0 on success. */
int qb_keypair_alloc(const qb_scheme *s, qb_keypair *kp);
/* Cleanse and free the secret key, free the rest. Safe on a zeroed struct. */
void qb_keypair_free(const qb_scheme *s, qb_keypair *kp);

/* Classical wrappers (classical.c): fill up to `max` schemes, return how many, -1 on error. */
int qb_classical_register(qb_scheme *out, size_t max);
void qb_classical_cleanup(void);

#endif
