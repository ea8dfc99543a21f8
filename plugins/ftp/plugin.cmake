# ftp: sources linked into proxyd_core. ftp.c: the control channel and the
# vtable; ftp_reply.c: the server's replies on it; ftp_data.c: data channels; ftp_tls.c: FTPS; ftp_policy.c: the <ftp> policy;
# ftp_path.c: canonical paths and the working directory; ftp_scan.c: files
# through the service's scanner (<scan>); ftp_quota.c: per-user daily quotas;
# ftp_auth.c: inband authentication (<auth>);
# ftp_proto.c: the pure line and address parsers.
list(APPEND PX_PLUGIN_SOURCES
	${CMAKE_CURRENT_LIST_DIR}/ftp_proto.c
	${CMAKE_CURRENT_LIST_DIR}/ftp_path.c
	${CMAKE_CURRENT_LIST_DIR}/ftp_policy.c
	${CMAKE_CURRENT_LIST_DIR}/ftp_data.c
	${CMAKE_CURRENT_LIST_DIR}/ftp_scan.c
	${CMAKE_CURRENT_LIST_DIR}/ftp_quota.c
	${CMAKE_CURRENT_LIST_DIR}/ftp_tls.c
	${CMAKE_CURRENT_LIST_DIR}/ftp_auth.c
	${CMAKE_CURRENT_LIST_DIR}/ftp_reply.c
	${CMAKE_CURRENT_LIST_DIR}/ftp.c)
