# Integration, crash and fault-injection tests: they run the real cairn
# binary (its path compiled in as CAIRN_BINARY) as a user would.
# CAIRN_TEST_LARGE=0 shrinks the 2 GiB and > 4 GiB cases (sanitizer builds);
# CAIRN_TEST_TMPDIR picks where their temporary directories go. The S3 tests
# (cli_s3_test.cc) run against the server in S3_ENDPOINT (scripts/s3-server.sh)
# and skip without it; they look at the bucket with cairn_s3. $CAIRN_BINARY
# runs them against another build's binary (the sanitizer stages do).
# cairn-killpoint: runs a program and SIGKILLs it before its Nth file or
# network write/sync/rename (ptrace + seccomp); the kill tests
# (cli_kill_test.cc) and bench/soak.sh use it.
add_executable(cairn-killpoint ${CMAKE_CURRENT_SOURCE_DIR}/killpoint.cc)

add_executable(cairn_integration_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_harness.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_fixture.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_background.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_roundtrip_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_server_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_server_backup_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_server_malformed_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_server_verify_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_server_admin_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_server_adversarial_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_dedup_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_encryption_refusal_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_encryption_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_benchmark_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_corruption_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_crash_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_full_disk_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_io_error_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_kill.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_kill_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_server_kill_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_server_restart_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_bad_input_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_gc_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_json_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_key_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_mount_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_nbd_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_prune_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_restore_modes_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_restore_rehearse_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_tree_fixture.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_tree_hostile_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_tree_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_verify_ledger_rolling_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_verify_ledger_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_s3_fault_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_s3_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_sync_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_sync_job_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_everyday_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_rate_limit_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_serve_systemd_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_bottleneck_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/cli_metrics_test.cc
)
target_compile_definitions(cairn_integration_tests PRIVATE
  CAIRN_BINARY="$<TARGET_FILE:cairn>"
  CAIRN_KILLPOINT="$<TARGET_FILE:cairn-killpoint>")
target_link_libraries(cairn_integration_tests PRIVATE
  GTest::gtest_main nlohmann_json::nlohmann_json OpenSSL::SSL OpenSSL::Crypto Threads::Threads
  cairn_index cairn_net cairn_s3)
add_dependencies(cairn_integration_tests cairn cairn-killpoint)
if(CAIRN_PCH)
  target_precompile_headers(cairn_integration_tests PRIVATE <gtest/gtest.h> <nlohmann/json.hpp>)
endif()
gtest_discover_tests(cairn_integration_tests DISCOVERY_TIMEOUT 60
  PROPERTIES TIMEOUT 900 LABELS integration)
# GCC 12 at -O1 with sanitizers reports a false maybe-uninitialized inside
# libstdc++'s <regex> (the tests match output lines with std::regex).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(cairn_integration_tests PRIVATE -Wno-maybe-uninitialized)
endif()
# The web dashboard in a real browser (headless Chromium through Selenium,
# tests/browser/dashboard_test.py): Debian's python3 (where apt installs
# python3-selenium), skipped (77) when Chromium, chromedriver or Selenium are
# missing (scripts/setup-deps.sh installs them). Screenshots go to the build
# tree's dashboard-screenshots/ (docs/img/ holds the ones the README shows).
find_program(CAIRN_SYSTEM_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT CAIRN_SYSTEM_PYTHON)
  find_program(CAIRN_SYSTEM_PYTHON python3)
endif()
if(CAIRN_SYSTEM_PYTHON)
  add_test(NAME DashboardBrowserTest
    COMMAND ${CAIRN_SYSTEM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/browser/dashboard_test.py
            $<TARGET_FILE:cairn> ${CMAKE_BINARY_DIR}/dashboard-screenshots)
  set_tests_properties(DashboardBrowserTest PROPERTIES
    SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS integration)
endif()
