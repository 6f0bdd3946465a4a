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

# KV events (vLLM/SGLang wire: ZMQ frames carrying msgpack): libzmq3-dev via pkg-config, and
# msgpuck (libmsgpuck-dev, no .pc file) for the simulator's encoder. libmsgpack-cxx-dev is not
# usable here: it depends on libboost-dev (1.74), which conflicts with libboost1.81-dev.
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
find_path(MSGPUCK_INCLUDE_DIR msgpuck.h REQUIRED)
find_library(MSGPUCK_LIBRARY NAMES libmsgpuck.a msgpuck REQUIRED)
add_library(cgn_msgpuck INTERFACE)
target_include_directories(cgn_msgpuck SYSTEM INTERFACE ${MSGPUCK_INCLUDE_DIR})
target_link_libraries(cgn_msgpuck INTERFACE ${MSGPUCK_LIBRARY})

# sd_notify readiness for systemd's Type=notify units (core/sd_notify.h): libsystemd-dev.
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)
