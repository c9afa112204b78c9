"""`qmemo report` and `qmemo headroom` on a recorded bench_c run.

tests/fixtures/c-baseline-quick/ is a real `qmemo bench c --quick` results folder from
this project's 2-core machine (its run.log dropped for size). tests/fixtures/devnet-run/
is the summary.json of a real short devnet.sh run, and tests/fixtures/devnet-sweep/ a real
`qmemo gen --sweep` folder (sweep.json and each stage's summary.json), both written by the
current generator (qmemo.load.summary; see tests/fixtures/README.md to re-record them).
To refresh the C fixture after bench_c's format changes: `.venv/bin/qmemo bench c --quick
--out <new folder>` and copy its JSON files over tests/fixtures/c-baseline-quick/.
The report is generated once through the real CLI; the tests then check that every
section and plot is there, that every table names its source, and that the figures in
the tables are the fixture's figures (or the model's arithmetic on them).
"""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from qmemo.analysis.devnet import load_devnet_run
from qmemo.analysis.py_bench import PyBenches, load_py_benches
from qmemo.analysis.report_py import python_benches_section
from qmemo.errors import ConfigError
from tests.conftest import REPO_ROOT, VENV_BIN, run_command

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "c-baseline-quick"
DEVNET = REPO_ROOT / "tests" / "fixtures" / "devnet-run"
SWEEP = REPO_ROOT / "tests" / "fixtures" / "devnet-sweep"
SECTIONS = ("Inputs and contents", "Environment", "Verification results", "Scheme comparison", "Multicore scaling",
            "Signature sizes", "Headroom against MEMO", "Verify implementations", "Hardware sensitivity (projections)",
            "On-chain footprint", "Devnet end to end", "Stage costs per transaction", "Schemes side by side",
            "Python chain core and node")
PLOTS = ("headline.png", "verify_distribution_Falcon-512.png", "scheme_rates.png", "multicore.png", "signature_sizes.png",
         "headroom.png", "clock_projection.png", "block_composition.png", "devnet_throughput_latency.png",
         "stage_costs.png",
         "schemes_throughput_latency.png")   # two --devnet runs: the schemes section draws its curves
PY_BENCH = REPO_ROOT / "tests" / "fixtures" / "py-bench"
CORE_BENCH = PY_BENCH / "core-bench-20261123T161800Z.json"
NODE_BENCH = PY_BENCH / "node-bench-20261126T034032Z.json"
NODE_BENCH_BEFORE_HEADLINE = PY_BENCH / "node-bench-20261123T161900Z.json"    # written before `headline`
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def summary() -> dict:
    return json.loads((FIXTURE / "summary.json").read_text())


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("report")
    done = run_command([str(VENV_BIN / "qmemo"), "report", "--results", str(FIXTURE), "--devnet", str(DEVNET),
                        "--devnet", str(SWEEP), "--core-bench", str(CORE_BENCH), "--node-bench", str(NODE_BENCH),
                        "--out", str(out)])
    assert done.returncode == 0, done.stderr
    return out, (out / "REPORT.md").read_text()


def tables(markdown: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table as (headers, rows of cells)."""
    found, block = [], []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip("|").split(" | ")])
        elif block:
            found.append((block[0], block[2:]))
            block = []
    return found


def row(markdown: str, header: str, first_cell: str) -> dict[str, str]:
    """The row starting with `first_cell` in the first table that has a column `header`."""
    for headers, rows in tables(markdown):
        if header in headers:
            for cells in rows:
                if cells[0] == first_cell:
                    return dict(zip(headers, cells))
    raise AssertionError(f"no row {first_cell!r} in a table with column {header!r}")


def x(value: float) -> str:
    """A headroom as the report prints it: two decimals below 10x, one above."""
    return f"{value:,.2f}x" if value < 10 else f"{value:,.1f}x"


def test_report_has_every_section_in_order(report):
    _, md = report
    headings = re.findall(r"^## (.+)$", md, flags=re.M)
    assert headings == list(SECTIONS)


def test_report_draws_every_plot_as_a_png_it_links(report):
    out, md = report
    for name in PLOTS:
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, name
        assert f"]({name})" in md, f"{name} is not linked from REPORT.md"
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert sorted(linked) == sorted(PLOTS)


def test_every_table_names_its_source_before_the_next_heading(report):
    _, md = report
    for chunk in re.split(r"^#{2,3} ", md, flags=re.M)[1:]:
        lines = chunk.splitlines()
        last_table_line = max((i for i, line in enumerate(lines) if line.startswith("|")), default=None)
        if last_table_line is not None:
            assert any(line.startswith("_Source: `") for line in lines[last_table_line:]), chunk.splitlines()[0]


def test_environment_is_the_fixtures_machine(report, summary):
    _, md = report
    assert row(md, "property", "run id")["value"].startswith(f"`{summary['run_id']}`")
    assert summary["system"]["cpu_model"] in row(md, "property", "machine")["value"]
    assert "AVX2" in row(md, "property", "liboqs")["value"]


def test_verification_figures_match_the_fixture(report, summary):
    _, md = report
    falcon = summary["single_core_verify"]["Falcon-512"]
    single = row(md, "TSC ticks/verify", "Falcon-512")
    assert single["verify/s"] == f"{falcon['single_pass']['ops_per_s']:,.0f}"
    stats = json.loads((FIXTURE / "statistical.json").read_text())["results"]["schemes"][0]["ops_per_s"]
    assert row(md, "statistic (verifications/s per trial)", "**median**")["value"] == f"{stats['median']:,.1f}"
    assert row(md, "statistic (verifications/s per trial)", "Jarque-Bera")["value"] == f"{stats['jarque_bera']:,.1f}"
    verdict = "not** normally distributed" if not stats["normal_5pct"] else "consistent with a normal"
    assert verdict in md
    ratio = summary["validate"]["ratios"]["Falcon-512"]["ratio"]
    assert row(md, "ours / speed_sig", "Falcon-512")["ours / speed_sig"] == f"{ratio:,.3f}"


def test_scheme_comparison_has_ratios_to_falcon_and_both_classical_implementations(report, summary):
    _, md = report
    schemes = summary["schemes"]
    mldsa = row(md, "verify vs Falcon-512", "ML-DSA-44")
    assert mldsa["verify/s"] == f"{schemes['ML-DSA-44']['verify_per_s']:,.0f}"
    expected = schemes["ML-DSA-44"]["verify_per_s"] / schemes["Falcon-512"]["verify_per_s"]
    assert mldsa["verify vs Falcon-512"] == f"{expected:,.2f}x"
    fair = row(md, "role", "ECDSA-secp256k1/libsecp256k1")
    assert "fair" in fair["role"]
    assert row(md, "role", "ECDSA-secp256k1/OpenSSL")["verify/s"] == \
        f"{schemes['ECDSA-secp256k1/OpenSSL']['verify_per_s']:,.0f}"


def test_multicore_and_pool_match_the_fixture(report, summary):
    _, md = report
    for r in summary["multicore"]["verify"]["rows"]:
        assert row(md, "verify/s per thread", str(r["threads"]))["verify/s"] == f"{r['ops_per_s']:,.0f}"
    pool = summary["pool"]
    assert row(md, "task latency p99 ms", "pool")["verify/s"] == f"{pool['pool']['ops_per_s']:,.0f}"


def test_signature_sizes_match_the_fixture(report, summary):
    _, md = report
    for scheme, s in summary["signature_sizes"].items():
        cells = row(md, "declared max B", scheme)
        assert (cells["mean B"], cells["max B"]) == (f"{s['mean']:,.1f}", f"{s['max']:,.0f}")


def test_headroom_is_the_fixture_median_over_memos_requirement(report, summary):
    _, md = report
    median = summary["single_core_verify"]["Falcon-512"]["ops_per_s"]
    two_cores = summary["multicore"]["verify"]["rows"][-1]["ops_per_s"]
    conservative = row(md, "needed/s per shard", "conservative, 20% cross-shard")
    # 10,000 TPS / 4 shards x (1 + 0.2) = 3,000 verifications/s per shard
    assert conservative["needed/s per shard"] == "3,000.0"
    assert conservative["single core, liboqs (constant-time)"].startswith(x(median / 3000))
    assert conservative["2 cores (measured), liboqs (constant-time)"].startswith(x(two_cores / 3000))
    fast = [r["ops_per_s"] for r in summary["verify_implementations"] if r["scheme"] == "Falcon-512"
            and r["hash_to_point"] == "variable-time" and r["public_key"] == "cached decoded key"][0]
    assert conservative["single core, fast verifier (variable-time, key cached)"] == f"{x(fast / 3000)} meets"
    # 50,700 / 256 x 1.2 = 237.65625
    target = row(md, "needed/s per shard", "target, 20% cross-shard")
    assert target["needed/s per shard"] == "237.7"
    assert target["single core, liboqs (constant-time)"] == f"{x(median / 237.65625)} meets"
    # the recorded sweep saturated (its last stage was limited by latency): its headline,
    # the highest stage nothing limited, is a capacity against 3,000/s
    rows = json.loads((SWEEP / "sweep.json").read_text())["rows"]
    limited = ("throughput_saturated", "latency_saturated", "generator_fell_behind")
    held = max((r for r in rows if not any(r[k] for k in limited)), key=lambda r: r["target_tps"])
    assert conservative["devnet devnet-sweep, node end to end"] == f"{x(held['committed_tps'] / 3000)} short"
    # the single run kept up with its load: a lower bound, and no verdict is drawn from it
    run = json.loads((DEVNET / "summary.json").read_text())
    assert not run["throughput_saturated"]
    assert conservative["devnet devnet-run, node end to end (lower bound)"] == \
        f"≥{x(run['committed_tps'] / 3000)} (lower bound)"
    section = md.split("## Headroom against MEMO")[1].split("\n## ")[0]
    assert "short" not in row(section, "needed/s per shard", "conservative, 20% cross-shard")[
        "devnet devnet-run, node end to end (lower bound)"]


def test_verify_implementations_are_the_fixtures_rows_with_their_hash_to_point(report, summary):
    _, md = report
    rows = summary["verify_implementations"]
    assert len(rows) == 5
    found = [dict(zip(headers, cells)) for headers, table_rows in tables(md) if "instructions/verify" in headers
             and "hash-to-point" in headers for cells in table_rows]
    assert [(c["scheme"], c["hash-to-point"]) for c in found] == [(r["scheme"], r["hash_to_point"]) for r in rows]
    for cells, r in zip(found, rows):
        assert cells["verify/s"] == f"{r['ops_per_s']:,.0f}"
        assert cells["x liboqs (same run)"] == f"{r['ratio_to_liboqs']:,.2f}x"
        assert cells["instructions/verify"] == (f"{r['instructions_per_verify']:,}"
                                                if r["instructions_per_verify"] is not None else "-")
    assert "not signature-compatible" in md.split("## Verify implementations")[1]


def test_headroom_per_implementation_is_each_schemes_liboqs_and_best_honest_rate(report, summary):
    _, md = report
    section = md.split("## Verify implementations")[1].split("\n## ")[0]
    [(headers, table_rows)] = [t for t in tables(section) if "needed/s per shard" in t[0]]
    target = dict(zip(headers, next(cells for cells in table_rows if cells[0] == "target, 20% cross-shard")))
    assert target["needed/s per shard"] == "237.7"
    # The fixture (a run from before ML-DSA's verifier) holds Falcon-512's liboqs and fast rows and
    # fn-dsa's: liboqs's and the best liboqs-compatible one, never FN-DSA (another scheme).
    assert headers[2:] == ["Falcon-512 liboqs liboqs, constant-time hash-to-point",
                           "Falcon-512 qMEMO cached, variable-time hash-to-point; cached key"]
    best = section.split("### Each scheme's best honest verifier")[1]
    [(headers, table_rows)] = tables(best)[:1]
    cells = dict(zip(headers, table_rows[0]))
    assert cells["scheme"] == "Falcon-512" and cells["constant-time?"].startswith("no: variable-time")


def test_stage_cost_section_reads_the_nodes_stage_costs_and_names_a_folder_without(report):
    _, md = report
    nodes = json.loads((DEVNET / "node-stages.json").read_text())["nodes"]
    admitted = sum(node["admitted"] for node in nodes)
    cells = row(md, "C verify µs", "Falcon-512 (devnet-run, 300 TPS)")
    assert cells["admitted"] == f"{admitted:,}"
    for stage in ("verify", "decode_hash", "store", "other"):
        assert cells[stage] == f"{sum(node['cpu_s'][stage] for node in nodes) / admitted * 1e6:,.1f}", stage
    # The nodes ran the fast verifier: they are set against its C rate with the key cached.
    fast = [row for row in json.loads((FIXTURE / "summary.json").read_text())["verify_implementations"]
            if row["scheme"] == "Falcon-512" and row["hash_to_point"] == "variable-time"
            and row["public_key"] == "cached decoded key"]
    assert {node["verifier"] for node in nodes} == {"fast"} and len(fast) == 1
    assert cells["C verify µs"] == f"{1e6 / fast[0]['ops_per_s']:,.1f}"
    first = nodes[0]
    assert row(md, "C verify µs", f"{first['node']} (devnet-run, 300 TPS)")["admitted"] == f"{first['admitted']:,}"
    assert "No stage costs in `tests/fixtures/devnet-sweep/" in md      # recorded before the generator kept them


class _HtmlTables(HTMLParser):
    """Every <table> of a page as rows of cell texts, and every src/href it names."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.links: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [value or "" for name, value in attrs if name in ("src", "href")]
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def markdown_cell_text(cell: str) -> str:
    """A Markdown cell as its HTML text reads: inline marks dropped, escaped pipes kept."""
    return re.sub(r"\*\*|`", "", cell).replace("\\|", "|")


def test_html_report_is_self_contained_and_has_every_table_of_the_markdown(report):
    out, md = report
    page = _HtmlTables()
    page.feed((out / "REPORT.html").read_text())
    assert page.tables and not [link for link in page.links if re.match(r"(https?:)?//", link)]
    assert all(link.startswith(("data:image/png;base64,", "#")) for link in page.links)
    images = re.findall(r"!\[[^]]*\]\(([^)]+)\)", md)
    assert sum(link.startswith("data:") for link in page.links) == len(images) == len(PLOTS)
    html_tables = page.tables
    assert len(html_tables) == len(tables(md))
    for (headers, rows), html_rows in zip(tables(md), html_tables):
        assert [markdown_cell_text(c) for c in headers] == html_rows[0]
        assert [[markdown_cell_text(c) for c in cells] for cells in rows] == html_rows[1:]


def test_html_report_headings_carry_the_contents_anchors(report):
    out, md = report
    text = (out / "REPORT.html").read_text()
    for target in re.findall(r"\]\(#([^)]+)\)", md):
        assert f'id="{target}"' in text


def test_python_bench_figures_are_the_result_files_with_their_source(report):
    _, md = report
    core, node = json.loads(CORE_BENCH.read_text()), json.loads(NODE_BENCH.read_text())
    for scheme, figures in core["schemes"].items():
        cold = row(md, scheme, "apply_block, cold signature cache")[scheme]
        assert cold == f"{figures['per_transaction_us']['validate_cold']['median_us']:,.2f}"
    for run in node["runs"]:
        cells = row(md, "admitted tx/s", str(run["threads"]))
        assert cells["admitted tx/s"] == f"{run['admitted_per_s']:,.0f}"
        assert cells["per CPU-s vs C 1-core"] == f"{run['ratio_to_c_single_core'] * 100:,.0f}%"
    section = md.split("## Python chain core and node")[1]
    assert f"`tests/fixtures/py-bench/{CORE_BENCH.name}`" in section
    assert f"`tests/fixtures/py-bench/{NODE_BENCH.name}`" in section
    assert f"- qmemo bench node: `tests/fixtures/py-bench/{NODE_BENCH.name}`" in md     # named among the inputs


def test_the_node_bench_headline_and_its_ceiling_are_the_files(report):
    _, md = report
    head = json.loads(NODE_BENCH.read_text())["headline"]
    section = md.split("## Python chain core and node")[1]
    assert (f"the node admitted {head['ratio']:.2f} of its verifier's native-loop rate per CPU-second "
            f"({head['same_run_verify_per_s']:,.0f} verifies/s, `{head['reference']}`)") in section
    top = head["ceiling"]
    assert (f"Its ceiling in that run is {top['ratio']:.2f}: verify {top['verify_us_per_tx']:.1f} µs over verify plus "
            f"the admission kernel's native decoding and hashing ({top['decode_hash_us_per_tx']:.1f} µs") in section


def test_a_node_bench_headline_without_a_ceiling_reads_without_its_sentence(tmp_path):
    document = json.loads(NODE_BENCH.read_text())
    del document["headline"]["ceiling"]            # as every file written before 2026-11-26
    older = tmp_path / "node-bench-20261125T000000Z.json"
    older.write_text(json.dumps(document))
    node = load_py_benches(node_file=older).node
    assert node.headline.ceiling is None and node.headline.ratio == document["headline"]["ratio"]
    body = python_benches_section(PyBenches(node=node)).body
    assert "Same run, one verify thread" in body and "ceiling" not in body


def test_a_node_bench_file_from_before_the_headline_reads_without_it():
    node = load_py_benches(node_file=NODE_BENCH_BEFORE_HEADLINE).node
    assert node.headline is None and node.runs
    body = python_benches_section(PyBenches(node=node)).body
    assert "Same run, one verify thread" not in body and "admitted tx/s" in body


def test_the_newest_bench_results_are_the_default(tmp_path):
    for name in ("core-bench-20250101T000000Z.json", "node-bench-20250101T000000Z.json"):
        (tmp_path / name).write_text('{"schema": "old"}')            # older, and unreadable if chosen
    shutil.copy(CORE_BENCH, tmp_path / "core-bench-20261231T000000Z.json")
    shutil.copy(NODE_BENCH, tmp_path / "node-bench-20261231T000000Z.json")
    benches = load_py_benches(results_root=tmp_path)
    assert benches.core.source.name == "core-bench-20261231T000000Z.json"
    assert benches.node.source.name == "node-bench-20261231T000000Z.json"
    assert load_py_benches(results_root=tmp_path / "none") == PyBenches()


def test_a_named_bench_file_of_another_kind_is_one_line_naming_the_command(tmp_path):
    with pytest.raises(ConfigError, match="re-run `qmemo bench node`") as caught:
        load_py_benches(node_file=CORE_BENCH, results_root=tmp_path)
    assert "\n" not in str(caught.value)


def test_an_unreadable_newest_bench_file_costs_only_its_part_of_the_section(tmp_path):
    shutil.copy(CORE_BENCH, tmp_path / "core-bench-20261231T000000Z.json")
    (tmp_path / "node-bench-20261231T000000Z.json").write_text('{"schema": "qmemo-node-bench/0"}')
    benches = load_py_benches(results_root=tmp_path)
    assert benches.core is not None and benches.node is None
    body = python_benches_section(benches).body
    assert "Passed over" in body and "node-bench-20261231T000000Z.json" in body and "re-run `qmemo bench node`" in body


def test_without_bench_results_the_section_names_the_commands():
    body = python_benches_section(PyBenches()).body
    assert "run `.venv/bin/qmemo bench core`" in body and "run `.venv/bin/qmemo bench node`" in body


def test_report_without_results_is_one_clear_error(tmp_path):
    done = run_command([str(VENV_BIN / "qmemo"), "report", "--results", str(tmp_path), "--out", str(tmp_path / "o")])
    assert done.returncode == 1
    assert "no C baseline" in done.stderr and "Traceback" not in done.stderr


def test_headroom_command_prints_the_scenario_from_results(summary):
    done = run_command([str(VENV_BIN / "qmemo"), "headroom", "--results", str(FIXTURE), "--tps", "10000",
                        "--shards", "4", "--cross-shard", "20"])
    assert done.returncode == 0, done.stderr
    median = summary["single_core_verify"]["Falcon-512"]["ops_per_s"]
    assert f"{median:,.0f}" in done.stdout and x(median / 3000) in done.stdout


def test_headroom_command_refuses_cross_shard_traffic_on_one_shard():
    done = run_command([str(VENV_BIN / "qmemo"), "headroom", "--verify-rate", "1000", "--shards", "1",
                        "--cross-shard", "0.2"])
    assert done.returncode == 1 and "single shard" in done.stderr


def test_devnet_reader_reads_the_generators_summary_and_its_verdict():
    data = json.loads((DEVNET / "summary.json").read_text())
    run = load_devnet_run(DEVNET)
    assert (run.run_id, run.target_tps, run.committed_tps) == ("devnet-run", data["target_tps"], data["committed_tps"])
    assert run.counts["rejected"] == data["counts"]["rejected_total"]
    assert run.latency_ms["intended_to_committed"]["p99_9"] == \
        data["latency_ms"]["intended_to_committed"]["percentiles_ms"]["p99.9"]
    assert run.saturated is data["throughput_saturated"]     # the writer's verdict, not re-derived
    assert run.latency_saturated is data["latency_saturated"]


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(schema="qmemo-load-summary/2"),        # the old format: one verdict for three reasons
    lambda d: d.pop("throughput_saturated"),
    lambda d: d.update(tps={"target": 10}),                   # a second spelling is not accepted
    lambda d: d["counts"].update(committed="7"),
])
def test_devnet_reader_refuses_a_summary_that_is_not_the_generators(tmp_path, mutate):
    data = json.loads((DEVNET / "summary.json").read_text())
    mutate(data)
    (tmp_path / "summary.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError):
        load_devnet_run(tmp_path)


def test_a_generator_sweep_folder_is_a_devnet_run():
    """`qmemo gen --sweep` writes sweep.json and one folder per stage (a recorded real sweep)."""
    folder = SWEEP
    run = load_devnet_run(folder)
    rows = json.loads((folder / "sweep.json").read_text())["rows"]
    assert run.run_id == "devnet-sweep"
    assert [p.target_tps for p in run.sweep] == sorted(r["target_tps"] for r in rows)
    limited = ("throughput_saturated", "latency_saturated", "generator_fell_behind")
    best = max((r for r in rows if not any(r[k] for k in limited)), key=lambda r: r["committed_tps"])
    assert run.committed_tps == pytest.approx(best["committed_tps"])
    assert run.sweep[-1].p99_ms == pytest.approx(rows[-1]["p99_ms"])


@pytest.mark.parametrize("generator_folder", [DEVNET, SWEEP])
def test_a_devnet_sh_run_folder_is_read_through_its_gen_folder(tmp_path, generator_folder):
    """devnet.sh prints runs/<id>/; the generator wrote into runs/<id>/gen/."""
    run_folder = tmp_path / "20261123-161100-4242"
    shutil.copytree(generator_folder, run_folder / "gen")
    (run_folder / "logs").mkdir()
    run = load_devnet_run(run_folder)
    direct = load_devnet_run(generator_folder)
    assert run.run_id == run_folder.name
    assert (run.committed_tps, run.sweep) == (direct.committed_tps, direct.sweep)
    assert run.source.is_relative_to(run_folder / "gen")


def test_a_devnet_sh_run_folder_without_load_is_one_line_naming_gen(tmp_path):
    (tmp_path / "logs").mkdir()
    with pytest.raises(ConfigError, match="gen/") as caught:
        load_devnet_run(tmp_path)
    assert "\n" not in str(caught.value)


def test_an_old_run_folder_is_refused_in_one_line_naming_its_version(tmp_path):
    data = json.loads((DEVNET / "summary.json").read_text())
    data["schema"] = "qmemo-load-summary/2"
    (tmp_path / "summary.json").write_text(json.dumps(data))
    done = run_command([str(VENV_BIN / "qmemo"), "report", "--results", str(FIXTURE), "--devnet", str(tmp_path),
                        "--out", str(tmp_path / "o")])
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "qmemo-load-summary/2" in done.stderr and "re-run" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("damage", ['{"schema": "qmemo-c-validate/0"}', "not json"])
def test_a_damaged_validate_json_costs_only_its_method_sentence(tmp_path, damage):
    """validate.json is read only for its method sentence: the report goes on without it
    and says why (its figures come from summary.json)."""
    import shutil

    from qmemo.analysis.report_c import _validation
    from qmemo.analysis.results import load_results

    folder = tmp_path / "run"
    shutil.copytree(FIXTURE, folder)
    (folder / "validate.json").write_text(damage)
    text = "\n\n".join(_validation(load_results(folder)))
    assert "Method: not shown:" in text and "validate.json could not be read" in text
    assert "Known-answer tests:" in text
