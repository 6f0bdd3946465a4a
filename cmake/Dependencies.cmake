# All dependencies come from Debian bookworm packages (scripts/bootstrap.sh).
find_package(Threads REQUIRED)
find_package(Boost 1.81 EXACT REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(simdjson REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
find_package(PkgConfig REQUIRED)

# Boost headers only (Asio, Beast): define once for every consumer.
add_library(cgn_boost INTERFACE)
target_link_libraries(cgn_boost INTERFACE Boost::headers Threads::Threads)
target_compile_definitions(cgn_boost INTERFACE BOOST_ASIO_NO_DEPRECATED)
