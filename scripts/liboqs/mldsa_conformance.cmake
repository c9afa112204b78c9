# mldsa_conformance.cmake - FIPS 204's verify for liboqs 0.13's AVX2 ML-DSA, applied at build time.
#
# Included by compat.cmake (so into liboqs's own CMake project). Why: the pq-crystals AVX2
# ML-DSA that liboqs 0.13 bundles, and that OQS_SIG_verify runs on any CPU with AVX2,
# differs from FIPS 204 in two places of its verify:
#   1. sign.c, crypto_sign_verify_internal: z is unpacked and used without checking
#      ||z||_inf < gamma1 - beta (FIPS 204, Algorithm 8, line 13), so it accepts
#      signatures the standard rejects (and that liboqs's own portable code rejects);
#   2. rounding.c, use_hint_avx: r1 is moved up when r0 >= 0, where FIPS 204
#      (Algorithm 40, UseHint) moves it up only when r0 > 0, so it rejects valid
#      signatures that meet r0 == 0 with the hint set.
# The liboqs source stays untouched (it is the pinned crate's, and the fast verifier
# compiles the same files): the two files are copied into the build folder with the
# edits below, and only the `ml_dsa_<set>_avx2` targets are pointed at the copies. Each
# edit must match its line exactly once, or the configure step stops: another liboqs
# source fails loudly instead of building half-patched.
#
# For `qmemo bench c`, two static archives measure what the edits cost, like for like:
#   lib/qmemo/libqmemo_mldsa_conforming.a  the patched targets' own objects (nothing
#                                           compiled again), symbols prefixed qmemo_conforming_
#   lib/qmemo/libqmemo_mldsa_shipped.a     the untouched files, compiled with the same
#                                           targets' flags, symbols prefixed qmemo_shipped_
# each with liboqs's common objects (SHA-3 and its dispatch, which liboqs.so keeps hidden),
# every symbol renamed (rename_symbols.cmake) so that neither can take over liboqs.so's
# calls. One program (bench_c/mldsa_conformance) times both and OQS_SIG_verify, round by
# round; nothing else links them.
#
# Requires CMake 3.19 (cmake_language(DEFER)), like compat.cmake.
set(QMEMO_MLDSA_CONFORMANCE_DIR "${CMAKE_CURRENT_LIST_DIR}")

# qmemo_edit_once(VAR FILE OLD NEW): replace the one occurrence of OLD in VAR's text.
function(qmemo_edit_once var file old new)
    string(FIND "${${var}}" "${old}" first)
    string(FIND "${${var}}" "${old}" last REVERSE)
    if(first EQUAL -1 OR NOT first EQUAL last)
        message(FATAL_ERROR "qmemo ML-DSA conformance: ${file} does not hold exactly one `${old}`")
    endif()
    string(REPLACE "${old}" "${new}" text "${${var}}")
    set(${var} "${text}" PARENT_SCOPE)
endfunction()

# The edits, by file. Each new text is ours; the old text is the one line it replaces.
function(qmemo_write_conforming_copy source_dir out_dir file)
    file(READ "${source_dir}/${file}" text)
    if(file STREQUAL "sign.c")
        qmemo_edit_once(text "${source_dir}/${file}"
            "  /* Unpack z; shortness follows from unpacking */\n"
            "  /* Unpack z; FIPS 204 Algorithm 8 line 13: refuse ||z||_inf >= GAMMA1 - BETA (packing allows up to GAMMA1) */\n")
        # Before z's NTT, on the unpacked (centred) coefficients, as the ref code checks it;
        # the SHAKE state is released as on every other early return of this function.
        qmemo_edit_once(text "${source_dir}/${file}"
            "    polyz_unpack(&z.vec[i], sig + CTILDEBYTES + i*POLYZ_PACKEDBYTES);\n"
            "    polyz_unpack(&z.vec[i], sig + CTILDEBYTES + i*POLYZ_PACKEDBYTES);\n    if(poly_chknorm(&z.vec[i], GAMMA1 - BETA)) {\n      shake256_inc_ctx_release(&state);\n      return -1;\n    }\n")
    elseif(file STREQUAL "rounding.c")
        # t = h where r0 <= 0 (FIPS 204 Algorithm 40: r1 - 1 there, r1 + 1 only where r0 > 0),
        # so h - 2t is -h there; the shipped line selected on r0 < 0 alone.
        qmemo_edit_once(text "${source_dir}/${file}"
            "    t = _mm256_blendv_epi32(zero,h,f);\n"
            "    t = _mm256_andnot_si256(_mm256_cmpgt_epi32(f,zero),h); /* h where r0 <= 0 */\n")
    else()
        message(FATAL_ERROR "qmemo ML-DSA conformance: no edit for ${file}")
    endif()
    file(WRITE "${out_dir}/${file}" "${text}")
endfunction()

function(qmemo_mldsa_conformance)
    set(ml_dsa_dir "${PROJECT_SOURCE_DIR}/src/sig/ml_dsa")
    set(conforming_objects "")
    set(shipped_objects "")
    foreach(set_name 44 65 87)
        set(target "ml_dsa_${set_name}_avx2")
        if(NOT TARGET ${target})
            continue()    # not in this build (no AVX2 target, or the set is not built)
        endif()
        set(copy "pqcrystals-dilithium-standard_ml-dsa-${set_name}_avx2")
        set(out_dir "${CMAKE_BINARY_DIR}/qmemo-mldsa-conformance/${copy}")
        file(MAKE_DIRECTORY "${out_dir}")
        get_target_property(sources ${target} SOURCES)
        set(patched_sources "")
        set(shipped_sources "")
        set(replaced 0)
        foreach(source IN LISTS sources)
            get_filename_component(name "${source}" NAME)
            list(APPEND shipped_sources "${ml_dsa_dir}/${source}")
            if(name STREQUAL "sign.c" OR name STREQUAL "rounding.c")
                qmemo_write_conforming_copy("${ml_dsa_dir}/${copy}" "${out_dir}" "${name}")
                list(APPEND patched_sources "${out_dir}/${name}")
                math(EXPR replaced "${replaced} + 1")
            else()
                list(APPEND patched_sources "${source}")
            endif()
        endforeach()
        if(NOT replaced EQUAL 2)
            message(FATAL_ERROR "qmemo ML-DSA conformance: ${target} lists ${replaced} of sign.c and rounding.c")
        endif()
        set_property(TARGET ${target} PROPERTY SOURCES "${patched_sources}")

        list(APPEND conforming_objects "$<TARGET_OBJECTS:${target}>")
        # The shipped code, with the patched target's own flags and include folders.
        set(shipped "qmemo_${target}_shipped")
        add_library(${shipped} OBJECT ${shipped_sources})
        foreach(property COMPILE_OPTIONS COMPILE_DEFINITIONS INCLUDE_DIRECTORIES C_STANDARD C_EXTENSIONS
                         C_VISIBILITY_PRESET POSITION_INDEPENDENT_CODE)
            get_target_property(value ${target} ${property})
            if(NOT value STREQUAL "value-NOTFOUND")
                set_property(TARGET ${shipped} PROPERTY ${property} "${value}")
            endif()
        endforeach()
        list(APPEND shipped_objects "$<TARGET_OBJECTS:${shipped}>")
    endforeach()
    # The setup builds this target whatever the CPU: the archives where there is AVX2 code.
    add_custom_target(qmemo_mldsa_bench)
    if(shipped_objects STREQUAL "")
        message(STATUS "qmemo ML-DSA conformance: no AVX2 ML-DSA in this build, nothing to patch")
        return()
    endif()
    # liboqs's common objects as liboqs.so links them (its `oqs` target's object lists).
    get_target_property(oqs_sources oqs SOURCES)
    set(common_objects "")
    foreach(source IN LISTS oqs_sources)
        if(source MATCHES "^\\$<TARGET_OBJECTS:(common|xkcp_low_[A-Za-z0-9_]+)>$")
            list(APPEND common_objects "${source}")
        endif()
    endforeach()
    if(NOT common_objects MATCHES "TARGET_OBJECTS:common>")
        message(FATAL_ERROR "qmemo ML-DSA conformance: liboqs's `oqs` target lists no common objects")
    endif()
    foreach(flavour conforming shipped)
        set(archive "qmemo_mldsa_${flavour}")
        add_library(${archive} STATIC ${${flavour}_objects} ${common_objects})
        add_custom_command(TARGET ${archive} POST_BUILD
            COMMAND "${CMAKE_COMMAND}" "-DARCHIVE=$<TARGET_FILE:${archive}>" "-DPREFIX=qmemo_${flavour}_"
                    "-DNM=${CMAKE_NM}" "-DOBJCOPY=${CMAKE_OBJCOPY}" -P "${QMEMO_MLDSA_CONFORMANCE_DIR}/rename_symbols.cmake"
            VERBATIM)
        install(FILES "$<TARGET_FILE:${archive}>" DESTINATION "${CMAKE_INSTALL_LIBDIR}/qmemo" OPTIONAL)
        add_dependencies(qmemo_mldsa_bench ${archive})
    endforeach()
    message(STATUS "qmemo ML-DSA conformance: AVX2 verify patched (z bound, use_hint); "
                   "targets qmemo_mldsa_conforming and qmemo_mldsa_shipped for the benchmark")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL qmemo_mldsa_conformance)
