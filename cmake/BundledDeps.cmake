# Boost, yaml-cpp and Catch2 from MEGATRON_RUN_DEPS_DIR, the folder scripts/device-bundle.sh makes (docs/device.md).
# Defines the targets the system packages would (Boost::program_options, Boost::log, Boost::log_setup, yaml-cpp,
# Catch2::Catch2) as imported targets on the bundle's static libraries and headers; nothing is searched for in
# the system paths. The include folder is a SYSTEM include (as /usr/include is for the system packages), so
# MR_WARNINGS and MEGATRON_RUN_WERROR see no more of these headers than before.
get_filename_component(MR_DEPS_DIR "${MEGATRON_RUN_DEPS_DIR}" ABSOLUTE)
set(MR_DEPS_INCLUDE ${MR_DEPS_DIR}/include)
set(MR_DEPS_LIB ${MR_DEPS_DIR}/lib)
if(NOT EXISTS ${MR_DEPS_INCLUDE}/boost/version.hpp OR NOT EXISTS ${MR_DEPS_INCLUDE}/yaml-cpp/yaml.h
   OR NOT EXISTS ${MR_DEPS_INCLUDE}/catch2/catch.hpp)
  message(FATAL_ERROR "MEGATRON_RUN_DEPS_DIR=${MEGATRON_RUN_DEPS_DIR} is not a bundle from scripts/device-bundle.sh")
endif()
if(NOT MEGATRON_RUN_STATIC_DEPS)
  message(FATAL_ERROR "MEGATRON_RUN_DEPS_DIR holds static libraries only: leave MEGATRON_RUN_STATIC_DEPS ON")
endif()

add_library(Boost::headers INTERFACE IMPORTED)
set_target_properties(Boost::headers PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES ${MR_DEPS_INCLUDE}
  INTERFACE_COMPILE_DEFINITIONS BOOST_ALL_NO_LIB)

# name -> the bundle libraries it needs after it (the order of the system packages' link line).
set(MR_BOOST_DEPS_atomic "")
set(MR_BOOST_DEPS_chrono "")
set(MR_BOOST_DEPS_regex "")
set(MR_BOOST_DEPS_thread "Boost::chrono;Boost::atomic;Threads::Threads")
set(MR_BOOST_DEPS_filesystem "Boost::atomic")
set(MR_BOOST_DEPS_program_options "")
set(MR_BOOST_DEPS_log "Boost::chrono;Boost::filesystem;Boost::regex;Boost::thread;Boost::atomic;Threads::Threads")
set(MR_BOOST_DEPS_log_setup "Boost::log")
foreach(lib atomic chrono regex thread filesystem program_options log log_setup)
  set(file ${MR_DEPS_LIB}/libboost_${lib}.a)
  if(NOT EXISTS ${file})
    message(FATAL_ERROR "MEGATRON_RUN_DEPS_DIR: ${file} missing (rerun scripts/device-bundle.sh)")
  endif()
  add_library(Boost::${lib} STATIC IMPORTED)
  set_target_properties(Boost::${lib} PROPERTIES
    IMPORTED_LOCATION ${file}
    IMPORTED_LINK_INTERFACE_LANGUAGES CXX
    INTERFACE_LINK_LIBRARIES "Boost::headers;${MR_BOOST_DEPS_${lib}}")
endforeach()
file(STRINGS ${MR_DEPS_INCLUDE}/boost/version.hpp MR_BOOST_LIB_VERSION REGEX "define BOOST_LIB_VERSION")
string(REGEX REPLACE ".*\"(.*)\".*" "Boost \\1" MR_BOOST_LIB_VERSION "${MR_BOOST_LIB_VERSION}")
set(Boost_FOUND TRUE)

add_library(yaml-cpp STATIC IMPORTED)
set_target_properties(yaml-cpp PROPERTIES
  IMPORTED_LOCATION ${MR_DEPS_LIB}/libyaml-cpp.a
  IMPORTED_LINK_INTERFACE_LANGUAGES CXX
  INTERFACE_INCLUDE_DIRECTORIES ${MR_DEPS_INCLUDE})
set(MR_YAML_CPP yaml-cpp)
set(YAML_CPP_INCLUDE_DIR "")  # the target carries it (as a system include)

add_library(Catch2::Catch2 INTERFACE IMPORTED)
set_target_properties(Catch2::Catch2 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${MR_DEPS_INCLUDE})

message(STATUS "megatron-run: Boost, yaml-cpp and Catch2 from ${MR_DEPS_DIR} (${MR_BOOST_LIB_VERSION})")
