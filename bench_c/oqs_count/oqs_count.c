/*
 * oqs_count.c - liboqs's verify cost for any scheme liboqs has (SPHINCS+, MAYO, ...): the
 * liboqs row of a scheme with no verifier of qMEMO's, on the inputs every counter uses.
 *
 * One key, N distinct 64-byte messages and their signatures, made by liboqs from a
 * fixed seed; one mode, `liboqs` (OQS_SIG_verify behind the caller's length check).
 * Commands and output: bench_c/verify_count.h. Built by bench_c/Makefile.
 */
#include "../verify_count.h"

static const char *const MODES[] = {"liboqs"};

static int setup(const verify_inputs *in) {
	(void) in;
	return 0;
}

static size_t run(int mode) {
	(void) mode;
	return verify_inputs_liboqs(&vc_in);
}

static const char *implementation(int mode) {
	(void) mode;
	return "liboqs";
}

static void teardown(void) {}

int main(int argc, char **argv) {
	const verify_counter counter = {1, MODES, "SPHINCS+-SHA2-128f-simple", setup, run, implementation, teardown};
	return verify_count_main(&counter, argc, argv);
}
