# Sourced by the etcd benchmarks (bench-etcd.sh, bench-etcd-scale.sh) after bench-bin.sh: makes
# $work (removed on exit), starts a three-member etcd cluster on free loopback ports with etcd's
# default flags (so its default limits apply: 1.5 MiB a request, 128 operations a transaction),
# waits until `$bin doctor` reaches it, and sets $etcd_hosts (`127.0.0.1:P,...`, for a store
# URL `etcd://$etcd_hosts/PREFIX`). The members are SIGKILLed on exit.
command -v etcd >/dev/null || { echo "etcd is needed (apt-get install etcd-server)"; exit 1; }
echo "binary: $bin ($("$bin" --version)); $(etcd --version | head -1)"
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -a cport pport
for i in 0 1 2; do cport[$i]=$(port); pport[$i]=$(port); done
initial="m0=http://127.0.0.1:${pport[0]},m1=http://127.0.0.1:${pport[1]},m2=http://127.0.0.1:${pport[2]}"
for i in 0 1 2; do
  etcd --name "m$i" --data-dir "$work/m$i" \
    --listen-client-urls "http://127.0.0.1:${cport[$i]}" --advertise-client-urls "http://127.0.0.1:${cport[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${pport[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${pport[$i]}" \
    --initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token bench \
    >"$work/m$i.log" 2>&1 &
  pids+=($!); disown
done
etcd_hosts="127.0.0.1:${cport[0]},127.0.0.1:${cport[1]},127.0.0.1:${cport[2]}"
for _ in $(seq 100); do
  CONDUCTOR_STORE="etcd://$etcd_hosts/probe" CONDUCTOR_HOME=$work/probe "$bin" doctor >/dev/null 2>&1 && break
  sleep 0.1
done
CONDUCTOR_STORE="etcd://$etcd_hosts/probe" CONDUCTOR_HOME=$work/probe "$bin" doctor | head -1
echo "load average (1, 5, 15 min) at the start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
