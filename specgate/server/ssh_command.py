"""What the ssh launcher runs: the ssh command lines and the small POSIX shell scripts they carry.

Kept apart from the launcher's process handling so that what reaches a remote host can be
read (and tested) in one place. The remote side of a boot:

1. reads, from the ssh session's input, the API key and the server's environment: neither
   is ever on a command line (the ssh command line is visible in `ps` on this machine, the
   remote one in `ps` there and in sshd's logs);
2. starts the server under `setsid`, in a process group of its own, and reports that
   group's id first thing on its output;
3. keeps reading its input: when it ends (specgate closed it, or specgate died and ssh
   with it, or the connection broke) it signals the whole group, TERM, then KILL;
4. when the server exits by itself, signals the rest of the group the same way (SGLang
   forks schedulers that would outlive their launcher), and exits with the server's code.
"""

from __future__ import annotations

import re
import shlex
import subprocess

from specgate.deployment import SshSpec
from specgate.hardware import GpuInfo

PGID_MARK = "SPECGATE_PGID "
GONE_MARK = "SPECGATE_GONE"
CD_FAILED_EXIT = 97  # the remote directory could not be entered
END_OF_ENV = "."
# Defaults that come after the deployment's own options: ssh takes the first value it is given
# for an option, so launch.ssh.options can change any of these. BatchMode comes first: a
# password prompt would wait forever on a run nobody watches.
_FIRST = ("-o", "BatchMode=yes")
_DEFAULTS = (
    "-o", "ConnectTimeout=15",
    # A connection that stops answering (a host frozen, a network gone) ends the session within
    # about 15 s, so the server is reported dead rather than hanging every request.
    "-o", "ServerAliveInterval=5",
    "-o", "ServerAliveCountMax=3",
    "-o", "LogLevel=INFO",  # "Timeout, server not responding" is INFO: the log must say why a session ended
)  # fmt: skip

# The remote shell's work, as above. $1 is the directory to enter (empty: stay), the rest is the
# server's command. `reap` is what both endings share: TERM the group, wait, then KILL it.
BOOT_SCRIPT = r"""
reap() {
  kill -s TERM -- "-$pg" 2>/dev/null; kill -s CONT -- "-$pg" 2>/dev/null
  n=0
  while kill -s 0 -- "-$pg" 2>/dev/null; do
    n=$((n + 1))
    if [ "$n" -gt "$GRACE_TICKS" ]; then kill -s KILL -- "-$pg" 2>/dev/null; break; fi
    sleep 0.1
  done
}
d=$1; shift
exec 3<&0 </dev/null
IFS= read -r key <&3 || key=
while IFS= read -r kv <&3 && [ "$kv" != "." ]; do export "$kv"; done
if [ -n "$d" ]; then
  cd -- "$d" || { echo "specgate: cannot enter directory $d on $(hostname)" >&2; exit 97; }
fi
if [ -n "$key" ]; then set -- "$@" --api-key "$key"; fi
key=
setsid "$@" 3<&- 2>&1 &
pg=$!
echo "SPECGATE_PGID $pg"
( cat <&3 >/dev/null 2>&1; reap ) >/dev/null 2>&1 &
wd=$!
exec 3<&-
wait "$pg"
rc=$?
kill "$wd" 2>/dev/null
reap
exit "$rc"
"""

# TERM the group, wait, KILL what is left, wait again; say whether it is gone.
KILL_SCRIPT = r"""
pg=$1; ticks=$2; sig=$3
if ! kill -s 0 -- "-$pg" 2>/dev/null; then echo SPECGATE_GONE; exit 0; fi
kill -s "$sig" -- "-$pg" 2>/dev/null; kill -s CONT -- "-$pg" 2>/dev/null
n=0
while kill -s 0 -- "-$pg" 2>/dev/null; do
  n=$((n + 1))
  if [ "$n" -eq "$ticks" ]; then kill -s KILL -- "-$pg" 2>/dev/null; fi
  if [ "$n" -gt $((ticks + 100)) ]; then echo "SPECGATE_LEFT $(ps -o pid= -g "$pg" | tr '\n' ' ')"; exit 1; fi
  sleep 0.1
done
echo SPECGATE_GONE
"""


def ssh_base(spec: SshSpec, host: str) -> list[str]:
    """`ssh [options] HOST`, the command to follow."""
    out = ["ssh", *_FIRST, *spec.options, "-T", "-x"]
    if spec.port is not None:
        out += ["-p", str(spec.port)]
    if spec.identity_file is not None:
        # Only that key: an agent offering many would hit the server's MaxAuthTries first.
        out += ["-i", str(spec.identity_file), "-o", "IdentitiesOnly=yes"]
    if spec.user is not None:
        out += ["-l", spec.user]
    return [*out, *_DEFAULTS, host]


def _remote(script: str, *args: str) -> str:
    """One string for the remote login shell (whatever it is) that hands `args` to `sh` intact."""
    return " ".join(["exec", "sh", "-c", shlex.quote(script), "specgate", *(shlex.quote(a) for a in args)])


def boot_command(spec: SshSpec, host: str, directory: str | None, argv: list[str], grace_s: float) -> list[str]:
    script = BOOT_SCRIPT.replace("$GRACE_TICKS", str(_ticks(grace_s)))
    return [*ssh_base(spec, host), _remote(script, directory or "", *argv)]


def boot_input(api_key: str | None, env: dict[str, str]) -> bytes:
    """What the boot script reads first: the key's line, then NAME=VALUE lines, then ".".

    Values travel one per line, so a value with a line break cannot be sent (ValueError)."""
    lines = [api_key or ""]
    for name, value in env.items():
        if "\n" in value or "\r" in value or "\n" in name:
            raise ValueError(f"environment variable {name} holds a line break, which cannot be passed over ssh")
        lines.append(f"{name}={value}")
    if "\n" in lines[0]:
        raise ValueError("the API key holds a line break")
    return ("\n".join([*lines, END_OF_ENV]) + "\n").encode()


def kill_command(spec: SshSpec, host: str, pgid: int, grace_s: float, signal_name: str = "TERM") -> list[str]:
    return [*ssh_base(spec, host), _remote(KILL_SCRIPT, str(pgid), str(_ticks(grace_s)), signal_name)]


def forward_command(spec: SshSpec, host: str, local_port: int, remote_port: int) -> list[str]:
    """`ssh -N -L`: this machine's 127.0.0.1:local_port to the remote loopback's remote_port."""
    base = ssh_base(spec, host)
    return [
        *base[:-1],
        "-N",
        "-o", "ExitOnForwardFailure=yes",  # a local port taken: exit (and be retried), not run without it
        "-L", f"127.0.0.1:{local_port}:127.0.0.1:{remote_port}",
        host,
    ]  # fmt: skip


def _ticks(seconds: float) -> int:
    return max(1, round(seconds * 10))


# The remote host's GPUs, for the fingerprint: the servers run there, not on this client. Asked
# with nvidia-smi (on every host with NVIDIA's driver; NVML's Python bindings may be absent there).
GPU_QUERY_SCRIPT = (
    "nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader,nounits || exit 0; "
    "nvidia-smi | grep -o 'CUDA Version: *[0-9.]*'"
)
GPU_QUERY_S = 30.0


def gpu_query_command(spec: SshSpec, host: str) -> list[str]:
    return [*ssh_base(spec, host), _remote(GPU_QUERY_SCRIPT)]


def parse_gpu_query(text: str) -> GpuInfo | None:
    """nvidia-smi's CSV rows (name, driver, memory MiB) and its "CUDA Version: X" header; None
    where no GPU row came (no driver on that host)."""
    rows = [[cell.strip() for cell in line.split(",")] for line in text.splitlines() if line.count(",") == 2]
    if not rows:
        return None
    cuda = re.search(r"CUDA Version: *([0-9.]+)", text)
    memory = rows[0][2]
    return GpuInfo(
        name=rows[0][0],
        count=len(rows),
        driver=rows[0][1],
        cuda=cuda.group(1) if cuda else "unknown",
        memory_total_mib=int(memory) if memory.isdigit() else 0,
    )


def remote_gpu_info(spec: SshSpec) -> GpuInfo | None | str:
    """The GPUs of rank 0's host (hosts[0], where the servers run), asked over ssh as the boots
    are: a GpuInfo, None where that host has no NVIDIA driver, or why it could not be asked."""
    host = spec.hosts[0]
    try:
        done = subprocess.run(
            gpu_query_command(spec, host), capture_output=True, text=True, timeout=GPU_QUERY_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"ssh to {host} failed: {exc}"
    if done.returncode != 0:
        return f"ssh to {host} exited {done.returncode}: {done.stderr.strip()[-200:]}"
    return parse_gpu_query(done.stdout)
