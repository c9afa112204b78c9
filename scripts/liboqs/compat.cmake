# Injected into liboqs's own CMake project with -DCMAKE_PROJECT_liboqs_INCLUDE=<this file>.
#
# Why: liboqs-python 0.16 needs OQS_SIG_supports_ctx_str, which liboqs 0.13 lacks
# (see oqs_compat.c). Adding one source file to the `oqs` target from outside keeps
# the liboqs source untouched (it lives read-only in cargo's registry cache) and
# puts the symbol into the very liboqs.so that everything loads.
#
# The `oqs` target is created later, in src/CMakeLists.txt, so the call is deferred
# to the end of the top-level directory, when that target exists.
set(QMEMO_OQS_COMPAT_SOURCE "${CMAKE_CURRENT_LIST_DIR}/oqs_compat.c")

function(qmemo_add_oqs_compat)
    if(NOT TARGET oqs)
        message(FATAL_ERROR "qmemo compat: liboqs defined no `oqs` target")
    endif()
    target_sources(oqs PRIVATE "${QMEMO_OQS_COMPAT_SOURCE}")
    message(STATUS "qmemo compat: OQS_SIG_supports_ctx_str added to liboqs")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL qmemo_add_oqs_compat)

# The AVX2 ML-DSA verify made FIPS 204's (see that file): every liboqs qMEMO builds has it.
include("${CMAKE_CURRENT_LIST_DIR}/mldsa_conformance.cmake")
