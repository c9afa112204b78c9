# oqs_sha3.mk - liboqs 0.13's SHA3/SHAKE, one lane and four lanes, compiled from its own
# sources for a verifier library (included by falcon_vt.mk and mldsa_vt.mk).
#
# Why: liboqs.so keeps its OQS_SHA3_* functions hidden, and the PQClean / pq-crystals
# code our verifiers are built from calls them. So each verifier library gets its own
# private copy of liboqs's SHA3 code: the one-lane Keccak-p[1600] (AVX2 assembly or
# portable C, chosen at run time by liboqs's own dispatch) and the four-lane
# KeccakP-1600-times4 (AVX2 intrinsics or the serial fallback, the same way).
#
# The including makefile sets OQS_SRC, OQS_PREFIX, AVX2 (yes|no), PQCLEAN_CFLAGS and
# INCLUDES (which must put $(1)/../include first: <oqs/sha3.h>, <oqs/sha3x4.h> live there).
#
#   $(eval $(call oqs_sha3_setup,INC))        once: INC/include/oqs/sha3*.h (not installed by
#                                             liboqs, but the shims include them) and
#                                             INC/keccak-rename.txt (INC holds config.mk)
#   $(call oqs_sha3_objects,DIR)              the objects of one build flavour
#   $(call oqs_sha3_rules,DIR,CC,EXTRA,INC)   their compile rules (inside a flavour's $(eval ...))

SHA3 := $(OQS_SRC)/src/common/sha3
XKCP := $(SHA3)/xkcp_low

oqs_sha3_objects = $(1)/sha3.o $(1)/xkcp_sha3.o $(1)/sha3x4.o $(1)/xkcp_sha3x4.o \
                   $(1)/keccak_plain64.o $(1)/keccak_times4_serial.o \
                   $(if $(filter yes,$(AVX2)),$(1)/keccak_avx2.o $(1)/keccak_times4_avx2.o)

# liboqs.so exports its AVX2 Keccak-p[1600] symbols (they come from assembly, which
# -fvisibility=hidden does not reach). A program that links our copy and liboqs.so
# would export ours too and silently take over liboqs's calls, so our copy is renamed.
OQS_KECCAK_AVX2 := $(foreach f,Initialize AddByte AddBytes OverwriteBytes OverwriteWithZeroes Permute_Nrounds \
                     Permute_12rounds Permute_24rounds ExtractBytes ExtractAndAddBytes 12rounds_FastLoop_Absorb,\
                     KeccakP1600_$(f)_avx2) KeccakF1600_FastLoop_Absorb_avx2

define oqs_sha3_setup
$(1)/include/oqs/sha3.h: $(SHA3)/sha3.h
	mkdir -p $$(dir $$@)
	cp $$< $$@
$(1)/include/oqs/sha3x4.h: $(SHA3)/sha3x4.h
	mkdir -p $$(dir $$@)
	cp $$< $$@
$(1)/keccak-rename.txt: $(1)/config.mk
	printf '%s\n' $(foreach s,$(OQS_KECCAK_AVX2),"$(s) qmemo_$(s)" "_$(s) _qmemo_$(s)") >$$@
endef

define oqs_sha3_rules
# OQS_SHA3_set_callbacks / OQS_SHA3_x4_set_callbacks are renamed so that a program
# linking this archive and liboqs.so never has two of them.
$(1)/sha3.o: $(SHA3)/sha3.c $(4)/include/oqs/sha3.h $(4)/config.mk
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) -DOQS_SHA3_set_callbacks=qmemo_private_sha3_set_callbacks -I$(SHA3) $(INCLUDES) -c $$< -o $$@
$(1)/sha3x4.o: $(SHA3)/sha3x4.c $(4)/include/oqs/sha3x4.h $(4)/config.mk
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) -DOQS_SHA3_x4_set_callbacks=qmemo_private_sha3_x4_set_callbacks -I$(SHA3) $(INCLUDES) -c $$< -o $$@
$(1)/xkcp_sha3.o: $(SHA3)/xkcp_sha3.c $(4)/include/oqs/sha3.h $(4)/keccak-rename.txt
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) -I$(SHA3) $(INCLUDES) -c $$< -o $$@
	objcopy --redefine-syms=$(4)/keccak-rename.txt $$@
$(1)/xkcp_sha3x4.o: $(SHA3)/xkcp_sha3x4.c $(4)/include/oqs/sha3x4.h $(4)/config.mk
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) -I$(SHA3) $(INCLUDES) -c $$< -o $$@
$(1)/keccak_plain64.o: $(XKCP)/KeccakP-1600/plain-64bits/KeccakP-1600-opt64.c $(4)/config.mk
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) -DADD_SYMBOL_SUFFIX -c $$< -o $$@
$(1)/keccak_times4_serial.o: $(XKCP)/KeccakP-1600times4/serial/KeccakP-1600-times4-on1.c $(4)/config.mk
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) -DADD_SYMBOL_SUFFIX -I$(XKCP)/KeccakP-1600/plain-64bits -c $$< -o $$@
$(1)/keccak_avx2.o: $(XKCP)/KeccakP-1600/avx2/KeccakP-1600-AVX2.S $(4)/keccak-rename.txt
	@mkdir -p $(1)
	$(2) -fPIC -DADD_SYMBOL_SUFFIX -Wa,--noexecstack -c $$< -o $$@
	objcopy --redefine-syms=$(4)/keccak-rename.txt $$@
# The four-lane permutation in AVX2 intrinsics: called only after liboqs's run-time check.
$(1)/keccak_times4_avx2.o: $(XKCP)/KeccakP-1600times4/avx2/KeccakP-1600-times4-SIMD256.c $(4)/config.mk
	@mkdir -p $(1)
	$(2) $(PQCLEAN_CFLAGS) $(3) -mavx2 -DADD_SYMBOL_SUFFIX -I$(XKCP)/KeccakP-1600/avx2 -c $$< -o $$@
endef
