"""Topologies: local sufficiency at every edge and end-to-end sufficiency at the final
consequential receiver, in one run (the essay: "Sufficiency at one hop is not
automatically transitive… Test both").

A :class:`Topology` is a chain of :class:`Edge` s, A → B → … → Z, and the
:class:`EndToEnd` reference of the final receiver. Each edge names its contract and
receiver; the first edge its encoder from the case evidence (what the first agent
holds), and every later edge what it *carries* from the message its sender received
(``carries``: this edge's decision field ← a field of the previous edge's contract),
so a later hop can only pass on what it was given. :func:`run_topology` runs, over the
same cases:

* one local experiment per edge: the edge's messages against the edge contract's
  policy on what the sending hop holds (its own full evidence), with the edge's
  tolerances;
* the end-to-end experiment: the final edge's messages against the final receiver's
  full-evidence decision (:attr:`EndToEnd.contract`'s policy on
  :attr:`EndToEnd.state_of` of the case), with the end-to-end tolerances.

Every run is an ordinary lab experiment (perturbations, minimal messages, gate), and
the topology report (``handoffs-lab-topology/1``) sets their figures side by side, one
row per edge and one end-to-end row; its gate passes only when every row's does. The
minimal-message advice of an edge accounts for every downstream consumer: a field a
later hop's policy (or the final receiver's full-evidence policy) reads is never
reported as unnecessary.

Bad input is refused when the topology is built, naming the place: a cycle
(``topology-cycle``), edges that do not join (``topology-broken``), an edge that
carries a member its hop never received (``topology-unreceived``), a field its
contract does not have or leaves unfilled (``topology-carries``), and an end-to-end
reference whose actions are not the final receiver's (``topology-actions``).
"""

from __future__ import annotations

import html
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from handoffs._errors import ExperimentError
from handoffs.contracts import Contract, GovernanceService, ReceiptEncoder
from handoffs.lab._experiment import Experiment, Strategy, Tolerances, default_state_of
from handoffs.lab._sources import CaseSource
from handoffs.receivers import Receiver

__all__ = [
    "TOPOLOGY_FORMAT",
    "Edge",
    "EndToEnd",
    "Topology",
    "TopologyRun",
    "is_topology_file",
    "load_topology",
    "render_topology_html",
    "render_topology_markdown",
    "run_topology",
]

TOPOLOGY_FORMAT: Final = "handoffs-lab-topology/1"
"""The ``format`` member of a topology report."""

_END: Final = "end-to-end"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text.replace("->", "_to_")).strip("_") or "edge"


@attrs.frozen
class _Held:
    """What the sending hop of an edge holds: the previous edge's decision state, as
    that edge's encoder wrote it, mapped by ``carries`` (picklable, for process runs).
    """

    upstream: Any  # the previous edge's encoder
    contract: Contract[Any, Any]
    carries: tuple[tuple[str, str], ...]

    def __call__(self, evidence: Any) -> Any:
        received = self.upstream.encode(evidence)["decision_state"]
        wire = {field: received[source] for field, source in self.carries}
        return self.contract.load_state(wire)


@attrs.frozen
class _FullReference:
    """The final receiver's full-evidence decision on a case."""

    contract: Contract[Any, Any]
    state_of: Callable[[Any], Any]

    def __call__(self, evidence: Any) -> str:
        return str(self.contract.decide(self.state_of(evidence)).value)


@attrs.frozen(kw_only=True)
class Edge:
    """One edge of a topology: ``sender`` hands a message to ``to``.

    Attributes:
        sender: the agent that sends (e.g. ``"inspector"``).
        to: the agent that receives and decides.
        contract: the edge's contract (what the message carries and the receiver's
            policy on it).
        receiver: the receiving agent's frozen receiver.
        governance: stamps the edge's governance members.
        encoder: the first edge only: writes the message from the case evidence.
        state_of: the first edge only: evidence → what the sender holds, in the edge
            contract's state (the local reference; default: the evidence's ``state``).
        carries: later edges only: this contract's decision field → the field of the
            previous edge's contract it is filled from (default: the same names).
        tolerances: the edge's local release thresholds.
        name: the edge's name in the report (default ``"<sender>-><to>"``).
    """

    sender: str
    to: str
    contract: Contract[Any, Any]
    receiver: Receiver
    governance: GovernanceService
    encoder: Any = None
    state_of: Callable[[Any], Any] | None = None
    carries: Mapping[str, str] | None = None
    tolerances: Tolerances = attrs.field(factory=Tolerances)
    name: str = ""

    @property
    def label(self) -> str:
        """The edge's name in the report."""
        return self.name or f"{self.sender}->{self.to}"


@attrs.frozen(kw_only=True)
class EndToEnd:
    """The final consequential receiver's full-evidence reference.

    Attributes:
        contract: the final receiver's contract on the *whole* evidence (its policy is
            the end-to-end reference; its actions are the final edge's).
        state_of: evidence → that contract's decision state.
        tolerances: the end-to-end release thresholds.
    """

    contract: Contract[Any, Any]
    state_of: Callable[[Any], Any] = default_state_of
    tolerances: Tolerances = attrs.field(factory=Tolerances)


def _edge_tuple(value: Sequence[Edge]) -> tuple[Edge, ...]:
    return tuple(value)


def _fail(message: str, code: str, path: str) -> ExperimentError:
    return ExperimentError(message, code=code, json_path=path)


@attrs.frozen(kw_only=True)
class Topology:
    """A chain of edges and the final receiver's end-to-end reference (see the module
    docs). Checked when built.

    Attributes:
        name: the topology's name (each run is named after it and its edge).
        cases: the case source, shared by every run.
        edges: the edges, first sender first.
        end_to_end: the final receiver's full-evidence reference.
        perturbations: the perturbations of every run (``None``: each contract's
            standard set).
        description: prose for the report.
    """

    name: str
    cases: CaseSource
    edges: tuple[Edge, ...] = attrs.field(converter=_edge_tuple)
    end_to_end: EndToEnd
    perturbations: tuple[Any, ...] | None = None
    description: str = ""

    def __attrs_post_init__(self) -> None:
        if not self.edges:
            raise _fail("a topology needs at least one edge", "topology-broken", "$.edges")
        seen = {self.edges[0].sender: "$.edges[0].sender"}
        for index, edge in enumerate(self.edges):
            at = f"$.edges[{index}]"
            if not isinstance(edge, Edge):
                raise _fail(f"an edge is an Edge, got {type(edge).__name__}",
                            "topology-broken", at)
            if not isinstance(edge.contract, Contract):
                raise _fail(f"edge {edge.label!r}: contract must be a Contract, got "
                            f"{type(edge.contract).__name__}", "topology-broken",
                            f"{at}.contract")
            if not isinstance(edge.receiver, Receiver):
                raise _fail(f"edge {edge.label!r}: the receiver does not implement the "
                            "Receiver protocol", "topology-broken", f"{at}.receiver")
            if index and edge.sender != self.edges[index - 1].to:
                raise _fail(f"edge {edge.label!r} starts at {edge.sender!r}, but the edge "
                            f"before it ends at {self.edges[index - 1].to!r}",
                            "topology-broken", f"{at}.sender")
            if edge.to in seen:
                raise _fail(f"edge {edge.label!r} returns to {edge.to!r} (first at "
                            f"{seen[edge.to]}): a topology is a chain, not a cycle",
                            "topology-cycle", f"{at}.to")
            seen[edge.to] = f"{at}.to"
            if index == 0:
                if edge.encoder is None:
                    raise _fail("the first edge needs an encoder from the case evidence",
                                "topology-broken", f"{at}.encoder")
                if edge.carries is not None:
                    raise _fail("the first edge carries from the evidence: give it an "
                                "encoder and state_of, not carries", "topology-carries",
                                f"{at}.carries")
            else:
                _check_carries(edge, self.edges[index - 1], at)
        final = self.edges[-1].contract
        theirs = {a.value for a in self.end_to_end.contract.actions}
        ours = {a.value for a in final.actions}
        if theirs != ours:
            raise _fail(f"the end-to-end contract {self.end_to_end.contract.id} decides "
                        f"{sorted(theirs)}, the final receiver {sorted(ours)}",
                        "topology-actions", "$.end_to_end.contract")

    def carried(self, index: int) -> tuple[tuple[str, str], ...]:
        """Edge ``index``'s (field, source field) pairs (empty for the first edge)."""
        if index == 0:
            return ()
        edge = self.edges[index]
        mapping = edge.carries if edge.carries is not None else {
            f: f for f in edge.contract.field_map}
        return tuple(sorted(mapping.items()))

    def encoders(self) -> list[Any]:
        """Each edge's encoder: the first edge's own, later ones from what their hop
        holds.
        """
        out: list[Any] = [self.edges[0].encoder]
        for index in range(1, len(self.edges)):
            edge = self.edges[index]
            out.append(ReceiptEncoder(contract=edge.contract, state_of=self.holds(index, out),
                                      name=_slug(edge.label)))
        return out

    def holds(self, index: int, encoders: Sequence[Any]) -> Callable[[Any], Any]:
        """Evidence → what edge ``index``'s sender holds, in the edge's contract state."""
        edge = self.edges[index]
        if index == 0:
            return edge.state_of or default_state_of
        return _Held(encoders[index - 1], edge.contract, self.carried(index))

    def downstream_reads(self) -> list[dict[str, list[str]]]:
        """Per edge: field → the downstream consumers whose policy reads it (a later
        edge's contract through what it carries, or the end-to-end reference by name).
        """
        needed: list[dict[str, list[str]]] = [{} for _ in self.edges]
        final_reads = self.end_to_end.contract.policy.reads()
        for index, edge in enumerate(self.edges):
            for name in edge.contract.field_map:
                if name in final_reads and index < len(self.edges) - 1:
                    needed[index].setdefault(name, []).append(
                        f"{_END} ({self.end_to_end.contract.id})")
        # A later edge's reads, traced back through what each edge carries.
        for later in range(1, len(self.edges)):
            reads = set(self.edges[later].contract.policy.reads())
            for index in range(later - 1, -1, -1):
                reads = {source for field, source in self.carried(index + 1) if field in reads}
                for name in sorted(reads):
                    consumer = f"{self.edges[later].label} ({self.edges[later].contract.id})"
                    if consumer not in needed[index].setdefault(name, []):
                        needed[index][name].append(consumer)
        return needed


def _check_carries(edge: Edge, previous: Edge, at: str) -> None:
    if edge.encoder is not None:
        raise _fail(f"edge {edge.label!r} is not the first: it carries what its hop "
                    "received (carries), it has no encoder from the evidence",
                    "topology-carries", f"{at}.encoder")
    fields = edge.contract.field_map
    received = previous.contract.field_map
    mapping = edge.carries if edge.carries is not None else {f: f for f in fields}
    for field, source in mapping.items():
        if field not in fields:
            raise _fail(f"edge {edge.label!r} carries {field!r}, which {edge.contract.id} "
                        f"has no field for; fields: {sorted(fields)}", "topology-carries",
                        f"{at}.carries.{field}")
        if source not in received:
            raise _fail(f"edge {edge.label!r} fills {field!r} from {source!r}, which "
                        f"{edge.sender!r} never received: {previous.label!r} "
                        f"({previous.contract.id}) carries {sorted(received)}",
                        "topology-unreceived",
                        f"{at}.carries.{field}" if edge.carries is not None
                        else f"{at}.contract")
    missing = sorted(set(fields) - set(mapping))
    if missing:
        raise _fail(f"edge {edge.label!r} leaves {missing} of {edge.contract.id} unfilled",
                    "topology-carries", f"{at}.carries")


@attrs.frozen
class TopologyRun:
    """A topology's outcome.

    Attributes:
        report: the topology report (``handoffs-lab-topology/1``): ``rows`` (one per
            edge, then the end-to-end row: agreement, mean regret, hard violations,
            the row's gate), ``needed_downstream``, ``gate`` and every run's lab
            report under ``reports``.
    """

    report: dict[str, Any]

    @property
    def exit_code(self) -> int:
        """0 when every row's gate passes, 1 otherwise."""
        return int(self.report["gate"]["exit_code"])

    def markdown(self) -> str:
        """The rows side by side, as Markdown."""
        return render_topology_markdown(self.report)

    def html(self) -> str:
        """The rows side by side, as one HTML page."""
        return render_topology_html(self.report)


def _experiments(topology: Topology) -> list[tuple[str, str, Experiment]]:
    """(row label, reference text, experiment) per edge, then the end-to-end one."""
    encoders = topology.encoders()
    out: list[tuple[str, str, Experiment]] = []
    for index, edge in enumerate(topology.edges):
        strategy = Strategy(name=_slug(edge.label), encoder=encoders[index],
                            receiver=edge.receiver, gated=True)
        out.append((edge.label, f"local: {edge.contract.id} on what {edge.sender} holds",
                    Experiment(name=f"{topology.name}-{_slug(edge.label)}",
                               contract=edge.contract, cases=topology.cases,
                               strategies=(strategy,), governance=edge.governance,
                               state_of=topology.holds(index, encoders),
                               perturbations=topology.perturbations,
                               tolerances=edge.tolerances,
                               description=f"Edge {edge.label} of {topology.name}.")))
    final, last = topology.edges[-1], out[-1][2]
    e2e = topology.end_to_end
    out.append((_END, f"full evidence: {e2e.contract.id}, {final.to}'s decision",
                attrs.evolve(last, name=f"{topology.name}-end-to-end",
                             reference=_FullReference(e2e.contract, e2e.state_of),
                             tolerances=e2e.tolerances,
                             description=f"{final.label}'s messages against "
                                         f"{final.to}'s full-evidence decision.")))
    return out


def _advice(report: dict[str, Any], needed: Mapping[str, list[str]]) -> None:
    """Never call a field unnecessary that a downstream consumer reads (in place, on
    the values the report schema already has).
    """
    if not needed:
        return
    minimal = report["minimal_messages"]
    minimal["fields_never_needed"] = [f for f in minimal["fields_never_needed"]
                                      if f not in needed]
    warnings = []
    for warning in report["gate"]["warnings"]:
        text = warning
        found = re.match(r"removing (\S+) changes no decision", warning)
        if found and found.group(1) in needed:
            field = found.group(1)
            text = (f"removing {field} changes no decision of this edge's receiver, but "
                    f"{', '.join(needed[field])} reads it downstream: keep it")
        elif warning.startswith("no minimal sufficient message needs"):
            never = minimal["fields_never_needed"]
            if not never:
                continue
            text = f"no minimal sufficient message needs {', '.join(never)}"
        warnings.append(text)
    report["gate"]["warnings"] = warnings


def run_topology(topology: Topology, **options: Any) -> TopologyRun:
    """Run every edge's local experiment and the end-to-end experiment, over the same
    cases, and set their figures side by side (``options`` go to
    :func:`handoffs.lab.run`).
    """
    from handoffs.lab._runner import run

    needed = topology.downstream_reads()
    rows: list[dict[str, Any]] = []
    reports: dict[str, Any] = {}
    for position, (label, reference, experiment) in enumerate(_experiments(topology)):
        report = dict(run(experiment, **options).report)
        if position < len(topology.edges):
            _advice(report, needed[position])
        row = next(r for r in report["results"] if r["perturbation"] == "none")
        gate = report["gate"]
        rows.append({
            "scope": _END if label == _END else "edge",
            "edge": label if label != _END else topology.edges[-1].label,
            "reference": reference,
            "agreement": row["agreement"],
            "mean_regret": row["mean_regret"],
            "hard_violations": row["hard_violations"],
            "decisions": row["decisions"],
            "gate": {"passed": gate["passed"], "reasons": list(gate["reasons"])},
        })
        reports[label] = report
    failed = [f"{row['scope']} {row['edge']}: {reason}" for row in rows
              for reason in row["gate"]["reasons"]]
    document = {
        "format": TOPOLOGY_FORMAT,
        "name": topology.name,
        "description": topology.description,
        "edges": [{"name": e.label, "from": e.sender, "to": e.to, "contract": e.contract.id,
                   "carries": dict(topology.carried(i)) or None}
                  for i, e in enumerate(topology.edges)],
        "end_to_end": {"contract": topology.end_to_end.contract.id,
                       "receiver": topology.edges[-1].to},
        "rows": rows,
        "needed_downstream": {e.label: needed[i] for i, e in enumerate(topology.edges)
                              if needed[i]},
        "gate": {"passed": not failed, "exit_code": 0 if not failed else 1,
                 "reasons": failed},
        "reports": reports,
    }
    return TopologyRun(report=document)


# ------------------------------------------------------------------- renderings


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


_COLUMNS: Final = ("scope", "edge", "reference", "agreement", "mean regret",
                   "hard violations", "gate")


def _cells(row: Mapping[str, Any]) -> list[str]:
    return [row["scope"], row["edge"], row["reference"], _fmt(row["agreement"]),
            _fmt(row["mean_regret"]), str(row["hard_violations"]),
            "PASS" if row["gate"]["passed"] else "FAIL"]


def render_topology_markdown(report: Mapping[str, Any]) -> str:
    """The topology report as Markdown: the verdict, then every edge's local row and
    the end-to-end row side by side, the gate's reasons and the downstream needs.
    """
    verdict = "PASS" if report["gate"]["passed"] else "FAIL"
    lines = [f"### handoffs lab topology: {report['name']}: **{verdict}** "
             f"(gate exit {report['gate']['exit_code']})", ""]
    lines += ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |"
              for r in report["rows"]]
    lines.append("")
    lines += [f"- {reason}" for reason in report["gate"]["reasons"]]
    for edge, fields in report["needed_downstream"].items():
        lines.append(f"- {edge}: needed downstream: " + "; ".join(
            f"{field} (read by {', '.join(by)})" for field, by in fields.items()))
    return "\n".join(lines).rstrip() + "\n"


def render_topology_html(report: Mapping[str, Any]) -> str:
    """The topology report as one self-contained HTML page (the same table)."""
    esc = html.escape
    verdict = "PASS" if report["gate"]["passed"] else "FAIL"
    head = "".join(f"<th>{esc(c)}</th>" for c in _COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in _cells(r)) + "</tr>"
                   for r in report["rows"])
    reasons = "".join(f"<li>{esc(r)}</li>" for r in report["gate"]["reasons"])
    needs = "".join(
        f"<li>{esc(edge)}: needed downstream: " + esc("; ".join(
            f"{field} (read by {', '.join(by)})" for field, by in fields.items())) + "</li>"
        for edge, fields in report["needed_downstream"].items())
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>handoffs lab topology: {esc(report['name'])}</title></head><body>"
            f"<h1>{esc(report['name'])}: <strong>{verdict}</strong> (gate exit "
            f"{report['gate']['exit_code']})</h1><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table><ul>{reasons}{needs}</ul></body></html>\n")


# ------------------------------------------------------------------------- TOML


def _edge_from_toml(table: Mapping[str, Any], index: int, file: Path) -> Edge:
    """One ``[[edge]]`` table."""
    from handoffs._errors import refuse_unknown
    from handoffs.lab._toml import _build, _callable_ref, resolve

    at = f"edge[{index}]"
    refuse_unknown(table, _EDGE_KEYS, path=at, noun="edge key")
    for required in ("from", "to", "contract", "receiver", "governance"):
        if required not in table:
            raise _fail(f"{file}: {at} needs {required}", "topology-broken",
                        f"$.{at}.{required}")
    what = f"{at} ({table['from']}->{table['to']})"
    options: dict[str, Any] = {}
    if "encoder" in table:
        options["encoder"] = _build(table, "encoder", what=f"{what} encoder")
    if "state" in table:
        options["state_of"] = _callable_ref(table["state"], what=f"{what} state")
    if "carries" in table:
        options["carries"] = dict(table["carries"])
    if "tolerances" in table:
        options["tolerances"] = Tolerances.from_json(table["tolerances"])
    return Edge(sender=table["from"], to=table["to"],
                contract=resolve(table["contract"], what=f"{what} contract"),
                receiver=_build(table, "receiver", what=f"{what} receiver"),
                governance=_build(table, "governance", what=f"{what} governance"),
                name=table.get("name", ""), **options)


def _end_from_toml(table: Mapping[str, Any], file: Path) -> EndToEnd:
    """The ``[end_to_end]`` table."""
    from handoffs._errors import refuse_unknown
    from handoffs.lab._toml import _callable_ref, resolve

    refuse_unknown(table, ("contract", "state", "tolerances"), path="end_to_end",
                   noun="end_to_end key")
    if "contract" not in table:
        raise _fail(f"{file}: [end_to_end] needs the final receiver's full-evidence "
                    "contract", "topology-broken", "$.end_to_end.contract")
    options: dict[str, Any] = {}
    if "state" in table:
        options["state_of"] = _callable_ref(table["state"], what="end_to_end state")
    if "tolerances" in table:
        options["tolerances"] = Tolerances.from_json(table["tolerances"])
    return EndToEnd(contract=resolve(table["contract"], what="end_to_end contract"),
                    **options)


_TOP_KEYS: Final = frozenset({"topology", "cases", "edge", "end_to_end", "perturbations"})
_EDGE_KEYS: Final = frozenset({"name", "from", "to", "contract", "encoder", "encoder_args",
                               "receiver", "receiver_args", "governance", "governance_args",
                               "state", "carries", "tolerances"})


def is_topology_file(path: Path | str) -> bool:
    """Whether an experiment file declares a topology (``[[edge]]`` tables)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return "edge" in data


def load_topology(path: Path | str) -> Topology:
    """Read a topology declared in TOML.

    Layout::

        [topology]        # name, description
        [cases]           # as in an experiment file
        [[edge]]          # from, to, contract, receiver, governance; the first edge:
                          # encoder (+ encoder_args), state; later edges: carries
        [edge.tolerances]
        [end_to_end]      # contract, state, [end_to_end.tolerances]
        [perturbations]   # standard = false: no perturbations (default: each
                          # contract's standard set)

    Raises:
        ExperimentError: unknown keys, unresolvable imports, or a topology that is not
            a chain (with the place: ``$.edge[1].carries.seal``).
    """
    from handoffs._errors import refuse_unknown
    from handoffs.lab._imports import ensure_importable
    from handoffs.lab._toml import _cases_from_toml

    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"{file}: invalid TOML: {exc}", code="invalid-toml") from exc
    ensure_importable(file)
    refuse_unknown(data, _TOP_KEYS, path="", noun="table")
    head = dict(data.get("topology", {}))
    refuse_unknown(head, ("name", "description"), path="topology", noun="topology key")
    tables = data.get("edge")
    if not isinstance(tables, list) or not tables:
        raise _fail(f"{file}: a topology needs [[edge]] tables", "topology-broken", "$.edge")
    edges = [_edge_from_toml(table, index, file) for index, table in enumerate(tables)]
    e2e = _end_from_toml(dict(data.get("end_to_end", {})), file)
    perturbations: tuple[Any, ...] | None = None
    if "perturbations" in data:
        chosen = dict(data["perturbations"])
        refuse_unknown(chosen, ("standard",), path="perturbations")
        if chosen.get("standard", True) is False:
            perturbations = ()
    try:
        return Topology(name=head.get("name", file.stem), description=head.get(
            "description", ""), cases=_cases_from_toml(
                data.get("cases", {}), edges[0].contract, base_dir=file.parent),
            edges=tuple(edges), end_to_end=e2e, perturbations=perturbations)
    except ExperimentError as exc:
        where = exc.json_path.replace("$.edges[", "$.edge[")
        raise ExperimentError(f"{file}: {exc.message}", code=exc.code,
                              json_path=where) from None
