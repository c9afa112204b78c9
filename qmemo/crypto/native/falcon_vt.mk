# falcon_vt.mk - builds the fast Falcon verifier (falcon_vt.c) and its proofs.
#
# Why a makefile of its own: the verifier is compiled from liboqs 0.13's own PQClean
# Falcon and SHA3 sources, which live in the cargo registry (never in this repo), in
# eight namespaced copies (4 variants x clean/AVX2), plus three instrumented builds
# (sanitizers, libFuzzer) that the tests ask for. scripts/setup.sh writes
# $(B)/config.mk (where the sources and liboqs are) and runs `make ... lib tools`;
# the tests run `make ... asan` / `make ... fuzz`, which rebuild only what changed.
#
# Targets (all outputs under .deps/native):
#   lib    libqmemo_falcon.so (exports only qfv_*) and falcon/libqmemo_falcon.a
#   tools  falcon/falcon_diff (differential harness), falcon/falcon_count (instruction counts, timing)
#   asan   falcon/falcon_diff_asan (the harness and everything it runs under ASan + UBSan)
#   fuzz   falcon/falcon_fuzz (libFuzzer + ASan + UBSan; needs clang)

HERE := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
ROOT := $(abspath $(HERE)/../../..)
NATIVE := $(ROOT)/.deps/native
B := $(NATIVE)/falcon
include $(B)/config.mk # OQS_SRC (liboqs source), OQS_PREFIX (installed liboqs), OQS_LIBDIR, AVX2 (yes|no)
include $(HERE)/oqs_sha3.mk

FALCON := $(OQS_SRC)/src/sig/falcon
VARIANTS := 512 1024 padded-512 padded-1024
IMPLS := clean $(if $(filter yes,$(AVX2)),avx2)
PQCLEAN_FILES := codec common vrfy # all verify needs: decoding, hash-to-point + norm check, NTT

# liboqs's own flags for these files (its compile_commands.json), -mavx2 for the AVX2
# copies as in src/sig/falcon/CMakeLists.txt. Never -ffast-math: Falcon's arithmetic
# must stay exact (and verify is integer-only anyway).
PQCLEAN_CFLAGS := -O3 -fPIC -fvisibility=hidden -fomit-frame-pointer -std=gnu11 -Wa,--noexecstack
OUR_CFLAGS := -std=c11 -O3 -fPIC -Wall -Wextra -Werror -pthread $(if $(filter yes,$(AVX2)),-DQFV_HAVE_AVX2)
INCLUDES := -I$(B)/include -I$(OQS_PREFIX)/include
LINK_OQS := -L$(OQS_LIBDIR) -loqs -Wl,-rpath,$(OQS_LIBDIR) -pthread

# One object directory per build flavour: release, sanitized, fuzzing.
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1
FUZZ := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -g -O1

.PHONY: lib tools asan fuzz
lib: $(NATIVE)/libqmemo_falcon.so $(B)/libqmemo_falcon.a
tools: $(B)/falcon_diff $(B)/falcon_count
asan: $(B)/falcon_diff_asan
fuzz: $(B)/falcon_fuzz

$(eval $(call oqs_sha3_setup,$(B)))

# $(call objects,DIR): every object of the library in build flavour DIR.
objects = $(foreach v,$(VARIANTS),$(foreach i,$(IMPLS),$(foreach f,$(PQCLEAN_FILES),$(1)/$(v)_$(i)_$(f).o))) \
          $(call oqs_sha3_objects,$(1)) \
          $(1)/falcon_vt.o $(1)/falcon_vt_batch.o $(1)/falcon_vt_cache.o $(1)/oqs_sha3_support.o $(1)/falcon_vt_codec.o \
          $(if $(filter yes,$(AVX2)),$(1)/falcon_vt_avx2.o $(1)/falcon_vt_codec_bmi2.o)

# $(call flavour,DIR,CC,EXTRA_CFLAGS): the compile rules of one build flavour.
define flavour
$(foreach v,$(VARIANTS),$(foreach i,$(IMPLS),$(foreach f,$(PQCLEAN_FILES),
$(1)/$(v)_$(i)_$(f).o: $(FALCON)/pqclean_falcon-$(v)_$(i)/$(f).c $(B)/include/oqs/sha3.h $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) $(if $(filter avx2,$(i)),-mavx2) -I$(FALCON)/pqclean_falcon-$(v)_$(i) -I$(OQS_SRC)/src/common/pqclean_shims $(INCLUDES) -c $$< -o $$@
)))
$(call oqs_sha3_rules,$(1),$(2),$(3),$(B))
$(1)/falcon_vt.o: $(HERE)/falcon_vt.c $(HERE)/falcon_vt.h $(HERE)/falcon_vt_cache.h $(HERE)/falcon_vt_verify.h $(HERE)/falcon_vt_codec.h \
                  $(HERE)/falcon_vt_avx2.h $(B)/include/oqs/sha3.h $(B)/include/oqs/sha3x4.h $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) $(3) -I$(FALCON) $(INCLUDES) -c $$< -o $$@
$(1)/falcon_vt_batch.o: $(HERE)/falcon_vt_batch.c $(HERE)/falcon_vt.h $(HERE)/falcon_vt_cache.h $(HERE)/falcon_vt_verify.h \
                        $(B)/include/oqs/sha3.h $(B)/include/oqs/sha3x4.h $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) $(3) $(INCLUDES) -c $$< -o $$@
$(1)/falcon_vt_cache.o: $(HERE)/falcon_vt_cache.c $(HERE)/falcon_vt_cache.h $(HERE)/falcon_vt.h $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) $(3) -c $$< -o $$@
$(1)/oqs_sha3_support.o: $(HERE)/oqs_sha3_support.c $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) $(3) -c $$< -o $$@
$(1)/falcon_vt_codec.o: $(HERE)/falcon_vt_codec.c $(HERE)/falcon_vt_codec.h $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) $(3) -c $$< -o $$@
$(1)/falcon_vt_codec_bmi2.o: $(HERE)/falcon_vt_codec.c $(HERE)/falcon_vt_codec.h $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) -mbmi2 -mlzcnt -mavx2 -DFALCON_VT_COMP_DECODE=falcon_vt_comp_decode_bmi2 $(3) -c $$< -o $$@
# Our AVX2 arithmetic: the only file of ours built with -mavx2, called only after the run-time check.
$(1)/falcon_vt_avx2.o: $(HERE)/falcon_vt_avx2.c $(HERE)/falcon_vt_avx2.h $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) -mavx2 $(3) -c $$< -o $$@
endef

$(eval $(call flavour,$(B)/obj,cc,))
$(eval $(call flavour,$(B)/obj-asan,cc,$(SAN)))
$(eval $(call flavour,$(B)/obj-fuzz,clang,$(FUZZ)))

$(NATIVE)/libqmemo_falcon.so: $(call objects,$(B)/obj) $(HERE)/falcon_vt.map
	cc -shared -o $@ $(call objects,$(B)/obj) -Wl,--version-script=$(HERE)/falcon_vt.map -Wl,-z,noexecstack $(LINK_OQS)

$(B)/libqmemo_falcon.a: $(call objects,$(B)/obj)
	rm -f $@
	ar rcs $@ $^

TESTS := $(ROOT)/tests/native
BENCH := $(ROOT)/bench_c/falcon_vt

HARNESS_DEPS := $(TESTS)/falcon_pool.h $(TESTS)/native_cases.h $(TESTS)/falcon_arith.h $(HERE)/falcon_vt_codec.h $(HERE)/falcon_vt_avx2.h
HARNESS_FLAGS := $(if $(filter yes,$(AVX2)),-DQFV_HAVE_AVX2)

$(B)/falcon_diff: $(TESTS)/falcon_diff.c $(HERE)/falcon_vt.h $(HARNESS_DEPS) $(B)/libqmemo_falcon.a
	cc -std=c11 -O2 -Wall -Wextra -Werror $(HARNESS_FLAGS) -I$(HERE) -I$(OQS_PREFIX)/include $< $(B)/libqmemo_falcon.a $(LINK_OQS) -o $@

$(B)/falcon_count: $(BENCH)/falcon_count.c $(ROOT)/bench_c/verify_count.h $(HERE)/falcon_vt.h $(B)/libqmemo_falcon.a
	cc -std=c11 -O2 -Wall -Wextra -Werror -I$(HERE) -I$(OQS_PREFIX)/include $< $(B)/libqmemo_falcon.a $(LINK_OQS) -o $@

$(B)/falcon_diff_asan: $(TESTS)/falcon_diff.c $(HERE)/falcon_vt.h $(HARNESS_DEPS) $(call objects,$(B)/obj-asan)
	cc -std=c11 $(SAN) -Wall -Wextra -Werror $(HARNESS_FLAGS) -I$(HERE) -I$(OQS_PREFIX)/include $< $(call objects,$(B)/obj-asan) $(LINK_OQS) -o $@

$(B)/falcon_fuzz: $(TESTS)/falcon_fuzz.c $(HERE)/falcon_vt.h $(HARNESS_DEPS) $(call objects,$(B)/obj-fuzz)
	clang -std=c11 $(subst fuzzer-no-link,fuzzer,$(FUZZ)) -Wall -Wextra -Werror $(HARNESS_FLAGS) -I$(HERE) -I$(OQS_PREFIX)/include $< $(call objects,$(B)/obj-fuzz) $(LINK_OQS) -o $@
