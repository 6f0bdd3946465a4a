# Digest pieces of src/core that the file-name convention of cgn_module()
# does not cover (included from src/core/CMakeLists.txt).

# cgn-digest: prints a request's prefix digests (docs/architecture/digests.md).
add_executable(cgn-digest ${CMAKE_CURRENT_LIST_DIR}/cgn_digest_main.cpp)
# Its options and output live in the library (digest_cli.cpp, unit-tested); the main is thin.
target_link_libraries(cgn_core PRIVATE CLI11::CLI11)
target_link_libraries(cgn-digest PRIVATE cgn_core cgn_warnings)

# The unit tests run cgn-digest as a child process: build it with them.
if(TARGET core_unit_tests)
  add_dependencies(core_unit_tests cgn-digest)
endif()

# digest_bench.cpp has no main() of its own so that other benchmark files of
# the module can share bench_core; Google Benchmark's main is linked from
# benchmark_main (a main() defined by another file takes precedence).
if(TARGET bench_core)
  target_link_libraries(bench_core PRIVATE benchmark::benchmark_main)
endif()
