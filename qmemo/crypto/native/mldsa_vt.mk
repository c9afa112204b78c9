# mldsa_vt.mk - builds the ML-DSA verifier with cached expanded keys (mldsa_vt.c) and its proofs.
#
# Why a makefile of its own: the verifier is compiled from liboqs 0.13's own pq-crystals
# ML-DSA and SHA3 sources, which live in the cargo registry (never in this repo), in six
# namespaced copies (ML-DSA-44/65/87 x ref/AVX2), each with our mldsa_vt_core.c compiled
# against it, plus the instrumented builds (sanitizers, libFuzzer) the tests ask for.
# scripts/setup.sh (step "mldsa") writes $(B)/config.mk and runs `make ... lib tools`;
# the tests run `make ... asan` / `make ... fuzz`, which rebuild only what changed.
#
# Targets (all outputs under .deps/native):
#   lib    libqmemo_mldsa.so (exports only qmv_*) and mldsa/libqmemo_mldsa.a
#   tools  mldsa/mldsa_diff (differential harness), mldsa/mldsa_count (instruction counts, timing)
#   asan   mldsa/mldsa_diff_asan (the harness and everything it runs under ASan + UBSan; needs clang)
#   fuzz   mldsa/mldsa_fuzz (libFuzzer + ASan + UBSan, from the same objects; needs clang)

HERE := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
ROOT := $(abspath $(HERE)/../../..)
NATIVE := $(ROOT)/.deps/native
B := $(NATIVE)/mldsa
include $(B)/config.mk # OQS_SRC (liboqs source), OQS_PREFIX (installed liboqs), OQS_LIBDIR, AVX2 (yes|no)
include $(HERE)/oqs_sha3.mk

MLDSA := $(OQS_SRC)/src/sig/ml_dsa
SHIMS := $(OQS_SRC)/src/common/pqclean_shims
MODES := 44 65 87
IMPLS := ref $(if $(filter yes,$(AVX2)),avx2)
# Each copy's files that verify needs, as src/sig/ml_dsa/CMakeLists.txt lists them (sign.c,
# the keypair/sign/verify entry points, only in the test programs: their reference verdicts).
REF_FILES := ntt packing poly polyvec reduce rounding symmetric-shake
AVX2_FILES := consts packing poly polyvec rejsample rounding symmetric-shake
AVX2_ASM := invntt ntt pointwise shuffle
mode_of = $(if $(filter 44,$(1)),2,$(if $(filter 65,$(1)),3,5)) # DILITHIUM_MODE of ML-DSA-$(1)
copy_of = $(MLDSA)/pqcrystals-dilithium-standard_ml-dsa-$(1)_$(2)

# liboqs's own flags for these files (src/sig/ml_dsa/CMakeLists.txt: -mavx2 -mpopcnt for
# the AVX2 copies), under -fvisibility=hidden so nothing of theirs leaves the library.
PQCLEAN_CFLAGS := -O3 -fPIC -fvisibility=hidden -fomit-frame-pointer -std=gnu11 -Wa,--noexecstack
OUR_CFLAGS := -std=c11 -O3 -fPIC -Wall -Wextra -Werror -pthread $(if $(filter yes,$(AVX2)),-DQMV_HAVE_AVX2)
INCLUDES := -I$(B)/include -I$(OQS_PREFIX)/include
LINK_OQS := -L$(OQS_LIBDIR) -loqs -Wl,-rpath,$(OQS_LIBDIR) -pthread
avx2_flags = $(if $(filter avx2,$(1)),-mavx2 -mpopcnt)

# One instrumented flavour serves both the sanitizer harness and the fuzzer (ASan + UBSan
# + libFuzzer's coverage hooks, which cost nothing without libFuzzer): the six copies are
# compiled twice, not three times.
SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1

.PHONY: lib tools asan fuzz
lib: $(NATIVE)/libqmemo_mldsa.so $(B)/libqmemo_mldsa.a
tools: $(B)/mldsa_diff $(B)/mldsa_count
asan: $(B)/mldsa_diff_asan
fuzz: $(B)/mldsa_fuzz

$(eval $(call oqs_sha3_setup,$(B)))
HEADERS := $(B)/include/oqs/sha3.h $(B)/include/oqs/sha3x4.h $(B)/config.mk $(B)/mldsa-rename.txt

# liboqs.so exports some of its ML-DSA symbols: the AVX2 assembly (global in .S files,
# which -fvisibility=hidden does not reach) and sign.c's *_internal entry points. A
# program that links our copies and liboqs.so (the harness, the counter) would export
# ours too and take over liboqs's own calls - OQS_SIG_verify would run our copy of its
# code - so every object of ours renames them (`nm -D liboqs.so` lists them).
LIBOQS_EXPORTS := $(foreach m,$(MODES),\
                    $(foreach f,invntt_avx ntt_avx nttunpack_avx pointwise_acc_avx pointwise_avx,pqcrystals_ml_dsa_$(m)_avx2_$(f)) \
                    $(foreach f,signature_internal verify_internal,pqcrystals_ml_dsa_$(m)_ref_$(f)))
RENAME := objcopy --redefine-syms=$(B)/mldsa-rename.txt
$(B)/mldsa-rename.txt: $(B)/config.mk
	printf '%s\n' $(foreach s,$(LIBOQS_EXPORTS),"$(s) qmemo_$(s)") >$@

# $(call objects,DIR): every object of the library in build flavour DIR.
objects = $(foreach m,$(MODES),$(foreach f,$(REF_FILES),$(1)/$(m)_ref_$(f).o) $(1)/$(m)_ref_core.o \
            $(if $(filter yes,$(AVX2)),$(foreach f,$(AVX2_FILES) $(AVX2_ASM),$(1)/$(m)_avx2_$(f).o) $(1)/$(m)_avx2_core.o)) \
          $(1)/fips202.o $(1)/fips202x4.o $(call oqs_sha3_objects,$(1)) \
          $(1)/mldsa_vt.o $(1)/mldsa_vt_cache.o $(1)/oqs_sha3_support.o

# The test programs' reference verdicts and lenient signer (tests/native/mldsa_pool.h):
# each ref copy's sign.c as liboqs compiles it, and again with its signing z bound
# redirected (objcopy) to the harness's qmemo_lenient_<mode>_chknorm and its entry points
# renamed to qmemo_lenient_<mode>_*.
test_objects = $(foreach m,$(MODES),$(1)/$(m)_ref_sign.o $(1)/$(m)_lenient_sign.o)
SIGN_ENTRIES := keypair signature_internal signature verify_internal verify open
lenient_renames = $(foreach e,$(SIGN_ENTRIES),--redefine-sym $(if $(filter %_internal,$(e)),qmemo_)pqcrystals_ml_dsa_$(1)_ref_$(e)=qmemo_lenient_$(1)_$(e)) \
                  --redefine-sym pqcrystals_ml_dsa_$(1)_ref=qmemo_lenient_$(1)_sign \
                  --redefine-sym pqcrystals_ml_dsa_$(1)_ref_polyvecl_chknorm=qmemo_lenient_$(1)_chknorm

# $(call flavour,DIR,CC,EXTRA_CFLAGS): the compile rules of one build flavour.
define flavour
$(foreach m,$(MODES),$(foreach i,$(IMPLS),
$(foreach f,$(if $(filter ref,$(i)),$(REF_FILES),$(AVX2_FILES)),
$(1)/$(m)_$(i)_$(f).o: $(call copy_of,$(m),$(i))/$(f).c $(HEADERS)
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) $(call avx2_flags,$(i)) -DDILITHIUM_MODE=$(call mode_of,$(m)) -I$(call copy_of,$(m),$(i)) -I$(SHIMS) $(INCLUDES) -c $$< -o $$@
	$(RENAME) $$@
)
$(1)/$(m)_$(i)_core.o: $(HERE)/mldsa_vt_core.c $(HERE)/mldsa_vt_core.h $(HEADERS)
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) $(3) $(call avx2_flags,$(i)) $(if $(filter avx2,$(i)),-DQMV_AVX2) -DDILITHIUM_MODE=$(call mode_of,$(m)) \
	  -DQMV_CORE=mldsa_vt_core_$(m)_$(i) -DQMV_MODE_NAME=$(m) -I$(call copy_of,$(m),$(i)) -I$(SHIMS) -I$(HERE) $(INCLUDES) -c $$< -o $$@
	$(RENAME) $$@
)
$(foreach a,$(if $(filter yes,$(AVX2)),$(AVX2_ASM)),
$(1)/$(m)_avx2_$(a).o: $(call copy_of,$(m),avx2)/$(a).S $(B)/mldsa-rename.txt
	@mkdir -p $(1)
	$(2) -fPIC $(3) -DDILITHIUM_MODE=$(call mode_of,$(m)) -I$(call copy_of,$(m),avx2) -Wa,--noexecstack -c $$< -o $$@
	$(RENAME) $$@
)
$(1)/$(m)_ref_sign.o: $(call copy_of,$(m),ref)/sign.c $(HEADERS)
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) -DDILITHIUM_MODE=$(call mode_of,$(m)) -I$(call copy_of,$(m),ref) -I$(SHIMS) $(INCLUDES) -c $$< -o $$@
	$(RENAME) $$@
$(1)/$(m)_lenient_sign.o: $(1)/$(m)_ref_sign.o
	objcopy $(call lenient_renames,$(m)) $$< $$@
)
$(1)/fips202.o: $(SHIMS)/fips202.c $(HEADERS)
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) -I$(SHIMS) $(INCLUDES) -c $$< -o $$@
$(1)/fips202x4.o: $(SHIMS)/fips202x4.c $(HEADERS)
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) -I$(SHIMS) $(INCLUDES) -c $$< -o $$@
$(call oqs_sha3_rules,$(1),$(2),$(3),$(B))
$(1)/mldsa_vt.o: $(HERE)/mldsa_vt.c $(HERE)/mldsa_vt.h $(HERE)/mldsa_vt_cache.h $(HERE)/mldsa_vt_core.h $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) $(3) $(INCLUDES) -c $$< -o $$@
$(1)/mldsa_vt_cache.o: $(HERE)/mldsa_vt_cache.c $(HERE)/mldsa_vt_cache.h $(HERE)/mldsa_vt.h $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) $(3) -c $$< -o $$@
$(1)/oqs_sha3_support.o: $(HERE)/oqs_sha3_support.c $(B)/config.mk
	@mkdir -p $(1)
	$(2) $(OUR_CFLAGS) $(3) -c $$< -o $$@
endef

$(eval $(call flavour,$(B)/obj,cc,))
$(eval $(call flavour,$(B)/obj-san,clang,$(SAN)))

$(NATIVE)/libqmemo_mldsa.so: $(call objects,$(B)/obj) $(HERE)/mldsa_vt.map
	cc -shared -o $@ $(call objects,$(B)/obj) -Wl,--version-script=$(HERE)/mldsa_vt.map -Wl,-z,noexecstack $(LINK_OQS)

$(B)/libqmemo_mldsa.a: $(call objects,$(B)/obj)
	rm -f $@
	ar rcs $@ $^

$(B)/libqmemo_mldsa_test.a: $(call test_objects,$(B)/obj)
	rm -f $@
	ar rcs $@ $^

TESTS := $(ROOT)/tests/native
BENCH := $(ROOT)/bench_c/mldsa_vt
HARNESS_DEPS := $(TESTS)/mldsa_pool.h $(TESTS)/mldsa_arith.h $(TESTS)/native_cases.h $(HERE)/mldsa_vt.h $(HERE)/mldsa_vt_core.h
HARNESS_FLAGS := $(if $(filter yes,$(AVX2)),-DQMV_HAVE_AVX2) -I$(HERE) -I$(TESTS) -I$(OQS_PREFIX)/include

$(B)/mldsa_diff: $(TESTS)/mldsa_diff.c $(HARNESS_DEPS) $(B)/libqmemo_mldsa.a $(B)/libqmemo_mldsa_test.a
	cc -std=c11 -O2 -Wall -Wextra -Werror $(HARNESS_FLAGS) $< $(B)/libqmemo_mldsa_test.a $(B)/libqmemo_mldsa.a $(LINK_OQS) -o $@

$(B)/mldsa_count: $(BENCH)/mldsa_count.c $(ROOT)/bench_c/verify_count.h $(HERE)/mldsa_vt.h $(B)/libqmemo_mldsa.a
	cc -std=c11 -O2 -Wall -Wextra -Werror -I$(HERE) -I$(OQS_PREFIX)/include $< $(B)/libqmemo_mldsa.a $(LINK_OQS) -o $@

$(B)/mldsa_diff_asan: $(TESTS)/mldsa_diff.c $(HARNESS_DEPS) $(call objects,$(B)/obj-san) $(call test_objects,$(B)/obj-san)
	clang -std=c11 $(SAN) -Wall -Wextra -Werror $(HARNESS_FLAGS) $< $(call test_objects,$(B)/obj-san) $(call objects,$(B)/obj-san) $(LINK_OQS) -o $@

$(B)/mldsa_fuzz: $(TESTS)/mldsa_fuzz.c $(HARNESS_DEPS) $(call objects,$(B)/obj-san) $(call test_objects,$(B)/obj-san)
	clang -std=c11 $(subst fuzzer-no-link,fuzzer,$(SAN)) -Wall -Wextra -Werror $(HARNESS_FLAGS) $< $(call test_objects,$(B)/obj-san) $(call objects,$(B)/obj-san) $(LINK_OQS) -o $@
