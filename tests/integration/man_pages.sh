#!/usr/bin/env bash
# The man pages, from the source tree:
#   1. proxyd(8) and proxyd.xml(5) are clean under mandoc -Tlint at every
#      level. Only what comes from the machine is ignored: "outdated
#      mandoc.db" lines, and the two pages' references to each other
#      (not installed here, so "referenced manual not found").
#   2. every element and attribute name in the RelaxNG schemas
#      (policy/schema/*.rng, plugins/*/*.rng) is in proxyd.xml(5): an
#      element as "Ic NAME", an attribute as "Cm NAME" (mdoc's macros for
#      them in that page), so a name added to a schema must be documented.
#   3. proxyd(8) points to proxyd.xml(5) in SEE ALSO, and proxyd.xml(5)
#      renders with its sections.
#   4. the EXAMPLES of proxyd.xml(5) (a daemon file and two services) pass
#      proxyd --check (the TLS pair made now with openssl; <user> left out,
#      the user may not exist here).
#   5. proxyd --help names the installed documentation: proxyd(8),
#      proxyd.xml(5) (both in docs/) and CONFIG.md where CMake installs it
#      (PREFIX/share/doc/proxyd, as the Debian package does in /usr).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds mandoc col openssl python3
setup

MAN5=$REPO_DIR/docs/proxyd.xml.5
MAN8=$REPO_DIR/docs/proxyd.8
[[ -f $MAN5 ]] || fail "no docs/proxyd.xml.5"

info "---- 1. mandoc -Tlint"
for page in "$MAN8" "$MAN5"; do
    mandoc -Tlint "$page" >"$T/lint.raw" 2>&1 || true
    grep -v -e 'outdated mandoc\.db' \
        -e 'STYLE: referenced manual not found: Xr proxyd 8' \
        -e 'STYLE: referenced manual not found: Xr proxyd\.xml 5' \
        "$T/lint.raw" >"$T/lint.out" || true
    if [[ -s $T/lint.out ]]; then
        cat "$T/lint.out" >&2
        fail "mandoc -Tlint $(basename "$page"): $(wc -l <"$T/lint.out") message(s)"
    fi
    info "$(basename "$page"): clean"
done

info "---- 2. schema names in proxyd.xml(5)"
schemas=("$REPO_DIR"/policy/schema/*.rng "$REPO_DIR"/plugins/*/*.rng)
((${#schemas[@]} >= 6)) || fail "expected at least 6 schemas, found ${#schemas[@]}"
missing=()
n=0
for kind in element attribute; do
    macro=Ic
    [[ $kind == attribute ]] && macro=Cm
    while read -r name; do
        n=$((n + 1))
        # an argument of the macro: ".It Ic name", ".Cm cert , key",
        # ".Cm send recv ..." (lower-case words and commas, no other macro)
        grep -qE "(^\.|[ ])${macro}( ([a-z0-9._-]+|,))* ${name//./\\.}( |$)" "$MAN5" ||
            missing+=("$kind $name")
    done < <(grep -ohE "<$kind name=\"[^\"]+\"" "${schemas[@]}" | sed -E 's/.*name="([^"]+)"/\1/' | sort -u)
done
((n > 100)) || fail "only $n names read from the schemas"
((${#missing[@]} == 0)) || fail "not in docs/proxyd.xml.5: ${missing[*]}"
info "$n element and attribute names, all documented"

info "---- 3. rendering and cross-references"
MANWIDTH=80 mandoc -Tascii "$MAN5" | col -b >"$T/man5.txt"
for s in NAME DESCRIPTION "DAEMON FILE" "SERVICE FILES" FILES EXAMPLES "SEE ALSO"; do
    grep -q "^$s" "$T/man5.txt" || fail "proxyd.xml(5): no $s section"
done
for s in Zones "Dispatch of shared ports" TLS "Rule lists" plug http ftp r66; do
    grep -qE "^ +$s\$" "$T/man5.txt" || fail "proxyd.xml(5): no $s subsection"
done
MANWIDTH=80 mandoc -Tascii "$MAN8" | col -b | sed -n '/^SEE ALSO/,/^[A-Z]/p' | grep 'proxyd\.xml(5)' >/dev/null ||
    fail "proxyd(8) SEE ALSO does not name proxyd.xml(5)"
grep -q '^\.Xr proxyd 8' "$MAN5" || fail "proxyd.xml(5) does not point to proxyd(8)"

info "---- 4. EXAMPLES pass proxyd --check"
python3 - "$MAN5" "$T/ex" <<'PY'
import os, re, sys
src = open(sys.argv[1]).read()
ex = src.split("\n.Sh EXAMPLES\n", 1)[1].split("\n.Sh ", 1)[0]
blocks = re.findall(r"^\.Bd -literal[^\n]*\n(.*?)^\.Ed$", ex, re.S | re.M)
os.makedirs(sys.argv[2])
for i, b in enumerate(blocks):
    open(os.path.join(sys.argv[2], "%d.xml" % i), "w").write(b.replace("\\e", "\\"))
print(len(blocks))
PY
[[ -f $T/ex/2.xml && ! -f $T/ex/3.xml ]] || fail "expected 3 literal blocks in EXAMPLES"
grep -q '^<proxyd>' "$T/ex/0.xml" || fail "the first example is not a daemon file"
grep -v '<user ' "$T/ex/0.xml" | sed 's|<log target="journal"|<log target="stderr"|' >"$T/conf/proxyd.xml"
mkdir -p "$T/conf/policy"
cp "$T/ex/1.xml" "$T/conf/policy/web.xml"
cp "$T/ex/2.xml" "$T/conf/policy/ftp.xml"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=web.test \
    -keyout "$T/conf/policy/web.key" -out "$T/conf/policy/web.pem" >/dev/null 2>&1 || fail "openssl req"
"$PROXYD" --check -c "$T/conf/proxyd.xml" >"$T/check.out" 2>&1 || { cat "$T/check.out" >&2; fail "proxyd --check on the EXAMPLES"; }
# and --check does read them: a broken copy is refused
sed -i 's/analyser="ftp"/analyser="nope"/' "$T/conf/policy/ftp.xml"
! "$PROXYD" --check -c "$T/conf/proxyd.xml" >"$T/check.out" 2>&1 || fail "--check took a bad analyser"
grep -q 'ftp.xml:' "$T/check.out" || fail "--check did not name ftp.xml: $(cat "$T/check.out")"
info "ok"

info "---- 5. --help names the installed docs"
"$PROXYD" --help >"$T/help.out"
assert_grep "$T/help.out" "proxyd\\(8\\)" "--help names proxyd(8)"
assert_grep "$T/help.out" "proxyd\\.xml\\(5\\)" "--help names proxyd.xml(5)"
assert_grep "$T/help.out" " /([^ ]+/)?share/doc/proxyd/CONFIG\\.md " "--help names the installed CONFIG.md"
grep -q 'install(FILES README.md docs/CONFIG.md docs/CORE.md DESTINATION ${CMAKE_INSTALL_DOCDIR})' "$REPO_DIR/CMakeLists.txt" ||
    fail "CMakeLists.txt no longer installs docs/CONFIG.md into the doc directory --help names"
grep -q 'install(FILES docs/proxyd.8 ' "$REPO_DIR/CMakeLists.txt" || fail "proxyd(8) is not installed"
grep -q 'install(FILES docs/proxyd.xml.5 ' "$REPO_DIR/CMakeLists.txt" || fail "proxyd.xml(5) is not installed"
info "ok"
