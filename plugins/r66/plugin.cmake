# The R66 wire codec on its own: the analyser, bench/r66peer and the
# unit and fuzz tests share it.
add_library(r66_wire STATIC ${CMAKE_CURRENT_LIST_DIR}/r66_wire.c
	${CMAKE_CURRENT_LIST_DIR}/r66_json.c)
target_include_directories(r66_wire PUBLIC ${CMAKE_SOURCE_DIR}/plugins)

# The encoders only a peer needs (Authent, Request, Data...): r66peer and
# the unit tests link them, proxyd does not.
add_library(r66_encode STATIC ${CMAKE_CURRENT_LIST_DIR}/r66_encode.c)
target_link_libraries(r66_encode PUBLIC r66_wire PkgConfig::SSL)
list(APPEND PX_UNIT_TEST_LIBS r66_encode)

# r66: sources linked into proxyd_core (with r66_wire).
list(APPEND PX_PLUGIN_SOURCES ${CMAKE_CURRENT_LIST_DIR}/r66.c
	${CMAKE_CURRENT_LIST_DIR}/r66_check.c
	${CMAKE_CURRENT_LIST_DIR}/r66_policy.c
	${CMAKE_CURRENT_LIST_DIR}/r66_quota.c
	${CMAKE_CURRENT_LIST_DIR}/r66_scan.c)
list(APPEND PX_PLUGIN_LIBS r66_wire)

# R66 test and benchmark peer (bench/r66peer/README.md); never installed.
add_executable(r66peer ${CMAKE_SOURCE_DIR}/bench/r66peer/r66peer.c
	${CMAKE_SOURCE_DIR}/bench/r66peer/r66peer_io.c
	${CMAKE_SOURCE_DIR}/bench/r66peer/r66peer_tls.c)
target_link_libraries(r66peer PRIVATE r66_encode PkgConfig::SSL)
