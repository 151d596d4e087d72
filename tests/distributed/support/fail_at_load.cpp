// A library for LD_PRELOAD in worker_test.cpp: its constructor runs after the worker's .preinit_array and before the
// worker's main(), as LibTorch's and the CUDA libraries' do. MR_TEST_FAIL_AT_LOAD=segv crashes there (as
// libcublasLt's start-up does when an allocation it does not check fails under `ulimit -v`); =bad_alloc throws
// std::bad_alloc there (as LibTorch's operator registration does). Unset: nothing.
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {

__attribute__((constructor)) void fail_at_load() {
  const char* how = std::getenv("MR_TEST_FAIL_AT_LOAD");
  if (!how) return;
  if (std::strcmp(how, "segv") == 0) std::raise(SIGSEGV);
  if (std::strcmp(how, "bad_alloc") == 0) throw std::bad_alloc();
}

}  // namespace
