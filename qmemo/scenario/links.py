"""Link shaping between zones: named profiles applied with tc on each node's egress.

On node i's eth0: an HTB root whose default class (unshaped, for the generator, the
attacker and the runner) takes anything not matched; one HTB class per destination zone
at the profile's rate, with a netem qdisc under it for delay, jitter (normal
distribution) and loss when the profile has any; and one u32 filter per destination
node address sending its packets to its zone's class. This is the layout of CometBFT's
e2e latency setter. Each direction is shaped on its sender, so a round trip between two
zones costs twice the profile's one-way delay.

`plan()` is pure (the tc argument lists for one node), so it is tested without root;
`apply()` runs them inside the node's namespace, replacing whatever was there - which is
also how a "profile" perturbation changes a link mid-run.
"""

from __future__ import annotations

from qmemo.errors import SetupError
from qmemo.scenario.hosts import CommandFailed, Hosts, run_ip
from qmemo.scenario.manifest import LinkProfile, Network

DEVICE = "eth0"
UNSHAPED_RATE = "10gbit"
# netem's default queue is 1,000 packets: at 1 gbit and 111 ms that is far less than the
# bandwidth-delay product (~9,500 full frames), and netem would drop the excess - loss
# the profile never asked for.
NETEM_LIMIT = 100_000
FIRST_CLASS = 10


def plan(network: Network, profiles: dict[str, LinkProfile], node: int, addresses: list[str],
         overrides: dict[frozenset[str], str] | None = None, *, netem: bool = True) -> list[list[str]]:
    """The tc commands (without `ip netns exec`) that shape node `node`'s egress.

    With `netem=False` (the relay backend delays in user space) only the HTB rates are set.
    """
    commands = [["tc", "qdisc", "replace", "dev", DEVICE, "root", "handle", "1:", "htb", "default", "1"],
                ["tc", "class", "add", "dev", DEVICE, "parent", "1:", "classid", "1:1", "htb",
                 "rate", UNSHAPED_RATE]]
    my_zone = network.zones[node]
    classes: dict[str, int] = {}
    for zone in dict.fromkeys(network.zones):         # zones in first-seen order, each once
        profile = profiles[network.profile_between(my_zone, zone, overrides)]
        classid = FIRST_CLASS + len(classes)
        classes[zone] = classid
        rate = f"{profile.rate_mbit:g}mbit"
        commands.append(["tc", "class", "add", "dev", DEVICE, "parent", "1:", "classid", f"1:{classid}", "htb",
                         "rate", rate, "ceil", rate])
        if netem and profile.needs_netem:
            netem_args = ["tc", "qdisc", "add", "dev", DEVICE, "parent", f"1:{classid}", "handle", f"{classid}:", "netem",
                     "limit", str(NETEM_LIMIT), "delay", f"{profile.delay_ms:g}ms"]
            if profile.jitter_ms > 0:
                netem_args += [f"{profile.jitter_ms:g}ms", "distribution", "normal"]
            if profile.loss_pct > 0:
                netem_args += ["loss", f"{profile.loss_pct:g}%"]
            commands.append(netem_args)
    for other, address in enumerate(addresses):
        if other != node:
            commands.append(["tc", "filter", "add", "dev", DEVICE, "parent", "1:", "protocol", "ip", "prio", "1",
                             "u32", "match", "ip", "dst", f"{address}/32",
                             "flowid", f"1:{classes[network.zones[other]]}"])
    return commands


def apply(hosts: Hosts, network: Network, profiles: dict[str, LinkProfile],
          overrides: dict[frozenset[str], str] | None = None, *, netem: bool = True) -> None:
    """Shape every node's egress (replacing the previous shaping)."""
    addresses = [hosts.hosts[f"node-{i}"].address for i in range(network.nodes)]
    for node in range(network.nodes):
        namespace = hosts.hosts[f"node-{node}"].namespace
        run_ip(["ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", DEVICE, "root"], check=False)
        for command in plan(network, profiles, node, addresses, overrides, netem=netem):
            run_ip(["ip", "netns", "exec", namespace, *command])


def require_backend(hosts: Hosts, needing: list[LinkProfile], backend: str) -> None:
    """Fail in one line if the profiles cannot be had: no netem in this kernel, or loss asked of the relay."""
    if not needing:
        return
    if backend == "relay":
        lossy = [p.name for p in needing if p.loss_pct > 0]
        if lossy:
            raise SetupError(f"link profile(s) {', '.join(lossy)} ask for loss, which the relay backend cannot "
                             "emulate (use --links netem on a kernel with sch_netem)")
        return
    namespace = hosts.hosts["gen"].namespace
    probe = ["ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", DEVICE, "root", "netem", "delay", "1ms"]
    try:
        run_ip(probe)
    except CommandFailed as exc:
        names = ", ".join(p.name for p in needing)
        raise SetupError(f"link profile(s) {names} need tc netem, which this kernel lacks "
                         f"(CONFIG_NET_SCH_NETEM; tc said: {str(exc).rsplit(': ', 1)[-1]}); "
                         "--links relay delays in user space instead") from None
    run_ip(["ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", DEVICE, "root"], check=False)
