# shellcheck shell=bash
# Directory services for the <auth> tests, made at test time in $T on
# loopback (source after lib.sh, call after setup):
#   start_kdc    an MIT KDC for the realm EXAMPLE.TEST (kdb5_util create
#                -s): HTTP/localhost with its keytab $K/http.keytab for
#                proxyd, alice with the password alice-krb-pw, kinit alice
#                into the test's ccache ($KRB5CCNAME); $KDC_PORT
#   start_ldap   slapd with dc=example,dc=test (mdb, the memberof overlay;
#                alice, bob and carol with passwords NAME-ldap-pw, the
#                group ops with alice in it; loaded with ldapadd) on
#                127.0.0.1:$LDAP_PORT, the admin's password in
#                $T/conf/ldap.pw; $SLAPD_PID, start_slapd starts it again
#   ldap_conf NAME [ATTRS]   an <ldap> authenticator for it

start_kdc() {
    K=$T/krb
    mkdir -p "$K"
    free_port KDC_PORT
    cat >"$K/krb5.conf" <<EOF
[libdefaults]
  default_realm = EXAMPLE.TEST
  dns_lookup_kdc = false
  dns_lookup_realm = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
[realms]
  EXAMPLE.TEST = {
    kdc = 127.0.0.1:$KDC_PORT
  }
[domain_realm]
  localhost = EXAMPLE.TEST
EOF
    cat >"$K/kdc.conf" <<EOF
[kdcdefaults]
  kdc_ports = $KDC_PORT
  kdc_tcp_ports = $KDC_PORT
[realms]
  EXAMPLE.TEST = {
    database_name = $K/principal
    key_stash_file = $K/stash
    acl_file = $K/kadm5.acl
    kdc_ports = $KDC_PORT
    kdc_tcp_ports = $KDC_PORT
  }
[logging]
  kdc = FILE:$K/kdc.log
EOF
    : >"$K/kadm5.acl"
    export KRB5_CONFIG=$K/krb5.conf KRB5_KDC_PROFILE=$K/kdc.conf
    export KRB5CCNAME=FILE:$K/ccache KRB5RCACHEDIR=$K
    kdb5_util create -s -r EXAMPLE.TEST -P master-pw >"$K/create.out" 2>&1 ||
        fail "kdb5_util create: $(cat "$K/create.out")"
    kadmin.local -r EXAMPLE.TEST -q "addprinc -randkey HTTP/localhost" >>"$K/create.out" 2>&1
    kadmin.local -r EXAMPLE.TEST -q "ktadd -k $K/http.keytab HTTP/localhost" >>"$K/create.out" 2>&1
    kadmin.local -r EXAMPLE.TEST -q "addprinc -pw alice-krb-pw alice" >>"$K/create.out" 2>&1
    [[ -s $K/http.keytab ]] || fail "no keytab: $(cat "$K/create.out")"
    krb5kdc -n -r EXAMPLE.TEST -P "$K/kdc.pid" >"$K/kdc.out" 2>&1 &
    track_pid $!
    wait_listen "$KDC_PORT" 10 $! || fail "krb5kdc did not listen: $(cat "$K/kdc.out" "$K/kdc.log" 2>/dev/null)"
    echo alice-krb-pw | kinit alice >"$K/kinit.out" 2>&1 || fail "kinit alice: $(cat "$K/kinit.out")"
}

start_slapd() {
    slapd -f "$L/slapd.conf" -h "ldap://127.0.0.1:$LDAP_PORT/" -d 0 >>"$L/slapd.out" 2>&1 &
    SLAPD_PID=$!
    track_pid "$SLAPD_PID"
    wait_listen "$LDAP_PORT" 10 "$SLAPD_PID" || fail "slapd did not listen: $(cat "$L/slapd.out")"
}

start_ldap() {
    L=$T/ldap
    mkdir -p "$L/db"
    free_port LDAP_PORT
    cat >"$L/slapd.conf" <<EOF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
pidfile $L/slapd.pid
database mdb
maxsize 10485760
suffix "dc=example,dc=test"
rootdn "cn=admin,dc=example,dc=test"
rootpw ldap-admin-pw
directory $L/db
overlay memberof
EOF
    cat >"$L/data.ldif" <<'EOF'
dn: dc=example,dc=test
objectClass: dcObject
objectClass: organization
o: example
dc: example

dn: ou=people,dc=example,dc=test
objectClass: organizationalUnit
ou: people

dn: ou=groups,dc=example,dc=test
objectClass: organizationalUnit
ou: groups

dn: uid=alice,ou=people,dc=example,dc=test
objectClass: inetOrgPerson
uid: alice
cn: Alice
sn: A
userPassword: alice-ldap-pw

dn: uid=bob,ou=people,dc=example,dc=test
objectClass: inetOrgPerson
uid: bob
cn: Bob
sn: B
userPassword: bob-ldap-pw

dn: uid=carol,ou=people,dc=example,dc=test
objectClass: inetOrgPerson
uid: carol
cn: Carol
sn: C
userPassword: carol-ldap-pw

dn: cn=ops,ou=groups,dc=example,dc=test
objectClass: groupOfNames
cn: ops
member: uid=alice,ou=people,dc=example,dc=test
EOF
    start_slapd
    ldapadd -x -H "ldap://127.0.0.1:$LDAP_PORT" -D cn=admin,dc=example,dc=test -w ldap-admin-pw \
        -f "$L/data.ldif" >"$L/add.out" 2>&1 || fail "ldapadd: $(cat "$L/add.out")"
    printf 'ldap-admin-pw\n' >"$T/conf/ldap.pw"
}

ldap_conf() { # NAME [EXTRA_ATTRS]
    echo "<ldap name=\"$1\" url=\"ldap://127.0.0.1:$LDAP_PORT\" base-dn=\"dc=example,dc=test\"
          bind-dn=\"cn=admin,dc=example,dc=test\" bind-password-file=\"ldap.pw\"
          user-filter=\"(uid=%u)\" group-attribute=\"memberOf\" ${2:-cache=\"5m\" timeout=\"2s\"}/>"
}
