# Every dependency comes from a Debian package installed by scripts/setup.
find_package(PkgConfig REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
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
