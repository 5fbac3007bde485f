# Third-party dependencies, all from Debian packages or the CUDA toolkit.
find_package(fmt REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Gloo REQUIRED)
find_package(nlohmann_json REQUIRED)  # tokenizer.json, vocab.json (engine/tokenizer)

# Tokenizers: PCRE2 (split patterns, UTF + UCP + JIT) and SentencePiece, through pkg-config.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
# prepare-data's inputs (engine/data): JSON Lines through simdjson, gzip through zlib, zstd.
find_package(simdjson REQUIRED)
find_package(ZLIB REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)

# OpenBLAS (OpenMP flavour). Debian installs it under an alternatives folder, so ask
# CMake's FindBLAS for the OpenBLAS vendor and look for cblas.h beside it.
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(HOLMES_CBLAS_INCLUDE_DIR cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/openblas
  PATH_SUFFIXES openblas-openmp)
if(NOT HOLMES_CBLAS_INCLUDE_DIR)
  message(FATAL_ERROR "cblas.h not found: install libopenblas-openmp-dev")
endif()
add_library(holmes_blas INTERFACE)
target_link_libraries(holmes_blas INTERFACE ${BLAS_LIBRARIES})
target_include_directories(holmes_blas INTERFACE ${HOLMES_CBLAS_INCLUDE_DIR})

# CUDA: AUTO builds it when a toolkit is found.
set(HOLMES_WITH_CUDA OFF)
if(NOT HOLMES_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(HOLMES_WITH_CUDA ON)
  elseif(HOLMES_CUDA STREQUAL "ON")
    message(FATAL_ERROR "HOLMES_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER or install the toolkit)")
  endif()
endif()
message(STATUS "holmes-train: CUDA backend ${HOLMES_WITH_CUDA}")
