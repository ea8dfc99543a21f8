# shellcheck shell=bash
# Helpers for the TLS tests, on top of lib.sh: a PKI made at test time with
# the openssl command (in $P), and --check expectations for bad <tls>.

# tls_ca NAME CN: a self-signed CA, $P/NAME.pem and $P/NAME.key (EC P-256)
tls_ca() {
    mkdir -p "$P"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$P/$1.key" -out "$P/$1.pem" -days 2 -subj "/CN=$2" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign" 2>"$P/err" || fail "CA $1: $(cat "$P/err")"
}

# tls_leaf NAME SUBJECT SAN EKU [CA=ca]: $P/NAME.pem and .key, signed by
# $P/CA.pem; SUBJECT like "/CN=x" (or a bare CN)
tls_leaf() {
    local subj=$2 ca=${5:-ca}
    [[ $subj == /* ]] || subj="/CN=$subj"
    mkdir -p "$P"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$P/$1.key" -out "$P/$1.csr" -subj "$subj" 2>"$P/err" || fail "key $1: $(cat "$P/err")"
    printf 'subjectAltName=%s\nextendedKeyUsage=%s\n' "$3" "$4" >"$P/$1.ext"
    openssl x509 -req -in "$P/$1.csr" -CA "$P/$ca.pem" -CAkey "$P/$ca.key" \
        -CAcreateserial -days 2 -extfile "$P/$1.ext" -out "$P/$1.pem" 2>"$P/err" ||
        fail "leaf $1: $(cat "$P/err")"
}

# tls_self NAME CN [SAN]: a self-signed server certificate
tls_self() {
    mkdir -p "$P"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$P/$1.key" -out "$P/$1.pem" -days 2 -subj "/CN=$2" \
        ${3:+-addext "subjectAltName=$3"} 2>"$P/err" || fail "self-signed $1: $(cat "$P/err")"
}

# tls_check_bad WHAT ANALYSER XML REGEX: a service holding XML (line 4 of
# its file) is refused by --check with a message matching REGEX
tls_check_bad() {
    local out
    mkdir -p "$T/bad/policy"
    rm -f "$T/bad/policy/"*.xml
    sed "s|<policies dir=\"[^\"]*\"/>|<policies dir=\"$T/bad/policy\"/>|" "$PROXYD_CONF" >"$T/bad/proxyd.xml"
    cat >"$T/bad/policy/b.xml" <<XML
<service name="b" analyser="$2">
  <listen address="127.0.0.1" port="1" mode="fixed"/>
  <target address="127.0.0.1" port="2"/>
  $3
</service>
XML
    if out=$("$PROXYD" --check -c "$T/bad/proxyd.xml" 2>&1); then
        fail "--check accepted $1: $out"
    fi
    [[ $out =~ $4 ]] || fail "--check on $1: expected /$4/, got: $out"
    info "  $1: ${out%%$'\n'*}"
}
