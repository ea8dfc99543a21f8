#!/usr/bin/env bash
# check.py against copies of docs/CORE.md each broken one way: a module's
# row gone (as when a helper adds proxyd/scan/spool.c without one), a
# "uses" cell naming a module not used, a module put in the wrong layer,
# a pair that calls each other left out. Each must fail, naming what to
# fix; the copy as it is must pass.
#   doc_selftest.sh LAYERING_DIR CORE_MD WORK_DIR OBJECTS
set -uo pipefail
dir=$1 doc=$2 work=$3 objs=$4
fails=0
run() { # DOC: check.py's output
	python3 "$dir/check.py" "$dir/layers.txt" "$dir/known-upward.txt" "$1" "$objs"
}
case_() { # NAME SED_SCRIPT EXPECTED_REGEX
	local out rc=0
	sed -E "$2" "$doc" >"$work/CORE-$1.md"
	cmp -s "$doc" "$work/CORE-$1.md" && { echo "FAIL [$1]: the edit changed nothing"; fails=1; return; }
	out=$(run "$work/CORE-$1.md") || rc=$?
	if ((rc == 0)); then
		echo "FAIL [$1]: check.py passed a broken CORE.md"; fails=1
	elif ! grep -qE -- "$3" <<<"$out"; then
		echo "FAIL [$1]: no line matching /$3/ in:"; grep '^FAIL' <<<"$out"; fails=1
	else
		echo "ok [$1]: $(grep -E -- "$3" <<<"$out" | head -n 1)"
	fi
}
run "$doc" >"$work/CORE-asis.out" || { echo "FAIL: check.py fails on CORE.md as it is:"; grep '^FAIL' "$work/CORE-asis.out"; fails=1; }
case_ row_gone '/^\| `tls_hello` \|/d' \
	'^FAIL: .*: no row for module `tls_hello` \(proxyd/base/tls_hello\.c, layer base\) in the module table: add \| `tls_hello` \|'
case_ uses_extra '/^\| `cfgread` \|/s/\| parse \|$/| log, parse |/' \
	'^FAIL: .*: line [0-9]+: the row of `cfgread` says it uses log, parse; its object references parse \(remove log\)'
case_ uses_missing '/^\| `splice` \|/s/\| event_want, log \|$/| log |/' \
	'^FAIL: .*: the row of `splice` says it uses log; its object references event_want, log \(add event_want\)'
case_ wrong_layer 's/^\| policy \| cfgread directive rules zone \|$/| policy | cfgread directive rules |/; s/^\| net \| listener /| net | zone listener /' \
	'^FAIL: .*: the layer table puts `zone` in layer net; it is in policy'
case_ pair_gone 's/ tls <-> tls_config,//' \
	"^FAIL: .*: 'The modules that call each other' names .*; the objects: .*tls <-> tls_config"
exit $fails
