# Precompiled headers (RBMREC_PCH): the third-party headers nearly every file
# includes (the C++ library, Abseil, Eigen, protobuf and the generated API,
# gRPC, GoogleTest) are compiled once per library and once for all test
# executables of a kind, instead of once per file. GCC's -ftime-report puts
# most of a service file's compile time in parsing; with these headers
# precompiled, server/service/erasure.cc and service.cc took 80-85% of the
# CPU time of a plain compile. Off by default: a developer build with ccache
# caches better without them. Not yet used by CI or the image: a build with
# it on must first pass scripts/test.sh.
option(RBMREC_PCH "Precompile the common third-party headers" OFF)

set(RBMREC_PCH_BASE <algorithm> <cmath> <cstdint> <functional> <memory> <optional>
  <string> <string_view> <utility> <vector> <absl/status/status.h>
  <absl/status/statusor.h> <absl/strings/str_cat.h> <absl/strings/str_format.h>)
set(RBMREC_PCH_CORE ${RBMREC_PCH_BASE} <Eigen/Core>)
set(RBMREC_PCH_API ${RBMREC_PCH_BASE} <absl/synchronization/mutex.h>
  <absl/container/flat_hash_map.h> <grpcpp/grpcpp.h> <proto/rbmrec.pb.h>
  <proto/rbmrec.grpc.pb.h>)
set(RBMREC_PCH_SERVICE ${RBMREC_PCH_API} <Eigen/Core>)
set(RBMREC_PCH_TEST_BASE ${RBMREC_PCH_BASE} <gtest/gtest.h> <gmock/gmock.h>)
set(RBMREC_PCH_TEST_CORE ${RBMREC_PCH_CORE} <gtest/gtest.h> <gmock/gmock.h>)
set(RBMREC_PCH_TEST_SERVICE ${RBMREC_PCH_SERVICE} <gtest/gtest.h> <gmock/gmock.h>)

# rbmrec_precompile(TARGET KIND): TARGET compiles the headers of KIND (BASE,
# CORE, API or SERVICE) once for its own files.
function(rbmrec_precompile target kind)
  if(RBMREC_PCH)
    target_precompile_headers(${target} PRIVATE ${RBMREC_PCH_${kind}})
  endif()
endfunction()

# rbmrec_test_pch_holder(NAME KIND LIBS...): a target that only precompiles
# the headers of KIND (TEST_BASE,
# TEST_CORE or TEST_SERVICE), with the compile flags of
# the test executables that link LIBS; rbmrec_reuse_pch() points them at it.
function(rbmrec_test_pch_holder name kind)
  if(NOT RBMREC_PCH)
    return()
  endif()
  set(stub ${CMAKE_CURRENT_BINARY_DIR}/${name}.cc)
  if(NOT EXISTS ${stub})
    file(WRITE ${stub} "// Compiles the precompiled headers of ${name} only.\n")
  endif()
  add_library(${name} OBJECT ${stub})
  target_link_libraries(${name} PRIVATE ${ARGN})
  target_precompile_headers(${name} PRIVATE ${RBMREC_PCH_${kind}})
endfunction()

function(rbmrec_reuse_pch target holder)
  if(RBMREC_PCH)
    target_precompile_headers(${target} REUSE_FROM ${holder})
  endif()
endfunction()

# rbmrec_reuse_pch_in_directory(DIR HOLDER LIBS...): every executable defined
# in DIR (a source folder already added) that links one of LIBS reuses
# HOLDER's precompiled headers.
function(rbmrec_reuse_pch_in_directory dir holder)
  if(NOT RBMREC_PCH)
    return()
  endif()
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    # Only suites compiled with the holder's flags: those linking one of
    # its libraries directly (ARGN; e.g. a suite of rbmrec_auth alone lacks
    # the -pthread that gRPC adds, and GCC would refuse the header).
    get_target_property(libs ${target} LINK_LIBRARIES)
    set(match FALSE)
    foreach(lib ${ARGN})
      if(lib IN_LIST libs)
        set(match TRUE)
      endif()
    endforeach()
    if(type STREQUAL "EXECUTABLE" AND match)
      rbmrec_reuse_pch(${target} ${holder})
    endif()
  endforeach()
endfunction()
