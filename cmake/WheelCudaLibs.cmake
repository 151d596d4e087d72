# The CUDA libraries megatron-run links (cudart, cuBLAS, cuSOLVER): a PyTorch wheel's own copy where it ships one
# with the same SONAME as the toolkit's, else the toolkit's. A process maps one libcublas.so.13 (the first the
# loader meets, whoever asked for it), so linking the toolkit's would hand an older or newer cuBLAS than the one
# LibTorch was built against to LibTorch too; NCCL is chosen the same way (lib/distributed/CMakeLists.txt).
# A wheel's copy of another major version (another SONAME) is not taken: megatron-run compiles against the
# toolkit's headers, and the two then load side by side (scripts/gpu-check.sh warns of that).
#
# Wheel layouts: CUDA 13 wheels put every library in site-packages/nvidia/cu13/lib, CUDA 12 ones one directory per
# package (nvidia/cublas/lib, nvidia/cuda_runtime/lib, ...); LibTorch is site-packages/torch.

# mr_wheel_cuda_copy(OUT TOOLKIT_LIBRARY TORCH_PREFIX): OUT is the wheel's file of TOOLKIT_LIBRARY's SONAME
# (libcublas.so -> libcublas.so.13 -> site-packages/nvidia/cu13/lib/libcublas.so.13), or empty.
function(mr_wheel_cuda_copy out toolkit_library torch_prefix)
  set(${out} "" PARENT_SCOPE)
  if(NOT toolkit_library OR NOT torch_prefix OR NOT EXISTS "${toolkit_library}")
    return()
  endif()
  # The SONAME as the file names spell it: libX.so -> libX.so.MAJOR[.minor...]; the name up to the major version.
  get_filename_component(real "${toolkit_library}" REALPATH)
  get_filename_component(name "${real}" NAME)
  if(NOT name MATCHES "^(lib[A-Za-z0-9_]+\\.so\\.[0-9]+)")
    return()
  endif()
  set(soname "${CMAKE_MATCH_1}")
  file(GLOB copies "${torch_prefix}/../nvidia/*/lib/${soname}")
  list(SORT copies)  # nvidia/cu13 before nvidia/cublas etc.: one answer whatever the directory order
  if(copies)
    list(GET copies 0 first)
    get_filename_component(first "${first}" ABSOLUTE)
    set(${out} "${first}" PARENT_SCOPE)
  endif()
endfunction()

# mr_cuda_library(OUT NAME): what to link for the toolkit library NAME (cudart, cublas, cusolver): the wheel's copy
# beside LibTorch (TORCH_INSTALL_PREFIX) when there is one, else the toolkit's imported target CUDA::NAME. A wheel
# copy's folder is added to MR_CUDA_WHEEL_DIRS (in the caller's scope).
function(mr_cuda_library out name)
  mr_wheel_cuda_copy(copy "${CUDA_${name}_LIBRARY}" "${TORCH_INSTALL_PREFIX}")
  if(copy)
    message(STATUS "megatron-run: ${name} from the PyTorch wheel, ${copy}")
    set(${out} "${copy}" PARENT_SCOPE)
    get_filename_component(dir "${copy}" DIRECTORY)
    set(dirs ${MR_CUDA_WHEEL_DIRS} "${dir}")
    list(REMOVE_DUPLICATES dirs)
    set(MR_CUDA_WHEEL_DIRS "${dirs}" PARENT_SCOPE)
  else()
    set(${out} "CUDA::${name}" PARENT_SCOPE)
  endif()
endfunction()

# mr_cuda_targets(): the interface targets the libraries link. mr_cudart: the toolkit's headers and cudart; mr_cuda_math
# (the optimizer kernels): that and cuBLAS, cuSOLVER. Where wheel copies were chosen, their folders come first in
# the executables' run path: LibTorch's own CMake targets link the toolkit's libcudart.so and libnvrtc.so by path, so
# CMake's run path names the toolkit's folder too, before the wheel's, and the loader would take the toolkit's file
# of the same SONAME for everyone (seen: libcublas.so.13 from /usr/local/cuda/lib though the wheel's was linked).
# The linker joins -rpath options in command-line order, and link options come before CMake's own run path.
function(mr_cuda_targets)
  mr_cuda_library(cudart cudart)
  mr_cuda_library(cublas cublas)
  mr_cuda_library(cusolver cusolver)
  add_library(mr_cudart INTERFACE)
  target_link_libraries(mr_cudart INTERFACE CUDA::toolkit ${cudart})
  foreach(dir IN LISTS MR_CUDA_WHEEL_DIRS)
    target_link_options(mr_cudart INTERFACE "LINKER:-rpath,${dir}")
  endforeach()
  add_library(mr_cuda_math INTERFACE)
  target_link_libraries(mr_cuda_math INTERFACE mr_cudart ${cublas} ${cusolver})
endfunction()
