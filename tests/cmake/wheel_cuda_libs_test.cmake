# cmake/WheelCudaLibs.cmake's choice, on fake toolkit and wheel folders (run with cmake -P; CTest
# cmake_wheel_cuda_libs): the wheel's copy of the same SONAME wins, another major or no wheel leaves the toolkit's.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/WheelCudaLibs.cmake)

set(root "${WORK_DIR}/wheel_cuda_libs")
file(REMOVE_RECURSE "${root}")
# A toolkit: libcublas.so -> libcublas.so.13 -> libcublas.so.13.1.0.3, libcusolver.so -> libcusolver.so.12,
# libcudart.so -> libcudart.so.13.0.48.
set(tk "${root}/cuda/lib")
file(MAKE_DIRECTORY "${tk}")
file(WRITE "${tk}/libcublas.so.13.1.0.3" "")
file(CREATE_LINK libcublas.so.13.1.0.3 "${tk}/libcublas.so.13" SYMBOLIC)
file(CREATE_LINK libcublas.so.13 "${tk}/libcublas.so" SYMBOLIC)
file(WRITE "${tk}/libcusolver.so.12" "")
file(CREATE_LINK libcusolver.so.12 "${tk}/libcusolver.so" SYMBOLIC)
file(WRITE "${tk}/libcudart.so.13.0.48" "")
file(CREATE_LINK libcudart.so.13.0.48 "${tk}/libcudart.so" SYMBOLIC)

function(expect what got want)
  if(NOT "${got}" STREQUAL "${want}")
    message(FATAL_ERROR "${what}: got '${got}', expected '${want}'")
  endif()
  message(STATUS "ok: ${what}")
endfunction()

# A CUDA 13 wheel: site-packages/torch beside site-packages/nvidia/cu13/lib holding the SONAME files only.
set(sp13 "${root}/cu13/site-packages")
file(MAKE_DIRECTORY "${sp13}/torch" "${sp13}/nvidia/cu13/lib")
file(WRITE "${sp13}/nvidia/cu13/lib/libcublas.so.13" "")
file(WRITE "${sp13}/nvidia/cu13/lib/libcudart.so.13" "")
mr_wheel_cuda_copy(got "${tk}/libcublas.so" "${sp13}/torch")
expect("cu13 wheel: cublas" "${got}" "${sp13}/nvidia/cu13/lib/libcublas.so.13")
mr_wheel_cuda_copy(got "${tk}/libcudart.so" "${sp13}/torch")
expect("cu13 wheel: cudart (toolkit file libcudart.so.13.0.48)" "${got}" "${sp13}/nvidia/cu13/lib/libcudart.so.13")
mr_wheel_cuda_copy(got "${tk}/libcusolver.so" "${sp13}/torch")
expect("cu13 wheel without cusolver: the toolkit's" "${got}" "")

# A CUDA 12 wheel (one folder per package) beside a CUDA 13 toolkit: other SONAMEs, nothing taken.
set(sp12 "${root}/cu12/site-packages")
file(MAKE_DIRECTORY "${sp12}/torch" "${sp12}/nvidia/cublas/lib" "${sp12}/nvidia/cusolver/lib")
file(WRITE "${sp12}/nvidia/cublas/lib/libcublas.so.12" "")
file(WRITE "${sp12}/nvidia/cusolver/lib/libcusolver.so.11" "")
mr_wheel_cuda_copy(got "${tk}/libcublas.so" "${sp12}/torch")
expect("cu12 wheel, CUDA 13 toolkit: cublas" "${got}" "")
# ... and one per-package folder holding the same SONAME (a CUDA 12-style layout of cusolver 12): taken.
file(WRITE "${sp12}/nvidia/cusolver/lib/libcusolver.so.12" "")
mr_wheel_cuda_copy(got "${tk}/libcusolver.so" "${sp12}/torch")
expect("per-package folder: cusolver" "${got}" "${sp12}/nvidia/cusolver/lib/libcusolver.so.12")

# Debian's LibTorch (no wheel folders), no LibTorch at all, no toolkit library.
file(MAKE_DIRECTORY "${root}/usr/lib/torch")
mr_wheel_cuda_copy(got "${tk}/libcublas.so" "${root}/usr/lib/torch")
expect("no wheel" "${got}" "")
mr_wheel_cuda_copy(got "${tk}/libcublas.so" "")
expect("no LibTorch" "${got}" "")
mr_wheel_cuda_copy(got "" "${sp13}/torch")
expect("no toolkit library" "${got}" "")
file(REMOVE_RECURSE "${root}")
