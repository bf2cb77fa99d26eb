# `cmake --install` puts snapflow's headers, static libraries, binaries and a CMake package
# (snapflowConfig.cmake + exported targets) under the prefix, so a user's own project can
# find_package(snapflow) and link snapflow::worker to build a worker with custom operators
# (tests/install/out_of_tree_worker is such a project), or snapflow::program to build a user
# program that is both its job's client and its worker (examples/user-program).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SNAPFLOW_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/snapflow)
set(SNAPFLOW_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/snapflow)

set(snapflow_exported_libraries
  snapflow_common snapflow_graph snapflow_engine snapflow_cluster snapflow_api snapflow_transport
  snapflow_process_logging snapflow_cpu_affinity snapflow_nexmark
  snapflow_worker_lib snapflow_rest_client snapflow_program)
# Headers are included from the repository root ("engine/runtime/stream_operator.hpp"): the
# same paths work under <prefix>/include/snapflow.
foreach(lib IN LISTS snapflow_exported_libraries)
  set_target_properties(${lib} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>;$<INSTALL_INTERFACE:${SNAPFLOW_INSTALL_INCLUDEDIR}>")
endforeach()
set_target_properties(snapflow_common PROPERTIES EXPORT_NAME common)
set_target_properties(snapflow_graph PROPERTIES EXPORT_NAME graph)
set_target_properties(snapflow_engine PROPERTIES EXPORT_NAME engine)
set_target_properties(snapflow_cluster PROPERTIES EXPORT_NAME cluster)
set_target_properties(snapflow_api PROPERTIES EXPORT_NAME api)
set_target_properties(snapflow_transport PROPERTIES EXPORT_NAME transport)
set_target_properties(snapflow_process_logging PROPERTIES EXPORT_NAME process_logging)
set_target_properties(snapflow_cpu_affinity PROPERTIES EXPORT_NAME cpu_affinity)
set_target_properties(snapflow_worker_lib PROPERTIES EXPORT_NAME worker)
set_target_properties(snapflow_nexmark PROPERTIES EXPORT_NAME nexmark)
set_target_properties(snapflow_rest_client PROPERTIES EXPORT_NAME rest_client)
set_target_properties(snapflow_program PROPERTIES EXPORT_NAME program)
# Users' translation units must allocate through Asio the way snapflow's do (see the root
# CMakeLists), so the definition travels with the Asio target.
target_compile_definitions(snapflow_asio INTERFACE ASIO_DISABLE_STD_ALIGNED_ALLOC)

install(TARGETS ${snapflow_exported_libraries}
                snapflow_asio snapflow_msgpack snapflow_httplib snapflow_warnings
        EXPORT snapflowTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS snapflow snapflow-coordinator snapflow-worker
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY common graph engine transport cmd workloads
        DESTINATION ${SNAPFLOW_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp"
        PATTERN "cli" EXCLUDE)
install(EXPORT snapflowTargets
        NAMESPACE snapflow::
        DESTINATION ${SNAPFLOW_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/snapflowConfig.cmake.in
  ${PROJECT_BINARY_DIR}/snapflowConfig.cmake
  INSTALL_DESTINATION ${SNAPFLOW_INSTALL_CMAKEDIR}
  PATH_VARS SNAPFLOW_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/snapflowConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/snapflowConfig.cmake
              ${PROJECT_BINARY_DIR}/snapflowConfigVersion.cmake
        DESTINATION ${SNAPFLOW_INSTALL_CMAKEDIR})
