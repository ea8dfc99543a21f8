# http: sources linked into proxyd_core.
list(APPEND PX_PLUGIN_SOURCES
	${CMAKE_CURRENT_LIST_DIR}/http.c
	${CMAKE_CURRENT_LIST_DIR}/http_auth.c
	${CMAKE_CURRENT_LIST_DIR}/http_body.c
	${CMAKE_CURRENT_LIST_DIR}/http_grpc.c
	${CMAKE_CURRENT_LIST_DIR}/http_h2.c
	${CMAKE_CURRENT_LIST_DIR}/http_h2_mem.c
	${CMAKE_CURRENT_LIST_DIR}/http_h2_origin.c
	${CMAKE_CURRENT_LIST_DIR}/http_h2_req.c
	${CMAKE_CURRENT_LIST_DIR}/http_h2_origin_stream.c
	${CMAKE_CURRENT_LIST_DIR}/http_h2_stream.c
	${CMAKE_CURRENT_LIST_DIR}/http_h2_txn.c
	${CMAKE_CURRENT_LIST_DIR}/http_head.c
	${CMAKE_CURRENT_LIST_DIR}/http_judge.c
	${CMAKE_CURRENT_LIST_DIR}/http_parse.c
	${CMAKE_CURRENT_LIST_DIR}/http_policy.c
	${CMAKE_CURRENT_LIST_DIR}/http_reply.c
	${CMAKE_CURRENT_LIST_DIR}/http_scan.c
	${CMAKE_CURRENT_LIST_DIR}/http_scan_mod.c
	${CMAKE_CURRENT_LIST_DIR}/http_target.c
	${CMAKE_CURRENT_LIST_DIR}/http_txn.c
	${CMAKE_CURRENT_LIST_DIR}/http_upstream.c)
# HTTP/2 towards clients (http_h2.c): nghttp2's server session.
pkg_check_modules(NGHTTP2 REQUIRED IMPORTED_TARGET libnghttp2)
list(APPEND PX_PLUGIN_LIBS PkgConfig::NGHTTP2)
