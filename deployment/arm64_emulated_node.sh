#!/usr/bin/env bash
# An emulated 64-bit Arm node (a stand-in for Raspberry Pi OS), from public Debian and PyPI packages only:
# a Debian arm64 root filesystem run under qemu-user (binfmt_misc) with chroot, the SuperNode installed in it
# exactly as docs/deployment.md's Raspberry Pi recipe says, started in a memory cgroup. Run as root on an x86-64
# Debian/Ubuntu host. docs/edge-arm64.md says what was run with it and what it measured.
#
#   deployment/arm64_emulated_node.sh setup
#       apt-get install qemu-user-static binfmt-support mmdebstrap; mount binfmt_misc; enable qemu-aarch64.
#   deployment/arm64_emulated_node.sh rootfs ROOTFS [SUITE]
#       mmdebstrap a minimal Debian SUITE (default bookworm: Python 3.11) for arm64 into ROOTFS, with
#       python3-venv (the Pi recipe's `sudo apt install python3-venv`), ca-certificates and procps.
#   deployment/arm64_emulated_node.sh install ROOTFS
#       copy this project (its committed files, git archive HEAD) to ROOTFS/opt/fedft/src and run the Pi recipe
#       inside the chroot: venv in /opt/fedft/venv, torch (TORCH_PIP_ARGS, default: the CPU-only torch from
#       PyPI, see below), torch-pin.txt, `pip install -c torch-pin.txt /opt/fedft/src`. Prints the install size.
#   deployment/arm64_emulated_node.sh supernode ROOTFS MEMORY STATE SUPERLINK CA KEY PORT NODE_CONFIG
#       start deployment/start-supernode.sh inside the chroot, in a memory cgroup of MEMORY (e.g. 1G, 512M)
#       named fedft-arm64-<port>. STATE, CA, KEY and NODE_CONFIG's data-path are paths *inside* the chroot
#       (copy keys and data to ROOTFS/srv/... first); the SuperNode's PID lands in ROOTFS/STATE/supernode.pid,
#       so `deployment/stop.sh ROOTFS/STATE` stops it from the host (chroot shares PIDs and network).
#   deployment/arm64_emulated_node.sh peak PORT
#       print the cgroup's limit, peak and failures (OOM) in bytes; `cgroup-rm PORT` removes it (when empty).
#   deployment/arm64_emulated_node.sh umount ROOTFS
#       unmount what this script mounted in ROOTFS (proc, sys, dev), after the SuperNode is stopped.
#
# Environment: TORCH_PIP_ARGS (pip arguments for the torch step), PIP_CERT (a CA bundle path *on the host*,
# copied into the chroot for pip, for networks that intercept TLS).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
project=$(cd "$here/.." && pwd)
# PyPI's aarch64 torch: 2.9.1 (and 2.5.1-2.8.0) is a CPU build that pulls no CUDA package on aarch64; 2.12.0 and
# 2.13.0 pull cuda-toolkit 13 and nvidia-cudnn-cu13 (gigabytes). download.pytorch.org/whl/cpu, the recipe's first
# choice, was not reachable from the machine this was verified on. docs/edge-arm64.md.
TORCH_PIP_ARGS=${TORCH_PIP_ARGS:-torch==2.9.1}
chroot=$(command -v chroot || echo /usr/sbin/chroot)

usage() { sed -n '2,29p' "$0"; exit 2; }

mount_chroot() {  # proc, sys, dev, resolv.conf: what pip, torch and Flower need inside
  local root=$1
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  mountpoint -q "$root/sys" || mount --rbind /sys "$root/sys"
  mountpoint -q "$root/dev" || mount --rbind /dev "$root/dev"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  if [[ -n "${PIP_CERT:-}" && -r "$PIP_CERT" ]]; then cp "$PIP_CERT" "$root/etc/ssl/certs/host-ca.crt"; fi
}

in_chroot() {  # in_chroot ROOTFS COMMAND: bash -c COMMAND as root inside ROOTFS, a clean environment
  local root=$1; shift
  local cert=()
  [[ -f "$root/etc/ssl/certs/host-ca.crt" ]] && cert=(PIP_CERT=/etc/ssl/certs/host-ca.crt)
  env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin LANG=C.UTF-8 "${cert[@]}" \
    "$chroot" "$root" /bin/bash -c "$1"
}

# The memory cgroup fedft-arm64-NAME under this shell's own (v1: the memory hierarchy; v2: the unified one).
cgroup_dir() {
  local name=fedft-arm64-$1 own
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    own=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
    echo "/sys/fs/cgroup${own%/}/$name"
  else
    own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
    echo "/sys/fs/cgroup/memory${own%/}/$name"
  fi
}

make_cgroup() {  # make_cgroup NAME BYTES
  local dir
  dir=$(cgroup_dir "$1")
  mkdir -p "$dir"
  if [[ -f "$dir/memory.max" ]]; then
    echo "$2" >"$dir/memory.max"
    [[ -f "$dir/memory.swap.max" ]] && echo 0 >"$dir/memory.swap.max"
  else
    echo "$2" >"$dir/memory.limit_in_bytes"
    [[ -f "$dir/memory.memsw.limit_in_bytes" ]] && echo "$2" >"$dir/memory.memsw.limit_in_bytes"
    echo 0 >"$dir/memory.max_usage_in_bytes"  # reset the peak
  fi
  echo "$dir"
}

cmd=${1:-}; shift || true
case "$cmd" in
  setup)
    apt-get install -y qemu-user-static binfmt-support mmdebstrap
    mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
    update-binfmts --enable qemu-aarch64
    grep -q enabled /proc/sys/fs/binfmt_misc/qemu-aarch64 && echo "qemu-aarch64 registered (binfmt_misc)"
    ;;
  rootfs)
    [[ $# -ge 1 ]] || usage
    mmdebstrap --arch=arm64 --variant=minbase --include=python3,python3-venv,ca-certificates,procps \
      "${2:-bookworm}" "$1" http://deb.debian.org/debian
    chroot "$1" uname -m
    ;;
  install)
    [[ $# -ge 1 ]] || usage
    root=$1
    mount_chroot "$root"
    rm -rf "$root/opt/fedft/src" && mkdir -p "$root/opt/fedft/src"
    git -C "$project" archive HEAD | tar -x -C "$root/opt/fedft/src"
    # docs/deployment.md, "Raspberry Pi 4/5", line by line (the torch line from TORCH_PIP_ARGS).
    in_chroot "$root" "set -euxo pipefail
      cd /opt/fedft
      python3 -m venv /opt/fedft/venv && . /opt/fedft/venv/bin/activate
      pip install $TORCH_PIP_ARGS
      python -c \"from importlib.metadata import version; print('torch==' + version('torch'))\" > torch-pin.txt
      pip install -c torch-pin.txt /opt/fedft/src
      pip list 2>/dev/null | grep -i -E '^(torch|flwr|numpy|pyyaml|fedft-eds|nvidia|cuda|triton) ' || true
      python -c 'import platform, torch, flwr; print(platform.machine(), torch.__version__, torch.cuda.is_available())'
      for m in datasets flwr_datasets ray; do python -c \"import \$m\" 2>/dev/null && echo \"unexpected: \$m\" || true; done
      du -sh /opt/fedft/venv"
    ;;
  supernode)
    [[ $# -ge 8 ]] || usage
    root=$1 memory=$2 state=$3 superlink=$4 ca=$5 key=$6 port=$7 node_config=$8
    bytes=$(numfmt --from=iec "$memory")
    mount_chroot "$root"
    dir=$(make_cgroup "$port" "$bytes")
    echo "memory cgroup $dir, limit $bytes bytes"
    # The shell joins the cgroup, then becomes the chroot: everything the SuperNode starts inherits the limit.
    sh -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' _ "$dir" \
      env -i HOME=/root PATH=/opt/fedft/venv/bin:/usr/bin:/bin LANG=C.UTF-8 VIRTUAL_ENV=/opt/fedft/venv \
      FLWR_DISABLE_UPDATE_CHECK=1 SUPERNODE_EXTRA_ARGS="${SUPERNODE_EXTRA_ARGS:-}" \
      "$chroot" "$root" /opt/fedft/src/deployment/start-supernode.sh "$state" "$superlink" "$ca" "$key" "$port" \
      "$node_config"
    ;;
  peak)
    [[ $# -ge 1 ]] || usage
    dir=$(cgroup_dir "$1")
    if [[ -f "$dir/memory.max" ]]; then
      echo "limit $(cat "$dir/memory.max") peak $(cat "$dir/memory.peak" 2>/dev/null || echo n/a)" \
        "oom_kill $(awk '$1 == "oom_kill" {print $2}' "$dir/memory.events")"
    else
      echo "limit $(cat "$dir/memory.limit_in_bytes") peak $(cat "$dir/memory.max_usage_in_bytes")" \
        "failcnt $(cat "$dir/memory.failcnt") oom_kill $(awk '$1 == "oom_kill" {print $2}' "$dir/memory.oom_control")"
    fi
    ;;
  cgroup-rm)
    [[ $# -ge 1 ]] || usage
    rmdir "$(cgroup_dir "$1")"
    ;;
  umount)
    [[ $# -ge 1 ]] || usage
    for m in dev sys proc; do mountpoint -q "$1/$m" && umount -R "$1/$m"; done
    echo "unmounted"
    ;;
  *) usage ;;
esac
