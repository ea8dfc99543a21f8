#!/usr/bin/env bash
# plugin_layers.py against broken copies of docs/CORE.md and of the known
# list: the lowest layer's files moved to the top layer (each call into
# them from the layers between then goes up, and none of those is known),
# the first one's row gone, it in no layer, a known line that does not go
# up. Each must fail,
# naming what is wrong; the two as they are must pass.
#   plugin_selftest.sh LAYERING_DIR PLUGIN CORE_MD KNOWN WORK_DIR OBJECTS
set -uo pipefail
dir=$1 plugin=$2 doc=$3 known=$4 work=$5 objs=$6
fails=0
run() { # DOC KNOWN: plugin_layers.py's output
	python3 "$dir/plugin_layers.py" "$plugin" "$1" "$2" "$objs"
}
# The layer table's rows: from its header to the first line that is not
# a row of it.
in_table() { # AWK_ACTION on each row of the layer table (l: the line)
	awk -v head="| $plugin layer | files |" -v f="$low" '
	{ l = $0 }
	l == head { t = 1 } t && l !~ /^\|/ { t = 0 }
	t && l != head && l !~ /^\|---/ { '"$1"' }
	{ print l }'
}
up_top() { # the lowest layer's files moved to the last row, the top
	awk -v head="| $plugin layer | files |" '
	{ line[NR] = $0 }
	$0 == head { t = 1; next } t && !/^\|/ { t = 0 }
	t && !/^\|---/ { if (!first) first = NR; last = NR }
	END {
		n = split(line[first], c, "|"); files = c[3]
		for (i = 1; i <= NR; i++) {
			l = line[i]
			if (i == first)
				sub(/\|[^|]*\|$/, "| |", l)
			else if (i == last)
				sub(/ \|$/, " " files "|", l)
			print l
		}
	}' "$doc"
}
row_gone() { sed -E "/^\| \`$low\` \|/d" "$doc"; }
no_layer() { in_table 'sub(" " f " ", " ", l); sub(" " f " [|]$", " |", l)' <"$doc"; }
as_is() { cat "$doc"; }
case_() { # NAME DOC_FILTER EXTRA_KNOWN_LINE EXPECTED_REGEX
	local out rc=0
	"$2" >"$work/CORE-$plugin-$1.md"
	{ cat "$known"; printf '%s\n' "$3"; } >"$work/known-$plugin-$1.txt"
	if cmp -s "$doc" "$work/CORE-$plugin-$1.md" && [ -z "$3" ]; then
		echo "FAIL [$1]: the edit changed nothing"; fails=1; return
	fi
	out=$(run "$work/CORE-$plugin-$1.md" "$work/known-$plugin-$1.txt") || rc=$?
	if ((rc == 0)); then
		echo "FAIL [$1]: plugin_layers.py passed a broken copy"; fails=1
	elif ! grep -qE -- "$4" <<<"$out"; then
		echo "FAIL [$1]: no line matching /$4/ in:"
		grep -E '^(FAIL|  NEW)' <<<"$out"; fails=1
	else
		echo "ok [$1]: $(grep -E -- "$4" <<<"$out" | head -n 1)"
	fi
}
run "$doc" "$known" >"$work/$plugin-asis.out" || {
	echo "FAIL: plugin_layers.py fails on $doc as it is:"
	grep -E '^(FAIL|  NEW)' "$work/$plugin-asis.out"; fails=1; }
low=$(grep -m1 -A2 -F "| $plugin layer | files |" "$doc" | tail -n 1 |
    sed -E 's/^\| [a-z_]+ \| ([a-z0-9_]+)[ |].*/\1/')
[ -n "$low" ] || { echo "FAIL: no layer table of $plugin in $doc"; exit 1; }
case_ upside_down up_top '' \
	"^  NEW +[a-z0-9_]+ \([a-z_]+\) -> [a-z0-9_]+ \([a-z_]+\): "
case_ row_gone row_gone '' \
	"^FAIL: .*: no row for plugins/$plugin/$low\.c: add \| \`$low\` \|"
case_ no_layer no_layer '' \
	"^FAIL: .*: plugins/$plugin/$low\.c is in no layer of $plugin"
case_ known_stale as_is "$low -> $low" \
	"^FAIL: $low -> $low is listed in .* but no longer goes up"
exit $fails
