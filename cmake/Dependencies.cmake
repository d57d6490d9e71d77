# Every dependency comes from a Debian package installed by scripts/setup.
find_package(PkgConfig REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# The HTTP transport: Boost.Beast on Boost.Asio (header-only; Debian's libboost1.81-dev).
find_package(Boost 1.81 REQUIRED CONFIG COMPONENTS headers)
# Line editing for `megadecode chat` (Debian libedit-dev; BSD-licensed, unlike GNU readline).
pkg_check_modules(LIBEDIT REQUIRED IMPORTED_TARGET libedit)
if(MD_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MD_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
# Tensor parallelism across processes and hosts (src/dist): Open MPI (Debian's libopenmpi-dev,
# installed by scripts/setup). Without it the build still works; `--tp` then runs in-process
# ranks only, and the MPI tests say why they skip.
# The C API, through the CXX component (the project enables no C compiler); Open MPI's deprecated
# C++ bindings are kept out (OMPI_SKIP_MPICXX, src/dist/CMakeLists.txt).
find_package(MPI COMPONENTS CXX)
if(MPI_CXX_FOUND)
  set(MD_HAVE_MPI ON)
  find_program(MD_MPIEXEC NAMES mpirun mpiexec)
else()
  set(MD_HAVE_MPI OFF)
  message(STATUS "MPI not found: tensor parallelism across processes is off")
endif()
