# shellcheck shell=bash
# The nginx.conf of a test origin, shared by tests/integration/lib.sh
# (start_nginx) and tests/netns/topology.sh (topo_start_nginx, which bench
# sources too: so this file needs nothing of lib.sh).

# nginx_conf DIR LOG_FORMAT SERVER [MORE_SERVERS]: the configuration, on
# stdout, of an nginx run from DIR (its pid file, logs/ and tmp/ there):
# one worker, as root when we are root, keep-alive for ever, the access log
# logs/access.log in LOG_FORMAT (nginx variables, written as they are),
# SERVER the body of its server block (listen, root, locations), then
# MORE_SERVERS (whole server blocks).
nginx_conf() {
    local d=$1 fmt=$2 server=$3 more=${4:-}
    cat <<NGINX
$( [[ $EUID == 0 ]] && echo "user root;")
worker_processes 1;
worker_rlimit_nofile 8192;
daemon off;
master_process on;
pid $d/nginx.pid;
error_log $d/logs/error.log warn;
events { worker_connections 4096; }
http {
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    keepalive_timeout 65;
    log_format t '$fmt';
    access_log $d/logs/access.log t;
    client_body_temp_path $d/tmp/body;
    proxy_temp_path $d/tmp/proxy;
    fastcgi_temp_path $d/tmp/fastcgi;
    uwsgi_temp_path $d/tmp/uwsgi;
    scgi_temp_path $d/tmp/scgi;
    server {
$server
    }
$more
}
NGINX
}
