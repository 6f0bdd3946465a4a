# BLAKE3 from the official C sources shipped by Debian's librust-blake3-dev,
# compiled with their x86-64 SIMD assembly (SSE2, SSE4.1, AVX2, AVX-512) and
# runtime dispatch. Nothing from BLAKE3 is vendored in this repository.
file(GLOB _blake3_dirs LIST_DIRECTORIES true /usr/share/cargo/registry/blake3-*/c)
list(SORT _blake3_dirs)
list(GET _blake3_dirs -1 BLAKE3_C_DIR)
if(NOT EXISTS ${BLAKE3_C_DIR}/blake3.h)
  message(FATAL_ERROR "BLAKE3 C sources not found; run scripts/bootstrap.sh (librust-blake3-dev)")
endif()
message(STATUS "BLAKE3 C sources: ${BLAKE3_C_DIR}")

set(_blake3_src
  ${BLAKE3_C_DIR}/blake3.c
  ${BLAKE3_C_DIR}/blake3_dispatch.c
  ${BLAKE3_C_DIR}/blake3_portable.c)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  list(APPEND _blake3_src
    ${BLAKE3_C_DIR}/blake3_sse2_x86-64_unix.S
    ${BLAKE3_C_DIR}/blake3_sse41_x86-64_unix.S
    ${BLAKE3_C_DIR}/blake3_avx2_x86-64_unix.S
    ${BLAKE3_C_DIR}/blake3_avx512_x86-64_unix.S)
  set(_blake3_defs)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  list(APPEND _blake3_src ${BLAKE3_C_DIR}/blake3_neon.c)
  set(_blake3_defs BLAKE3_USE_NEON=1)
else()
  set(_blake3_defs BLAKE3_NO_SSE2 BLAKE3_NO_SSE41 BLAKE3_NO_AVX2 BLAKE3_NO_AVX512)
endif()

add_library(cgn_blake3 STATIC ${_blake3_src})
target_include_directories(cgn_blake3 SYSTEM PUBLIC ${BLAKE3_C_DIR})
target_compile_definitions(cgn_blake3 PRIVATE ${_blake3_defs})
set_target_properties(cgn_blake3 PROPERTIES POSITION_INDEPENDENT_CODE ON)
# The sanitizers have nothing to say about the reference assembly.
target_compile_options(cgn_blake3 PRIVATE -O3 -fno-sanitize=all)
