# Unit tests: one binary, sources beside the code (src/<module>/<file>_test.cc).
# Every file is listed; no globbing.
# The unit tests of the concurrent code (pipeline, stores, the three flows,
# gc, the server, its client and their network code, the S3 client, the
# chunk cache, readahead, instant and overlay devices, NBD, the mount): the
# only ones the TSan stage of scripts/test.sh builds and runs
# (CAIRN_TESTS=concurrency; docs/ARCHITECTURE.md, "Testing").
set(CAIRN_CONCURRENCY_TEST_SOURCES
  ${PROJECT_SOURCE_DIR}/src/store/local_chunk_store_test.cc
  ${PROJECT_SOURCE_DIR}/src/store/injecting_source_test.cc
  ${PROJECT_SOURCE_DIR}/src/datastore/datastore_test.cc
  ${PROJECT_SOURCE_DIR}/src/base/mutex_test.cc
  ${PROJECT_SOURCE_DIR}/src/pipeline/bounded_queue_test.cc
  ${PROJECT_SOURCE_DIR}/src/pipeline/buffer_pool_test.cc
  ${PROJECT_SOURCE_DIR}/src/pipeline/fair_queue_test.cc
  ${PROJECT_SOURCE_DIR}/src/pipeline/concurrency_controller_test.cc
  ${PROJECT_SOURCE_DIR}/src/pipeline/fetch_pipeline_test.cc
  ${PROJECT_SOURCE_DIR}/src/pipeline/fetch_pipeline_async_test.cc
  ${PROJECT_SOURCE_DIR}/src/pipeline/worker_group_test.cc
  ${PROJECT_SOURCE_DIR}/src/pipeline/stage_meter_test.cc
  ${PROJECT_SOURCE_DIR}/src/backup/backup_test.cc
  ${PROJECT_SOURCE_DIR}/src/backup/chunk_writer_test.cc
  ${PROJECT_SOURCE_DIR}/src/backup/image_backup_test.cc
  ${PROJECT_SOURCE_DIR}/src/backup/tree_backup_test.cc
  ${PROJECT_SOURCE_DIR}/src/chunkio/chunk_read_test.cc
  ${PROJECT_SOURCE_DIR}/src/restore/image_restore_test.cc
  ${PROJECT_SOURCE_DIR}/src/restore/tree_restore_test.cc
  ${PROJECT_SOURCE_DIR}/src/verify/ledger_test.cc
  ${PROJECT_SOURCE_DIR}/src/verify/verify_test.cc
  ${PROJECT_SOURCE_DIR}/src/maintenance/gc_test.cc
  ${PROJECT_SOURCE_DIR}/src/sync/sync_test.cc
  ${PROJECT_SOURCE_DIR}/src/cli/progress_bar_test.cc
  ${PROJECT_SOURCE_DIR}/src/net/http_test.cc
  ${PROJECT_SOURCE_DIR}/src/server/tasks_test.cc
  ${PROJECT_SOURCE_DIR}/src/server/backup_session_test.cc
  ${PROJECT_SOURCE_DIR}/src/server/tokens_test.cc
  ${PROJECT_SOURCE_DIR}/src/server/read_grants_test.cc
  ${PROJECT_SOURCE_DIR}/src/server/scrub_test.cc
  ${PROJECT_SOURCE_DIR}/src/server/audit_log_test.cc
  ${PROJECT_SOURCE_DIR}/src/server/web/dashboard_test.cc
  ${PROJECT_SOURCE_DIR}/src/protocol/chunk_frames_test.cc
  ${PROJECT_SOURCE_DIR}/src/remote/remote_client_test.cc
  ${PROJECT_SOURCE_DIR}/src/s3/s3_client_test.cc
  ${PROJECT_SOURCE_DIR}/src/base/rate_limiter_test.cc
  ${PROJECT_SOURCE_DIR}/src/access/chunk_cache_test.cc
  ${PROJECT_SOURCE_DIR}/src/access/instant_device_test.cc
  ${PROJECT_SOURCE_DIR}/src/access/overlay_device_test.cc
  ${PROJECT_SOURCE_DIR}/src/access/stream_reader_test.cc
  ${PROJECT_SOURCE_DIR}/src/mount/snapshot_fs_test.cc
  ${PROJECT_SOURCE_DIR}/src/nbd/nbd_server_test.cc
  ${PROJECT_SOURCE_DIR}/src/nbd/nbd_session_test.cc
)
# Every other unit test (single-threaded code: formats, codecs, parsers).
set(CAIRN_OTHER_UNIT_TEST_SOURCES
  ${PROJECT_SOURCE_DIR}/src/sync/group_filter_test.cc
  ${PROJECT_SOURCE_DIR}/src/server/schedule_test.cc
  ${PROJECT_SOURCE_DIR}/src/base/bytes_test.cc
  ${PROJECT_SOURCE_DIR}/src/net/http_body_test.cc
  ${PROJECT_SOURCE_DIR}/src/net/tls_test.cc
  ${PROJECT_SOURCE_DIR}/src/base/env_test.cc
  ${PROJECT_SOURCE_DIR}/src/base/fault_injection_env_test.cc
  ${PROJECT_SOURCE_DIR}/src/base/power_loss_env_test.cc
  ${PROJECT_SOURCE_DIR}/src/base/logging_test.cc
  ${PROJECT_SOURCE_DIR}/src/base/status_test.cc
  ${PROJECT_SOURCE_DIR}/src/base/text_test.cc
  ${PROJECT_SOURCE_DIR}/src/format/coding_test.cc
  ${PROJECT_SOURCE_DIR}/src/format/crc32c_test.cc
  ${PROJECT_SOURCE_DIR}/src/crypto/crypt_config_test.cc
  ${PROJECT_SOURCE_DIR}/src/crypto/key_file_test.cc
  ${PROJECT_SOURCE_DIR}/src/crypto/sha256_test.cc
  ${PROJECT_SOURCE_DIR}/src/blob/blob_test.cc
  ${PROJECT_SOURCE_DIR}/src/index/chunker_test.cc
  ${PROJECT_SOURCE_DIR}/src/index/dynamic_index_test.cc
  ${PROJECT_SOURCE_DIR}/src/index/fixed_index_test.cc
  ${PROJECT_SOURCE_DIR}/src/index/manifest_test.cc
  ${PROJECT_SOURCE_DIR}/src/datastore/snapshot_ref_test.cc
  ${PROJECT_SOURCE_DIR}/src/datastore/snapshot_writer_test.cc
  ${PROJECT_SOURCE_DIR}/src/tree/fs_meta_test.cc
  ${PROJECT_SOURCE_DIR}/src/tree/tree_format_test.cc
  ${PROJECT_SOURCE_DIR}/src/restore/restore_test.cc
  ${PROJECT_SOURCE_DIR}/src/maintenance/prune_test.cc
  ${PROJECT_SOURCE_DIR}/src/perf/machine_bench_test.cc
  ${PROJECT_SOURCE_DIR}/src/s3/s3_client_rgw_test.cc
  ${PROJECT_SOURCE_DIR}/src/s3/s3_xml_test.cc
  ${PROJECT_SOURCE_DIR}/src/s3/sigv4_test.cc
  ${PROJECT_SOURCE_DIR}/src/s3store/s3_location_test.cc
  ${PROJECT_SOURCE_DIR}/src/cli/client_config_test.cc
  ${PROJECT_SOURCE_DIR}/src/maintenance/power_loss_test.cc
  ${PROJECT_SOURCE_DIR}/src/maintenance/io_error_test.cc
  ${PROJECT_SOURCE_DIR}/src/protocol/messages_test.cc
)
if(CAIRN_TESTS STREQUAL "concurrency")
  add_executable(cairn_unit_tests ${CAIRN_CONCURRENCY_TEST_SOURCES})
else()
  add_executable(cairn_unit_tests ${CAIRN_CONCURRENCY_TEST_SOURCES}
    ${CAIRN_OTHER_UNIT_TEST_SOURCES})
endif()
# Tests include "tests/unit_test_util.h".
target_include_directories(cairn_unit_tests PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(cairn_unit_tests PRIVATE
  cairn_backup cairn_restore cairn_access cairn_mount cairn_verify cairn_maintenance cairn_sync cairn_perf cairn_cli cairn_server cairn_remote cairn_protocol cairn_s3 cairn_s3store GTest::gtest_main GTest::gmock)
if(CAIRN_PCH)
  target_precompile_headers(cairn_unit_tests PRIVATE <gtest/gtest.h> <gmock/gmock.h>
    <nlohmann/json.hpp> <fmt/format.h>)
endif()
gtest_discover_tests(cairn_unit_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
