#!/usr/bin/env bash
# The Debian package, built for real from a copy of this tree with
# dpkg-buildpackage -us -uc -b (debian/: dh with cmake).
#   1. dpkg -x into a temp root: the binary in /usr/sbin, the config as a
#      conffile in /etc/proxyd, schemas and examples in /usr/share/proxyd,
#      the unit in /lib/systemd/system, proxyd(8) and proxyd.xml(5); the
#      man pages render with man -l and are clean under mandoc -Tlint, and
#      proxyd(8) lists the options proxyd --help lists. lintian: zero
#      errors (every tag is printed).
#   2. As root: dpkg -i; the postinst made the proxyd system user and
#      enabled the unit (not started: no systemd here, or started when
#      systemd is PID 1); systemd-analyze verify passes on the installed
#      unit; the installed proxyd --check passes on /etc/proxyd/proxyd.xml;
#      the installed daemon runs once as proxyd (uid, CapEff), relays a
#      service dropped into /etc/proxyd/policy, reloads it, stops (its
#      pidfile in /run/proxyd, owned by proxyd, gone after the stop, no
#      complaint; without systemd as PID 1, started as the unit would:
#      RUNTIME_DIRECTORY, the unit's bounding set by setpriv); then
#      dpkg --purge removes every file (and the user, if this test made it).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds dpkg-buildpackage dh dpkg-deb lintian man mandoc curl nginx python3 setpriv
setup

VERSION=$(sed -nE '1s/^proxyd \(([^)]+)\).*/\1/p' "$REPO_DIR/debian/changelog")
[[ -n $VERSION ]] || fail "no version in debian/changelog"
ARCH=$(dpkg --print-architecture)
SRC=$T/src/proxyd-$VERSION
mkdir -p "$SRC"

info "---- build: copy of the tree in $SRC"
# The tracked files (and new ones not ignored), never a build directory.
if git -C "$REPO_DIR" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    cd "$REPO_DIR"
    git ls-files -z --cached --others --exclude-standard |
        python3 -c '
import os, sys
names = [n for n in sys.stdin.buffer.read().decode().split("\0") if n]
builds = {os.path.dirname(n) for n in names if os.path.basename(n) == "CMakeCache.txt"}
for n in names:
    if os.path.lexists(n) and not any(n == b or n.startswith(b + "/") for b in builds if b):
        sys.stdout.write(n + "\0")
' >"$T/files"
    tar --null -T "$T/files" -cf - | tar -xf - -C "$SRC"
    cd - >/dev/null
else
    (cd "$REPO_DIR" && tar --exclude='./build*' --exclude='./b' --exclude='./obj-*' -cf - .) | tar -xf - -C "$SRC"
fi
[[ -f $SRC/debian/rules && -f $SRC/CMakeLists.txt ]] || fail "source copy incomplete"
t0=$(date +%s)
rc=0
(cd "$SRC" && DEB_BUILD_OPTIONS="parallel=2 nocheck" timeout 600 dpkg-buildpackage -us -uc -b) >"$T/build.log" 2>&1 || rc=$?
((rc == 0)) || { tail -n 40 "$T/build.log" >&2; fail "dpkg-buildpackage failed (rc $rc)"; }
DEB=$T/src/proxyd_${VERSION}_${ARCH}.deb
[[ -f $DEB ]] || fail "no $DEB after the build"
info "built $(basename "$DEB") ($(stat -c %s "$DEB") bytes) in $(($(date +%s) - t0)) s"

info "---- 1. contents (dpkg -x)"
R=$T/root
dpkg -x "$DEB" "$R"
for f in usr/sbin/proxyd etc/proxyd/proxyd.xml lib/systemd/system/proxyd.service \
    usr/share/man/man8/proxyd.8.gz usr/share/man/man5/proxyd.xml.5.gz \
    usr/share/proxyd/schema/proxyd.rng \
    usr/share/proxyd/schema/service.rng usr/share/proxyd/schema/http.rng \
    usr/share/proxyd/examples/http-reverse.xml usr/share/proxyd/inline-tproxy.sh \
    usr/share/proxyd/ha/pair.sh lib/systemd/system/proxyd-ha.service \
    usr/share/doc/proxyd/DEPLOY.md \
    usr/share/doc/proxyd/CONFIG.md usr/share/doc/proxyd/copyright; do
    [[ -f $R/$f ]] || fail "/$f is not in the package"
done
[[ -d $R/etc/proxyd/policy ]] || fail "/etc/proxyd/policy is not in the package"
assert_eq "$(find "$R/etc/proxyd/policy" -type f | wc -l)" 0 "services enabled on install"
assert_eq "$("$R/usr/sbin/proxyd" --version)" "proxyd $VERSION" "the packaged binary's version"
proxyd_help=$("$R/usr/sbin/proxyd" --help)
grep -q '(default /etc/proxyd/proxyd.xml)' <<<"$proxyd_help" ||
    fail "the packaged binary's default config is not /etc/proxyd/proxyd.xml"
grep -q '^ExecStart=/usr/sbin/proxyd -c /etc/proxyd/proxyd.xml$' "$R/lib/systemd/system/proxyd.service" ||
    fail "unit ExecStart: $(grep ExecStart "$R/lib/systemd/system/proxyd.service")"
for doc in $(sed -nE 's/^Documentation=//p' "$R/lib/systemd/system/proxyd.service" \
    "$R/lib/systemd/system/proxyd-ha.service" | tr ' ' '\n' | sed -n 's|^file:||p'); do
    [[ -f $R$doc ]] || fail "a unit's Documentation=file:$doc is not in the package"
done
# the HA pair (DEPLOY.md): pair.sh shipped executable, and the unit of its
# supervisor runs the shipped one on the directory pair.sh writes by default
[[ -x $R/usr/share/proxyd/ha/pair.sh ]] || fail "/usr/share/proxyd/ha/pair.sh is not executable"
# (read whole first: grep -q would close the pipe early, and pipefail
# then fails on pair.sh's SIGPIPE)
pair_help=$("$R/usr/share/proxyd/ha/pair.sh" --help) || fail "the packaged pair.sh --help failed"
grep -q 'supervise' <<<"$pair_help" || fail "the packaged pair.sh --help names no supervise"
grep -q '^ExecStart=/usr/share/proxyd/ha/pair.sh supervise --dir /etc/proxyd/ha$' \
    "$R/lib/systemd/system/proxyd-ha.service" ||
    fail "proxyd-ha.service ExecStart: $(grep ExecStart "$R/lib/systemd/system/proxyd-ha.service")"
grep -q '^Restart=always$' "$R/lib/systemd/system/proxyd-ha.service" || fail "proxyd-ha.service does not restart"
grep -q 'usr/share/proxyd/ha/pair.sh' "$R/usr/share/doc/proxyd/DEPLOY.md" ||
    fail "DEPLOY.md does not name the installed pair.sh"
grep -q '<user name="proxyd" group="proxyd"/>' "$R/etc/proxyd/proxyd.xml" ||
    fail "the shipped config does not drop to proxyd"
dpkg-deb -e "$DEB" "$T/control"
assert_eq "$(cat "$T/control/conffiles")" /etc/proxyd/proxyd.xml "conffiles"
grep -q 'adduser --quiet --system' "$T/control/postinst" || fail "postinst does not create the user"
grep -q "deb-systemd-helper enable 'proxyd.service'" "$T/control/postinst" || fail "postinst does not enable the unit"
# the shipped config passes --check (user line aside: the user may not exist yet)
sed 's|<user name="proxyd" group="proxyd"/>||' "$R/etc/proxyd/proxyd.xml" >"$R/etc/proxyd/nouser.xml"
"$R/usr/sbin/proxyd" --check -c "$R/etc/proxyd/nouser.xml" >"$T/check.out" 2>&1 ||
    fail "--check on the shipped config: $(cat "$T/check.out")"
rm "$R/etc/proxyd/nouser.xml"

info "---- man page"
MAN=$R/usr/share/man/man8/proxyd.8.gz
MANWIDTH=80 man -l "$MAN" 2>/dev/null | col -b >"$T/man.txt"
for s in NAME SYNOPSIS OPTIONS SIGNALS PRIVILEGES SYSTEMD FILES; do
    grep -q "^$s" "$T/man.txt" || fail "man -l: no $s section"
done
zcat "$MAN" >"$T/proxyd.8"
mandoc -Tlint -Wwarning "$T/proxyd.8" >"$T/lint.out" 2>&1 || { cat "$T/lint.out" >&2; fail "mandoc -Tlint"; }
# the same options in --help and in the man page's OPTIONS
"$R/usr/sbin/proxyd" --help | grep -oE '(^| )--?[a-zA-Z][a-z-]*' | tr -d ' ' | sort -u >"$T/opt.help"
sed -n '/^OPTIONS/,/^[A-Z]/p' "$T/man.txt" | grep -oE '^ +--?[a-zA-Z][a-z-]*(.*, --?[a-z-]+)?' |
    grep -oE -- '--?[a-zA-Z][a-z-]*' | sort -u >"$T/opt.man"
assert_eq "$(tr '\n' ' ' <"$T/opt.man")" "$(tr '\n' ' ' <"$T/opt.help")" "options in proxyd(8) vs proxyd --help"
# --help names the documentation where the package put it
"$R/usr/sbin/proxyd" --help >"$T/help.out"
grep -q ' /usr/share/doc/proxyd/CONFIG\.md ' "$T/help.out" ||
    fail "proxyd --help does not name /usr/share/doc/proxyd/CONFIG.md"
[[ -f $R/usr/share/doc/proxyd/CONFIG.md ]] || fail "CONFIG.md is not where --help says"
info "options: $(tr '\n' ' ' <"$T/opt.help")"
MAN5=$R/usr/share/man/man5/proxyd.xml.5.gz
MANWIDTH=80 man -l "$MAN5" 2>/dev/null | col -b >"$T/man5.txt"
for s in NAME DESCRIPTION "DAEMON FILE" "SERVICE FILES" EXAMPLES "SEE ALSO"; do
    grep -q "^$s" "$T/man5.txt" || fail "man -l proxyd.xml.5: no $s section"
done
zcat "$MAN5" >"$T/proxyd.xml.5"
mandoc -Tlint -Wwarning "$T/proxyd.xml.5" >"$T/lint.out" 2>&1 || { cat "$T/lint.out" >&2; fail "mandoc -Tlint proxyd.xml.5"; }

info "---- lintian"
lintian --display-info "$DEB" >"$T/lintian.out" 2>&1 || true
grep -vE '^running with root privileges' "$T/lintian.out" | sed 's/^/    /' || true
assert_eq "$(grep -c '^E: ' "$T/lintian.out" || true)" 0 "lintian errors"

info "---- 2. dpkg -i"
[[ $EUID == 0 ]] || { info "PASS (install part skipped: not root)"; exit 0; }
if dpkg-query -W -f='${Status}' proxyd 2>/dev/null | grep 'ok installed' >/dev/null; then
    info "SKIPPED install: a proxyd package is already installed on this machine"
    info "PASS"
    exit 0
fi
USER_BEFORE=0
getent passwd proxyd >/dev/null && USER_BEFORE=1
INSTALLED=0
pkg_cleanup() {
    local rc=$?
    rm -f /etc/proxyd/policy/pkgtest.xml
    if ((INSTALLED)); then dpkg --purge proxyd >/dev/null 2>&1 || true; fi
    if ((!USER_BEFORE)) && getent passwd proxyd >/dev/null; then
        userdel proxyd 2>/dev/null || true
        groupdel proxyd 2>/dev/null || true
    fi
    (exit $rc)
    _cleanup
}
trap pkg_cleanup EXIT
# dpkg takes a lock another installer may hold for a while: bounded retries
dpkg_retry() {
    local i
    for ((i = 0; i < 60; i++)); do
        if "$@" >"$T/dpkg.out" 2>&1; then return 0; fi
        grep -q 'lock' "$T/dpkg.out" || { cat "$T/dpkg.out" >&2; return 1; }
        sleep 1
    done
    cat "$T/dpkg.out" >&2
    return 1
}
dpkg_retry dpkg -i "$DEB" || fail "dpkg -i failed"
INSTALLED=1
sed 's/^/    /' "$T/dpkg.out"
getent passwd proxyd >"$T/passwd" || fail "postinst did not create the proxyd user"
info "user: $(cat "$T/passwd")"
PUID=$(id -u proxyd)
assert_lt "$PUID" 1000 "proxyd is a system user (uid)"
assert_eq "$(stat -c '%U:%G %a' /etc/proxyd/tls)" "root:proxyd 750" "/etc/proxyd/tls"
[[ -L /etc/systemd/system/multi-user.target.wants/proxyd.service ]] || fail "the unit is not enabled"
if [[ $(cat /proc/1/comm 2>/dev/null) != systemd ]]; then
    info "systemd is not PID 1 ($(cat /proc/1/comm)): the unit is enabled, not started (as in a chroot)"
fi
if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify /lib/systemd/system/proxyd.service /lib/systemd/system/proxyd-ha.service \
        >"$T/verify.out" 2>&1 || { cat "$T/verify.out" >&2; fail "systemd-analyze verify"; }
    [[ ! -e /etc/systemd/system/multi-user.target.wants/proxyd-ha.service ]] ||
        fail "proxyd-ha.service is enabled on install (it needs pair.sh up first)"
    info "systemd-analyze verify: ok; $(systemd-analyze security --offline=yes /lib/systemd/system/proxyd.service 2>/dev/null | grep -i 'overall exposure' || true)"
else
    info "systemd-analyze not installed: unit not verified"
fi
/usr/sbin/proxyd --check -c /etc/proxyd/proxyd.xml >"$T/check.out" 2>&1 ||
    fail "installed --check: $(cat "$T/check.out")"
info "$(head -n 1 "$T/check.out")"

info "---- the installed daemon, once"
make_file index.html 2048
start_nginx
free_port P1
cat >/etc/proxyd/policy/pkgtest.xml <<EOF
<service name="pkgtest" analyser="plug">
  <listen address="127.0.0.1" port="$P1"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
</service>
EOF
chmod 644 /etc/proxyd/policy/pkgtest.xml
CONF=/etc/proxyd/proxyd.xml
if is_listening 9180; then
    # someone holds the shipped admin port: same file, another admin port
    free_port AP
    sed "s|127.0.0.1:9180|127.0.0.1:$AP|; s|dir=\"policy\"|dir=\"/etc/proxyd/policy\"|" \
        /etc/proxyd/proxyd.xml >"$T/proxyd.xml"
    chmod 644 "$T/proxyd.xml"
    CONF=$T/proxyd.xml
    info "port 9180 is taken here: running with a copy that only moves the admin port"
fi
RUN_DIR_EXISTED=0
[[ -d /run/proxyd ]] && RUN_DIR_EXISTED=1
if [[ $(cat /proc/1/comm 2>/dev/null) == systemd ]]; then
    systemctl start proxyd || fail "systemctl start proxyd"
    PROXYD_PID=$(systemctl show -p MainPID --value proxyd)
else
    # as the unit would start it: in its RuntimeDirectory (root's at each
    # start, as systemd makes it for a unit without User=), with its
    # capability bounding set
    mkdir -p /run/proxyd
    chown root:root /run/proxyd
    chmod 0755 /run/proxyd
    RUNTIME_DIRECTORY=/run/proxyd setpriv $(unit_setpriv /lib/systemd/system/proxyd.service) \
        /usr/sbin/proxyd -c "$CONF" >>"$PROXYD_LOG" 2>&1 &
    PROXYD_PID=$!
    track_pid "$PROXYD_PID"
fi
wait_listen "$P1" 5 "$PROXYD_PID" || fail "the installed proxyd does not listen on $P1; log: $(tail -n 5 "$PROXYD_LOG")"
assert_eq "$(awk '$1 == "Uid:" { print $2 }' "/proc/$PROXYD_PID/status")" "$PUID" "uid of the installed daemon"
assert_eq "$(awk '$1 == "CapEff:" { print $2 }' "/proc/$PROXYD_PID/status")" 0000000000003400 "CapEff of the installed daemon"
r=$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")
assert_eq "$r" "0 200" "a request through the installed daemon"
# the shipped <pidfile>, in /run/proxyd (the unit's RuntimeDirectory, or
# made by proxyd), given to the user so that it can remove the file
assert_eq "$(cat /run/proxyd/proxyd.pid)" "$PROXYD_PID" "the shipped pidfile"
assert_eq "$(stat -c %u /run/proxyd)" "$PUID" "owner of /run/proxyd"
assert_no_grep "$PROXYD_LOG" 'pidfile' "a pidfile complaint of the installed daemon"
# the shipped config logs to the journal; with none here, to stderr instead
[[ -S /run/systemd/journal/socket ]] || assert_log "log target journal: .*logging to stderr"
sed -i "s|port=\"$NGINX_PORT\"|port=\"$NGINX_PORT\" |" /etc/proxyd/policy/pkgtest.xml
if [[ $(cat /proc/1/comm 2>/dev/null) == systemd ]]; then
    systemctl reload proxyd || fail "systemctl reload proxyd"
    systemctl stop proxyd || fail "systemctl stop proxyd"
else
    kill -HUP "$PROXYD_PID"
    assert_log "reload done: 1 service" 5
    kill -TERM "$PROXYD_PID"
    wait_exit "$PROXYD_PID" 10 || fail "the installed proxyd did not stop"
    assert_eq "$WAIT_RC" 0 "exit status of the installed proxyd"
fi
[[ ! -e /run/proxyd/proxyd.pid ]] || fail "the pidfile stays after a clean stop"
((RUN_DIR_EXISTED)) || rmdir /run/proxyd 2>/dev/null || true
rm -f /etc/proxyd/policy/pkgtest.xml

info "---- dpkg --purge"
dpkg_retry dpkg --purge proxyd || fail "dpkg --purge failed"
INSTALLED=0
for f in /usr/sbin/proxyd /etc/proxyd /lib/systemd/system/proxyd.service /usr/share/proxyd \
    /lib/systemd/system/proxyd-ha.service \
    /etc/systemd/system/multi-user.target.wants/proxyd.service; do
    [[ ! -e $f ]] || fail "$f is still there after dpkg --purge"
done
info "PASS"
