# The layering check (docs/design/layout.md). At generate time every target's direct link
# libraries are written to ${CMAKE_BINARY_DIR}/link_graph.cmake; the CTest test `layering`
# (cmake/check_layering.cmake) reads that file, follows the links transitively and fails when a
# rule below is broken. Adding cgn_agent to cgn_router's libraries, for instance, fails it at
# the next `ctest` (the graph is rewritten whenever CMake regenerates).

# Collects the build-system targets of `dir` and its subdirectories into `out`.
function(cgn_collect_targets dir out)
  get_property(_targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(d ${_subdirs})
    cgn_collect_targets(${d} _sub)
    list(APPEND _targets ${_sub})
  endforeach()
  set(${out} ${_targets} PARENT_SCOPE)
endfunction()

# Writes the graph and registers the test. Call once, at the end of the top-level CMakeLists.
function(cgn_layering_check)
  cgn_collect_targets(${CMAKE_SOURCE_DIR} _all)
  set(_content "")
  foreach(t ${_all})
    get_target_property(_type ${t} TYPE)
    if(_type STREQUAL "UTILITY" OR _type STREQUAL "GLOBAL_TARGET")
      continue()
    endif()
    if(_type STREQUAL "INTERFACE_LIBRARY")
      string(APPEND _content "set(\"CGN_LINKS_${t}\" \"$<TARGET_PROPERTY:${t},INTERFACE_LINK_LIBRARIES>\")\n")
    else()
      string(APPEND _content "set(\"CGN_LINKS_${t}\" \"$<TARGET_PROPERTY:${t},LINK_LIBRARIES>\")\n")
    endif()
  endforeach()
  list(JOIN _all ";" _all_joined)
  string(APPEND _content "set(CGN_TARGETS \"${_all_joined}\")\n")
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/link_graph.cmake CONTENT "${_content}")
  add_test(NAME layering COMMAND ${CMAKE_COMMAND} -DGRAPH=${CMAKE_BINARY_DIR}/link_graph.cmake -P
                                 ${CMAKE_SOURCE_DIR}/cmake/check_layering.cmake)
  set_tests_properties(layering PROPERTIES LABELS unit TIMEOUT 60)
endfunction()
