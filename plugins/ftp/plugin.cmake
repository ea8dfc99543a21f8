# ftp: sources linked into proxyd_core.
list(APPEND PX_PLUGIN_SOURCES
	${CMAKE_CURRENT_LIST_DIR}/ftp_proto.c
	${CMAKE_CURRENT_LIST_DIR}/ftp.c)
