#!/usr/bin/env bash
# A private certificate authority and one certificate for the dask scheduler,
# workers and clients of a cluster (mutual TLS: every party proves it holds a
# certificate signed by the CA). For a real cluster, use your organisation's
# CA instead and keep the key files readable by the service user only.
#
#   deploy/tls/make-certs.sh DIR [HOSTNAME...]     (default DIR=storage/tls, hosts: localhost 127.0.0.1)
set -euo pipefail
dir=${1:-storage/tls}
shift || true
hosts=("$@")
[ ${#hosts[@]} -eq 0 ] && hosts=(localhost 127.0.0.1)
mkdir -p "$dir"
umask 077
san=""
for h in "${hosts[@]}"; do
  if [[ $h =~ ^[0-9.]+$ ]]; then san+="IP:$h,"; else san+="DNS:$h,"; fi
done
openssl req -x509 -newkey rsa:3072 -nodes -days 365 -subj "/CN=infoclust-ca" \
  -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey rsa:3072 -nodes -subj "/CN=infoclust-dask" \
  -keyout "$dir/dask.key" -out "$dir/dask.csr" 2>/dev/null
printf "subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n" "${san%,}" > "$dir/ext.cnf"
openssl x509 -req -in "$dir/dask.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 365 \
  -extfile "$dir/ext.cnf" -out "$dir/dask.pem" 2>/dev/null
rm -f "$dir/dask.csr" "$dir/ext.cnf" "$dir/ca.srl"
echo "$dir: ca.pem (share), ca.key (keep offline), dask.pem + dask.key (scheduler, workers, clients)"
