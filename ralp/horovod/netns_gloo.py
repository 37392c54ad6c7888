"""``horovodrun --gloo`` for a simulated cluster: one Horovod host per network namespace.

    python -m ralp.horovod.netns_gloo --netns DRIVER_NS \\
        --hosts 10.213.0.2=NS2,10.213.0.3=NS3 --iface eth0 --driver-ip 10.213.0.1 -- COMMAND...

``horovodrun`` reaches a remote host with ssh; in a simulated cluster every host is a network
namespace on this machine, so this driver runs Horovod's own Gloo launcher
(``horovod.runner.gloo_run.launch_gloo``: rendezvous server, rank assignment, per-rank
environment, output forwarding, stop-all-on-failure) and only replaces the ssh hop by
``ip netns exec NS``. It runs in a namespace of its own on the same bridge, so the ranks reach
its rendezvous server at ``--driver-ip``; the ranks talk Gloo over ``--iface``. A rank that
runs ``python -m MODULE`` is forked from this driver with TensorFlow already imported
(:mod:`ralp.horovod.prefork`) instead of started afresh.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading
from shlex import quote


def netns_exec_command(namespace_of: dict[str, str]):
    """An ``exec_command`` for ``launch_gloo`` that starts each rank in its host's namespace.

    Mirrors horovodrun's own (``gloo_run._exec_command_fn``): a rank that fails stops the
    others, and a SIGINT/SIGTERM to this driver (one of ``events``) stops them all.
    """
    from horovod.runner.common.util import safe_shell_exec

    from ralp.emulation.devices import rank_group_command
    from ralp.horovod.prefork import rank_finished

    terminate_all = threading.Event()

    def exec_command(command: str, slot_info, events):
        namespace = namespace_of[slot_info.hostname]
        inner = f"cd {quote(os.getcwd())} >/dev/null 2>&1 ; {command}"
        # The rank's device group is joined before `ip netns exec`, which remounts /sys.
        wrapped = shlex.join(rank_group_command(slot_info.rank,
                                              ["ip", "netns", "exec", namespace, "sh", "-c", inner]))
        try:
            code = safe_shell_exec.execute(wrapped, index=slot_info.rank,
                                           events=[*(events or []), terminate_all])
        except Exception as e:  # noqa: BLE001 - as horovodrun: report and count as a failure
            print(f"rank {slot_info.rank}: could not run: {e}", flush=True)
            code = 1
        return rank_finished(slot_info.rank, code, terminate_all)

    return exec_command


def main(argv: list[str] | None = None, launcher_pid: int | None = None) -> int:
    """Run the Gloo launcher; ``launcher_pid``: a driver forked from the zygote is not that
    process' child, so it ends itself once that process is gone (watched from a thread,
    started after the ranks are forked)."""
    parser = argparse.ArgumentParser(prog="python -m ralp.horovod.netns_gloo")
    parser.add_argument("--netns", help="the network namespace this driver runs in")
    parser.add_argument("--hosts", required=True,
                        help="ADDRESS=NAMESPACE,... one Horovod slot per host, ranks in order")
    parser.add_argument("--iface", default="eth0", help="the hosts' interface for Gloo")
    parser.add_argument("--driver-ip", required=True, help="this driver's address on the bridge")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND to run per rank")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    namespace_of = dict(pair.split("=", 1) for pair in args.hosts.split(","))
    if args.netns:  # before any thread or socket (setns moves this thread only)
        from ralp.emulation.iproute import enter_namespace

        enter_namespace(args.netns)

    from horovod.runner.common.util.settings import Settings
    from horovod.runner.gloo_run import launch_gloo

    from ralp.horovod.prefork import PreforkedRanks, forking_wanted

    settings = Settings(
        num_proc=len(namespace_of),
        hosts=",".join(f"{address}:1" for address in namespace_of),
        nics={args.iface},
    )
    env = dict(os.environ)  # the ranks' environment, as given to this driver
    ranks = None
    if forking_wanted(command):
        ranks = PreforkedRanks(len(namespace_of), namespace_of)
        exec_command = ranks.exec_command(threading.Event())
    else:
        exec_command = netns_exec_command(namespace_of)
    if launcher_pid is not None:
        from ralp.cluster.zygote import exit_with

        exit_with(launcher_pid)
    try:
        launch_gloo(command, exec_command, settings, {args.iface}, env, args.driver_ip)
    except RuntimeError as e:  # launch_gloo's "one or more processes exited with non-zero"
        print(str(e).strip().splitlines()[0], file=sys.stderr, flush=True)
        return 1
    finally:
        if ranks is not None:
            ranks.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
