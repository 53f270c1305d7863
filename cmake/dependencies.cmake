# Imported targets for every dependency in DESIGN.md §3. Packages that ship a
# CMake config are found with find_package; the rest get hand-written
# imported targets (CAF 0.17.6, CLI11, hnswlib, Snowball, utf8proc).
find_package(Threads REQUIRED)
find_package(Boost 1.81 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(PostgreSQL REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(simdjson REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(GTest REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(benchmark QUIET)

# CAF 0.17.6 ships no CMake config, no Find module and no .pc file.
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIB caf_core REQUIRED)
find_library(CAF_IO_LIB caf_io REQUIRED)
find_library(CAF_OPENSSL_LIB caf_openssl REQUIRED)
add_library(CAF::core UNKNOWN IMPORTED)
set_target_properties(CAF::core PROPERTIES
  IMPORTED_LOCATION ${CAF_CORE_LIB}
  INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR}
  INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(CAF::io UNKNOWN IMPORTED)
set_target_properties(CAF::io PROPERTIES
  IMPORTED_LOCATION ${CAF_IO_LIB} INTERFACE_LINK_LIBRARIES CAF::core)
add_library(CAF::openssl UNKNOWN IMPORTED)
set_target_properties(CAF::openssl PROPERTIES
  IMPORTED_LOCATION ${CAF_OPENSSL_LIB}
  INTERFACE_LINK_LIBRARIES "CAF::io;OpenSSL::SSL")
add_library(ragtor::caf INTERFACE IMPORTED)
set_target_properties(ragtor::caf PROPERTIES INTERFACE_LINK_LIBRARIES "CAF::openssl;CAF::io;CAF::core")

find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
add_library(ragtor::cli11 INTERFACE IMPORTED)
set_target_properties(ragtor::cli11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${CLI11_INCLUDE_DIR})

find_path(HNSWLIB_INCLUDE_DIR hnswlib/hnswlib.h REQUIRED)
add_library(ragtor::hnswlib INTERFACE IMPORTED)
set_target_properties(ragtor::hnswlib PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${HNSWLIB_INCLUDE_DIR})

find_path(STEMMER_INCLUDE_DIR libstemmer.h REQUIRED)
find_library(STEMMER_LIB stemmer REQUIRED)
add_library(ragtor::stemmer UNKNOWN IMPORTED)
set_target_properties(ragtor::stemmer PROPERTIES
  IMPORTED_LOCATION ${STEMMER_LIB} INTERFACE_INCLUDE_DIRECTORIES ${STEMMER_INCLUDE_DIR})

find_path(UTF8PROC_INCLUDE_DIR utf8proc.h REQUIRED)
find_library(UTF8PROC_LIB utf8proc REQUIRED)
add_library(ragtor::utf8proc UNKNOWN IMPORTED)
set_target_properties(ragtor::utf8proc PROPERTIES
  IMPORTED_LOCATION ${UTF8PROC_LIB} INTERFACE_INCLUDE_DIRECTORIES ${UTF8PROC_INCLUDE_DIR})
