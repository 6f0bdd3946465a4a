# Test-time half of the layering check (cmake/LinkGraph.cmake writes the graph it reads).
# Rules, in the words of docs/design/layout.md:
#   - cgn_cluster (the cluster contract) links only cgn_core, cgn_routing and the generated
#     protobuf library cgn_proto_cognitora, and what those link;
#   - no state backend (cgn_state*) and no router library or binary links cgn_agent;
#   - cgn_agent reaches the backends only through their registry (cgn_state), never one backend's
#     library directly;
#   - cgn_routing and cgn_core link no module above them;
#   - cgn_daemon (what the cgn-power and cgn-kvcached daemons share) links only core and its
#     HTTP helpers;
#   - cgn_power (the power reader the agent embeds) links only core, its HTTP, TLS and daemon
#     helpers, cgn_routing (the Prometheus parser) and the protobuf library;
#   - cgn_kvcache (the block store) links only cgn_core; neither it nor cgn_kvcached (the daemon)
#     reaches cgn_agent, a router library or a state backend.
# Run: cmake -DGRAPH=build/link_graph.cmake -P cmake/check_layering.cmake
cmake_minimum_required(VERSION 3.25)
if(NOT GRAPH OR NOT EXISTS "${GRAPH}")
  message(FATAL_ERROR "layering: the link graph '${GRAPH}' is missing (configure the build first)")
endif()
include("${GRAPH}")

# Direct links of `t`, our own targets and imported ones, without CMake's directory markers.
function(direct_links t out)
  set(_res)
  foreach(l ${CGN_LINKS_${t}})
    if(l MATCHES "^::@" OR l MATCHES "^\\$<" OR l STREQUAL "")
      continue()
    endif()
    list(APPEND _res ${l})
  endforeach()
  set(${out} ${_res} PARENT_SCOPE)
endfunction()

# Everything `t` links, transitively (each path it takes is recorded as "a -> b -> c").
function(closure t out)
  set(_seen)
  set(_queue ${t})
  set("_path_${t}" "${t}")
  while(_queue)
    list(POP_FRONT _queue cur)
    direct_links(${cur} _links)
    foreach(l ${_links})
      if(NOT l IN_LIST _seen)
        list(APPEND _seen ${l})
        list(APPEND _queue ${l})
        set("_path_${l}" "${_path_${cur}} -> ${l}")
        set("CGN_PATH_${t}_${l}" "${_path_${l}}" PARENT_SCOPE)
      endif()
    endforeach()
  endwhile()
  set(${out} ${_seen} PARENT_SCOPE)
endfunction()

set(failures 0)

# `t` must not reach `dep` through any chain of links.
function(forbid t dep)
  if(NOT t IN_LIST CGN_TARGETS)
    message(SEND_ERROR "layering: target ${t} named by a rule does not exist")
    return()
  endif()
  closure(${t} _all)
  if(dep IN_LIST _all)
    message(SEND_ERROR "layering: ${t} must not link ${dep}; it does: ${CGN_PATH_${t}_${dep}}")
  endif()
endfunction()

# Our own libraries (cgn_*) that `t` reaches must be among `allowed` or linked by them.
function(only t)
  set(allowed ${ARGN})
  set(_ok ${allowed} cgn_warnings)
  foreach(a ${allowed})
    closure(${a} _c)
    list(APPEND _ok ${_c})
  endforeach()
  closure(${t} _all)
  foreach(l ${_all})
    if(l MATCHES "^cgn_" AND NOT l IN_LIST _ok)
      message(SEND_ERROR "layering: ${t} may link only ${allowed} (and what they link); "
                         "it links ${l}: ${CGN_PATH_${t}_${l}}")
    endif()
  endforeach()
endfunction()

only(cgn_core cgn_blake3)
only(cgn_routing cgn_core)
only(cgn_cluster cgn_core cgn_routing cgn_proto_cognitora)
only(cgn_kvcache cgn_core)
if(cgn_daemon IN_LIST CGN_TARGETS)
  only(cgn_daemon cgn_core cgn_http)
endif()
if(cgn_power IN_LIST CGN_TARGETS)
  only(cgn_power cgn_core cgn_http cgn_tls cgn_daemon cgn_routing cgn_proto_cognitora)
endif()
foreach(t cgn_kvcache cgn_kvcached)
  if(t IN_LIST CGN_TARGETS)
    closure(${t} _kv_all)
    foreach(l ${_kv_all})
      if(l STREQUAL "cgn_agent" OR l MATCHES "^cgn_router" OR l MATCHES "^cgn_state")
        message(SEND_ERROR "layering: ${t} must not link ${l}; it does: ${CGN_PATH_${t}_${l}}")
      endif()
    endforeach()
  endif()
endforeach()
foreach(t ${CGN_TARGETS})
  if(t MATCHES "^cgn_state" OR t MATCHES "^cgn_router" OR t STREQUAL "cgn-router")
    forbid(${t} cgn_agent)
  endif()
endforeach()
direct_links(cgn_agent _agent_links)
foreach(l ${_agent_links})
  if(l MATCHES "^cgn_state_")
    message(SEND_ERROR "layering: cgn_agent must reach ${l} through the backend registry (cgn_state), "
                       "not link it directly")
  endif()
endforeach()
message(STATUS "layering: ${CMAKE_CURRENT_LIST_FILE}: rules hold")
