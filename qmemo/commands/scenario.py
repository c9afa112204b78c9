"""`qmemo scenario`: run a scenario manifest (hosts, links, load, perturbations, invariants), or list them.

`run` exits 0 only if every invariant holds; 1 if one fails or the run could not be done
(no root, no netem for a profile that needs it: one line says which); 130 on Ctrl-C.
`compose` renders a manifest as a docker compose project (qmemo.scenario.compose);
`propagation` measures a full block's propagation per link profile (qmemo.scenario.propagation);
`faults` runs the fault scenarios near saturation, a minute each (qmemo.scenario.faults).
"""

from __future__ import annotations

import argparse
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[2]
SCENARIOS_DIR = REPO_DIR / "scenarios"
PROFILES_FILE = "profiles.toml"


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="scenario_command", metavar="<list|run|show|compose|propagation|faults>",
                                required=True)
    listing = sub.add_parser("list", help="the shipped scenarios and link profiles")
    listing.add_argument("--dir", type=Path, default=SCENARIOS_DIR, help="where manifests live (default scenarios/)")
    listing.set_defaults(run=run_list)
    run = sub.add_parser("run", help="run one manifest and check its invariants")
    run.add_argument("manifest", type=Path, help="a scenario TOML file (or a shipped scenario's name)")
    run.add_argument("--out", type=Path, help="run folder (default runs/scenario-<name>-<time>)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a manifest value, e.g. load.duration_s=20 or perturbations.0.at_s=5")
    run.add_argument("--profiles", type=Path, help="link profiles file (default scenarios/profiles.toml)")
    run.add_argument("--links", choices=("netem", "relay"), default="netem",
                     help="how delays are made: tc netem (default), or a user-space TCP relay per node for "
                          "kernels without sch_netem (no loss; see docs/scenarios.md)")
    run.set_defaults(run=run_one)
    show = sub.add_parser("show", help="a markdown table of finished runs' figures and invariants")
    show.add_argument("runs", type=Path, nargs="+", help="run folders (each with invariants.json)")
    show.add_argument("--faults", action="store_true",
                      help="then, per run, each fault with the transactions intended around it (count, final, "
                           "p50/p99 intended -> committed)")
    show.set_defaults(run=run_show)
    compose = sub.add_parser("compose", help="render a manifest as a docker compose project (nodes, generator, "
                                             "Prometheus) built from the repo's Containerfile")
    compose.add_argument("manifest", type=Path, help="a scenario TOML file (or a shipped scenario's name)")
    compose.add_argument("--out", type=Path, help="project folder (default runs/compose-<name>)")
    compose.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                         help="override a manifest value, as for run")
    compose.set_defaults(run=run_compose)
    propagation = sub.add_parser("propagation", help="time a full 4,000-transaction block takes to reach the other "
                                                     "nodes, per link profile (runs scenarios/propagation.toml)")
    propagation.add_argument("--profiles", default="lan,continental,intercontinental",
                             help="comma-separated link profiles (default lan,continental,intercontinental)")
    propagation.add_argument("--links", choices=("netem", "relay"), default="netem",
                             help="how delays are made, as for run")
    propagation.add_argument("--out", type=Path, help="folder (default runs/propagation-<time>): one run per "
                                                      "profile and propagation.json")
    propagation.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                             help="override a value of scenarios/propagation.toml, as for run")
    propagation.set_defaults(run=run_propagation)
    faults = sub.add_parser("faults", help="kill-producer, kill-all, pause-node and partition-minority at a share "
                                           "of the saturation rate, a minute each, with their invariants")
    rate = faults.add_mutually_exclusive_group(required=True)
    rate.add_argument("--tps", type=float, help="the saturation rate, in TPS")
    rate.add_argument("--sweep", type=Path, help="a sweep.json (./devnet.sh --sweep): its highest stage nothing "
                                                "limited is the saturation rate")
    faults.add_argument("--share", type=float, default=0.8, help="of the saturation rate (default 0.8)")
    faults.add_argument("--duration", type=float, default=60.0, help="seconds of load per scenario (default 60)")
    faults.add_argument("--only", help="comma-separated scenarios (default: all four)")
    faults.add_argument("--links", choices=("netem", "relay"), default="netem", help="as for run")
    faults.add_argument("--out", type=Path, help="folder (default runs/faults-<time>): one run folder per scenario")
    faults.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a manifest value in every run, as for run")
    faults.set_defaults(run=run_faults)


def _resolve(manifest: Path) -> Path:
    if manifest.exists() or manifest.suffix:
        return manifest
    return SCENARIOS_DIR / f"{manifest}.toml"


def run_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from qmemo.scenario.manifest import load_manifest, parse_profiles, read_toml

    table = Table("scenario", "nodes", "load", "perturbations", "what")
    for path in sorted(args.dir.glob("*.toml")):
        if path.name == PROFILES_FILE:
            continue
        manifest = load_manifest(path, args.dir / PROFILES_FILE)
        actions = ", ".join(f"{p.action}@{p.at_s:g}s" for p in manifest.perturbations) or "-"
        table.add_row(path.stem, str(manifest.network.nodes),
                      f"{manifest.load.tps:g} TPS x {manifest.load.duration_s:g} s", actions, manifest.description)
    profiles = Table("profile", "one-way delay", "jitter", "loss", "rate", "source")
    for profile in parse_profiles(read_toml(args.dir / PROFILES_FILE)).values():
        profiles.add_row(profile.name, f"{profile.delay_ms:g} ms", f"{profile.jitter_ms:g} ms", f"{profile.loss_pct:g}%",
                         f"{profile.rate_mbit:g} Mbit/s", profile.source)
    console = Console()
    console.print(table)
    console.print(profiles)
    return 0


def run_one(args: argparse.Namespace) -> int:
    import time

    from rich.console import Console

    from qmemo.scenario.manifest import load_manifest
    from qmemo.scenario.runner import run_scenario

    path = _resolve(args.manifest)
    manifest = load_manifest(path, args.profiles or path.parent / PROFILES_FILE, args.overrides)
    out = args.out or Path("runs") / time.strftime(f"scenario-{manifest.name}-%Y%m%d-%H%M%S")
    console = Console(highlight=False)
    if manifest.chaos is not None:
        # Before anything runs, so that a run that hangs or dies can still be replayed.
        console.print(f"chaos seed {manifest.chaos.seed}: {len(manifest.perturbations)} faults "
                      f"(replay with --set chaos.seed={manifest.chaos.seed})")
    verdict = run_scenario(manifest, path, out, args.overrides, args.links)
    for result in verdict.results:
        mark = "[green]PASS[/]" if result.passed else "[red]FAIL[/]"
        console.print(f"{mark} {result.name}: {result.detail}")
    for name, reason in verdict.run.get("not_judged", {}).items():
        console.print(f"[yellow]NOT JUDGED[/] {name}: {reason}")
    for problem in verdict.run.get("cleanup_problems", []):
        console.print(f"[yellow]cleanup:[/] {problem}")
    console.print(f"{'[green]all invariants hold' if verdict.passed else '[red]invariants failed'}[/]; run folder: {out}")
    return 0 if verdict.passed else 1


def run_show(args: argparse.Namespace) -> int:
    from qmemo.scenario.verdict import read

    print("| scenario | committed TPS | p99 ms | invariants | failed: figures |")
    print("|---|---|---|---|---|")
    for run_dir in args.runs:
        verdict = read(run_dir)
        figures = {r.name: r for r in verdict.results}.get("throughput_within_bounds")
        tps = f"{figures.figures['committed_tps']:,.1f}" if figures else "-"
        p99 = f"{figures.figures['p99_ms']:,.0f}" if figures else "-"
        marks = " ".join([*(f"{r.name} {'pass' if r.passed else '**FAIL**'}" for r in verdict.results),
                          *(f"{name} not judged" for name in verdict.run.get("not_judged", {}))])
        failed = "; ".join(f"{r.name}: {r.detail}" for r in verdict.results if not r.passed) or "-"
        print(f"| {verdict.scenario} | {tps} | {p99} | {marks} | {failed} |")
    if getattr(args, "faults", False):
        from qmemo.scenario.fault_table import fault_rows, render

        for run_dir in args.runs:
            print(f"\n{run_dir}:\n")
            print(render(fault_rows(run_dir)))
    return 0


def run_compose(args: argparse.Namespace) -> int:
    from qmemo.errors import ConfigError
    from qmemo.scenario.compose import prometheus_config, readme, services, to_yaml
    from qmemo.scenario.manifest import load_manifest

    path = _resolve(args.manifest)
    manifest = load_manifest(path, path.parent / PROFILES_FILE, args.overrides)
    if not (REPO_DIR / "Containerfile").is_file():
        raise ConfigError(f"no Containerfile in {REPO_DIR}: compose needs the qMEMO checkout to build its image from")
    out = args.out or Path("runs") / f"compose-{manifest.name}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "compose.yaml").write_text(
        f"# Rendered by `qmemo scenario compose {args.manifest}` (docs/scenarios.md, \"Containers\").\n"
        + to_yaml(services(manifest, str(REPO_DIR))) + "\n")
    (out / "prometheus.yml").write_text(prometheus_config((REPO_DIR / "deploy" / "prometheus.yml").read_text(),
                                                          manifest))
    (out / "README.md").write_text(readme(manifest, str(args.manifest)))
    print(f"compose project: {out}/compose.yaml (with prometheus.yml, README.md); build context {REPO_DIR}")
    return 0


def run_propagation(args: argparse.Namespace) -> int:
    import sys
    import time

    from qmemo.scenario import propagation
    from qmemo.scenario.manifest import load_manifest
    from qmemo.scenario.runner import run_scenario

    path = SCENARIOS_DIR / "propagation.toml"
    out = args.out or Path("runs") / time.strftime("propagation-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    entries, passed = [], True
    for profile in [p.strip() for p in args.profiles.split(",") if p.strip()]:
        overrides = [*args.overrides, f'network.default_profile="{profile}"']
        manifest = load_manifest(path, SCENARIOS_DIR / PROFILES_FILE, overrides)
        verdict = run_scenario(manifest, path, out / profile, overrides, args.links)
        passed = passed and verdict.passed
        entry = propagation.measure(out / profile, manifest, args.links)
        entry["invariants_hold"] = verdict.passed
        entries.append(entry)
        median = f"{entry['median_s'] * 1000:,.0f} ms" if entry["samples"] else "no full block"
        print(f"{profile}: {entry['samples']} block arrivals, median {median}; invariants "
              f"{'hold' if verdict.passed else 'FAILED'} ({out / profile})")
    result = propagation.write(out, manifest, entries, " ".join(["qmemo", *sys.argv[1:]]))
    print(f"figures: {result}")
    return 0 if passed and all(e["samples"] for e in entries) else 1


def run_faults(args: argparse.Namespace) -> int:
    import time

    from qmemo.errors import ConfigError
    from qmemo.load.summary import read_sweep
    from qmemo.scenario import faults
    from qmemo.scenario.manifest import load_manifest
    from qmemo.scenario.runner import run_scenario

    saturation = args.tps if args.tps is not None else faults.saturation_tps(read_sweep(args.sweep))
    tps = faults.fault_rate(saturation, args.share)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(faults.FAULT_SCENARIOS)
    unknown = sorted(set(names) - set(faults.FAULT_SCENARIOS))
    if unknown:
        raise ConfigError(f"--only: {', '.join(unknown)} is not one of {', '.join(faults.FAULT_SCENARIOS)}")
    overrides = [*faults.fault_overrides(tps, args.duration), *args.overrides]
    out = args.out or Path("runs") / time.strftime("faults-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    print(f"saturation {saturation:,.0f} TPS"
          + (f" (from {args.sweep})" if args.sweep else "")
          + f"; the faults at {args.share:g} of it: {tps:,.0f} TPS, {args.duration:g} s each")
    passed = True
    for name in names:
        path = SCENARIOS_DIR / f"{name}.toml"
        manifest = load_manifest(path, SCENARIOS_DIR / PROFILES_FILE, overrides)
        verdict = run_scenario(manifest, path, out / name, overrides, args.links)
        passed = passed and verdict.passed
        failed = "; ".join(f"{r.name}: {r.detail}" for r in verdict.results if not r.passed)
        print(f"{name}: {'all invariants hold' if verdict.passed else 'FAILED ' + failed} ({out / name})")
    run_show(argparse.Namespace(runs=[out / name for name in names]))
    return 0 if passed else 1
