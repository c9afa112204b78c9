# rename_symbols.cmake - prefix every symbol an archive defines, in place (cmake -P).
#
#   cmake -DARCHIVE=lib.a -DPREFIX=qmemo_shipped_ -DNM=nm -DOBJCOPY=objcopy -P rename_symbols.cmake
#
# Why: mldsa_conformance.cmake builds liboqs's AVX2 ML-DSA as shipped next to the patched
# one. Both define the same names (pqcrystals_ml_dsa_44_avx2_verify, ...), and liboqs.so
# exports some of them (the assembly, the *_internal entry points): a program linking the
# shipped archive and liboqs.so would otherwise let one copy take over the other's calls,
# and OQS_SIG_verify could run the unpatched code. Every defined symbol (local ones too:
# nothing is left to collide) gets PREFIX, and every reference to it inside the archive
# follows; references to what the archive does not define (libc, OpenSSL) stay.
foreach(var ARCHIVE PREFIX NM OBJCOPY)
    if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
        message(FATAL_ERROR "rename_symbols.cmake: -D${var}= is required")
    endif()
endforeach()

execute_process(COMMAND "${NM}" --defined-only --format=posix "${ARCHIVE}"
                OUTPUT_VARIABLE listing RESULT_VARIABLE status)
if(NOT status EQUAL 0)
    message(FATAL_ERROR "rename_symbols.cmake: ${NM} failed on ${ARCHIVE}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(names "")
foreach(line IN LISTS lines)
    # posix format: "name type [value size]"; a member's header ends in ':'. Section and
    # file symbols (types N, a/f debug) are not names code refers to.
    if(line MATCHES "^([A-Za-z_][A-Za-z0-9_.$]*) ([TtDdBbRrVvWw]) ")
        list(APPEND names "${CMAKE_MATCH_1}")
    endif()
endforeach()
list(REMOVE_DUPLICATES names)
list(LENGTH names count)
if(count EQUAL 0)
    message(FATAL_ERROR "rename_symbols.cmake: ${ARCHIVE} defines no symbol")
endif()
set(map "")
foreach(name IN LISTS names)
    string(APPEND map "${name} ${PREFIX}${name}\n")
endforeach()
file(WRITE "${ARCHIVE}.renames" "${map}")
execute_process(COMMAND "${OBJCOPY}" "--redefine-syms=${ARCHIVE}.renames" "${ARCHIVE}" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
    message(FATAL_ERROR "rename_symbols.cmake: ${OBJCOPY} failed on ${ARCHIVE}")
endif()
