# -DMEGATRON_RUN_SANITIZE=address,undefined builds the whole tree with the sanitizers (docs/robustness.md).
set(MEGATRON_RUN_SANITIZE "" CACHE STRING "Build with -fsanitize=<list> (e.g. address,undefined)")
if(MEGATRON_RUN_SANITIZE)
  # C++ only: nvcc does not take -fsanitize (the host code of .cu files stays uninstrumented).
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${MEGATRON_RUN_SANITIZE};-fno-omit-frame-pointer;-fno-sanitize-recover=all>")
  add_link_options(-fsanitize=${MEGATRON_RUN_SANITIZE})
  # GCC 12 warns "may be used uninitialized" inside libstdc++ (std::regex's automaton moving a std::function,
  # rerun_tracker.cpp) once the sanitizers' instrumentation changes its inlining: false positives in library code
  # that the plain -Werror build does not see.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND MR_WARNINGS -Wno-maybe-uninitialized)
  endif()
endif()

# Called at the end of each folder that adds tests: under the sanitizers every test of that folder runs with the
# sanitizers' options. They are environment variables, so the processes a test starts (megatron-run, its workers,
# the benchmark) inherit them. tests/sanitize/*.supp silence findings inside the uninstrumented third-party
# libraries only (LibTorch, OpenBLAS, Gloo), never in our own code. Nothing is preloaded: the runtime is linked into
# our binaries alone, so the Python interpreters some tests start (json_schema, torchrun, the checkpoint reader)
# run without it.
function(mr_sanitizer_test_env)
  if(NOT MEGATRON_RUN_SANITIZE)
    return()
  endif()
  set(supp ${PROJECT_SOURCE_DIR}/tests/sanitize)
  set(san_env
      "ASAN_OPTIONS=set:detect_leaks=1:check_initialization_order=1:strict_init_order=1:halt_on_error=1:suppressions=${supp}/asan.supp"
      "LSAN_OPTIONS=set:suppressions=${supp}/lsan.supp:print_suppressions=0"
      "UBSAN_OPTIONS=set:print_stacktrace=1:halt_on_error=1:suppressions=${supp}/ubsan.supp"
      # For the tests themselves: an ASan process cannot run under an address-space limit (its shadow memory), so
      # tests/bad-inputs/run.py bounds memory through ASan's allocator instead of RLIMIT_AS.
      "MR_SANITIZED=set:1")
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t ${tests})
    get_test_property(${t} ENVIRONMENT_MODIFICATION env)
    if(NOT env)
      set(env "")
    endif()
    list(APPEND env ${san_env})
    set_tests_properties(${t} PROPERTIES ENVIRONMENT_MODIFICATION "${env}")
  endforeach()
endfunction()
