"""The lab's plan: what every worker needs to run chunks of an experiment.

:func:`compile_plan` prepares the perturbations and resolves which strategies each
applies to; the result, :class:`Plan`, is picklable (process and Dask executors get a
copy with every chunk). Also here: what a worker compiles once per contract and keeps
(the schema checks, the reference policy, the per-state analysis of triggers and
minimal messages), the deterministic receipt ids, and the run's fingerprint.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs
import jsonschema_rs

from handoffs._errors import ExperimentError, UntrustedGovernance
from handoffs._json import canonical_bytes, canonical_bytes_plain, digest, jcs_plain
from handoffs._members import ENVELOPE_MEMBERS, GOVERNANCE_FIELDS
from handoffs.contracts import Contract
from handoffs.lab._experiment import Experiment, Strategy
from handoffs.lab._minimal import (
    Reference,
    counterfactual_triggers,
    minimal_message,
)
from handoffs.lab._values import wire_value
from handoffs.lab.perturbations import Falsehood, Perturbation
from handoffs.lab.perturbations._base import SUBJECT
from handoffs.lab.perturbations._falsehood import Mutate
from handoffs.receivers import Receiver

__all__ = ["Plan", "analyse_state", "compile_plan", "fingerprint", "receipt_id"]


_ENVELOPE: Final = frozenset(ENVELOPE_MEMBERS)


_FORBIDDEN: Final = frozenset(GOVERNANCE_FIELDS) | _ENVELOPE


_RECEIPT_NAMESPACE: Final = uuid.UUID("6f1d3c1e-5d0b-4d4e-9d27-6c2f0f6b8a10")


_ANALYSIS_CACHE_LIMIT: Final = 4096


@attrs.frozen(kw_only=True)
class Plan:
    """Everything a worker needs for a chunk (picklable for process executors).

    Attributes:
        name: experiment name (used in deterministic receipt ids).
        contract: the contract.
        strategies: the strategies, in order.
        perturbations: prepared perturbations; index 0 of the log is ``none``.
        targets: per perturbation, the indices of the strategies it applies to.
        semantic: the semantic receiver.
        governance: the governance service.
        state_of / reference / case_id_of / evidence_refs_of / case_json: readers.
        tokenizer: optional token counter.
        epochs: repetitions for sampled receivers.
        subject: index of the subject strategy.
        region_budget: region checks allowed per state for the minimum-size search.
        analyse: whether to compute triggers and minimal messages.
        keep_rows: whether chunk records keep every decision row (a run log is
            written), or only those the metrics read one by one.
        special: perturbation indices whose rows the metrics read one by one
            (falsehoods and injections).
        injection_cases: case ids named by injections (their baseline rows are read).
        token: identifies one run's plan, so that a worker process that receives it
            with every chunk keeps using the first copy (and what it compiled for it).
        concurrency: calls in flight at once for slow receivers (model receivers).
        prefetch: whether a chunk first collects its slow receivers' distinct messages
            and hands them to a pool of ``concurrency`` threads, so that their calls
            overlap across cases instead of following one another.
        projection: whether memo keys may rest on users' ``reads`` declarations
            (:attr:`~handoffs.receivers.FunctionReceiver.reads`), checked on a sample
            of memo hits (:class:`~handoffs.errors.ProjectionError`); by default
            such receivers are memoised on the whole canonical message.
    """

    name: str
    contract: Contract[Any, Any]
    strategies: tuple[Strategy, ...]
    perturbations: tuple[Perturbation, ...]
    targets: tuple[tuple[int, ...], ...]
    semantic: Receiver
    governance: Any
    state_of: Callable[[Any], Any]
    reference: Callable[[Any], Any] | None
    case_id_of: Callable[[Any], str]
    evidence_refs_of: Callable[[Any], Sequence[Any]]
    case_json: Callable[[Any], Any]
    tokenizer: Callable[[str], int] | None
    epochs: int
    subject: int
    region_budget: int = 4096
    analyse: bool = True
    keep_rows: bool = True
    special: frozenset[int] = frozenset()
    injection_cases: frozenset[str] = frozenset()
    token: str = ""
    concurrency: int = 8
    prefetch: bool = False
    projection: bool = False

    @property
    def perturbation_ids(self) -> tuple[str, ...]:
        """``("none", <perturbation ids>...)``: the log's perturbation index."""
        return ("none", *(p.id for p in self.perturbations))


def compile_plan(experiment: Experiment) -> Plan:
    """Prepare the perturbations and resolve which strategies each applies to.

    Raises:
        ExperimentError: duplicate perturbation ids, unknown strategy names, a
            gate perturbation the experiment does not run, or a perturbation that
            cannot be prepared for the contract.
    """
    from handoffs.lab.perturbations import standard_perturbations

    contract = experiment.contract
    declared = experiment.perturbations
    if declared is None:
        declared = standard_perturbations(contract)
    pool = [*declared, *experiment.injections]
    prepared = [p.prepare(contract, seed=experiment.seed) for p in pool]
    ids = [p.id for p in prepared]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates or "none" in ids:
        raise ExperimentError(f"perturbation ids must be unique and not 'none': "
                              f"{duplicates or ['none']}")
    unknown = [g for g in experiment.tolerances.gate_perturbations
               if g != "none" and g not in ids]
    if unknown:
        raise ExperimentError(f"gate_perturbations names perturbations the experiment does "
                              f"not run: {unknown}; it runs 'none' and {sorted(ids)}")
    names = [s.name for s in experiment.strategies]
    subject = names.index(experiment.subject_strategy.name)
    targets: list[tuple[int, ...]] = []
    for p in prepared:
        applies = p.applies_to
        if applies is None:
            targets.append(tuple(range(len(names))))
            continue
        indices: list[int] = []
        for name in applies:
            if name == SUBJECT:
                indices.append(subject)
            elif name in names:
                indices.append(names.index(name))
            else:
                raise ExperimentError(f"perturbation {p.id} names unknown strategy {name!r}")
        targets.append(tuple(sorted(set(indices))))
    return Plan(
        name=experiment.name,
        contract=contract,
        strategies=experiment.strategies,
        perturbations=tuple(prepared),
        targets=tuple(targets),
        semantic=experiment.semantic,
        governance=experiment.governance,
        state_of=experiment.state_of,
        reference=experiment.reference,
        case_id_of=experiment.case_id_of,
        evidence_refs_of=experiment.evidence_refs_of,
        case_json=experiment.case_json,
        tokenizer=experiment.tokenizer,
        epochs=experiment.epochs,
        subject=subject,
        special=frozenset(i for i, p in enumerate(prepared, start=1)
                          if isinstance(p, Mutate | Falsehood)),
        injection_cases=frozenset(p.case_id for p in prepared if isinstance(p, Falsehood)),
    )


class _Checks:
    """Compiled schema checks for one contract (jsonschema-rs, built once): the
    receipt schema, and its governance members alone.
    """

    def __init__(self, contract: Contract[Any, Any]) -> None:
        self.contract = contract
        schema = contract.json_schema()
        self.receipt = jsonschema_rs.validator_for(schema)
        properties = schema["properties"]
        governance = {
            "$schema": schema["$schema"],
            "type": "object",
            "required": list(GOVERNANCE_FIELDS),
            "properties": {m: properties[m] for m in GOVERNANCE_FIELDS},
        }
        self.governance = jsonschema_rs.validator_for(governance)

    def schema_valid(self, message: Mapping[str, Any]) -> bool:
        try:
            return bool(self.receipt.is_valid(message))
        except (ValueError, TypeError, OverflowError):
            return False

    def governance_valid(self, message: Mapping[str, Any]) -> bool:
        try:
            return bool(self.governance.is_valid(message))
        except (ValueError, TypeError, OverflowError):
            return False


_checks: dict[str, _Checks] = {}


_references: dict[str, Reference] = {}


_analysis: dict[tuple[str, str], tuple[Contract[Any, Any], dict[str, Any]]] = {}


def _checks_for(contract: Contract[Any, Any]) -> _Checks:
    found = _checks.get(contract.id)
    if found is None or found.contract is not contract:
        found = _checks[contract.id] = _Checks(contract)
    return found


def _reference_for(contract: Contract[Any, Any]) -> Reference:
    found = _references.get(contract.id)
    if found is None or found.contract is not contract:
        found = _references[contract.id] = Reference(contract)
    return found


def analyse_state(contract: Contract[Any, Any], key: str, truth: Mapping[str, Any],
                  *, budget: int) -> dict[str, Any]:
    """Triggers and the minimal message for one state (memoised per process)."""
    cache_key = (contract.id, key)
    found = _analysis.get(cache_key)
    # two contract objects may share an id (an expression and a predicate spelling of
    # one policy): the memo answers only for the object it was computed for
    if found is not None and found[0] is contract:
        return found[1]
    reference = _reference_for(contract)
    triggers = counterfactual_triggers(reference, truth)
    result: dict[str, Any] = {
        "truth": {name: wire_value(value) for name, value in truth.items()},
        "triggers": [t.to_json() for t in triggers],
    }
    if not reference.predicates:
        minimal = minimal_message(reference, truth, budget=budget)
        result["minimal"] = {
            "action": minimal.action,
            "fields": list(minimal.fields),
            "message": [f.to_json() for f in minimal.message],
            "guarantee": minimal.guarantee,
            "alternatives": minimal.alternatives,
            "region_checks": minimal.region_checks,
        }
    if len(_analysis) >= _ANALYSIS_CACHE_LIMIT:
        _analysis.clear()
    _analysis[cache_key] = (contract, result)
    return result


def _measure(message: Mapping[str, Any]) -> tuple[bytes, int]:
    """(memo key, payload bytes): canonical payload, envelope members apart."""
    envelope = [k for k in ENVELOPE_MEMBERS if k in message]
    if not envelope:
        body = canonical_bytes(message)
        return body, len(body)
    body = canonical_bytes({k: v for k, v in message.items() if k not in _ENVELOPE})
    head = canonical_bytes({k: message[k] for k in envelope})
    return head + b"\n" + body, len(body)


_SEEN_KEPT: Final = 4096


class Canonical:
    """:func:`_measure` for the messages of one chunk, with RFC 8785's fast path
    (:func:`~handoffs._json.jcs_plain`) decided per member value and remembered by
    identity: a chunk's perturbed messages share their members' values with the
    unperturbed ones, so each value is checked once. Each remembered value is held,
    so its id stays its own while the chunk runs. Same bytes as :func:`_measure`.
    """

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: dict[int, tuple[Any, bool]] = {}

    def plain(self, message: Mapping[str, Any]) -> bool:
        """Whether ``message`` takes the fast path (``jcs_plain(message)``)."""
        seen = self.seen
        for key, value in message.items():
            if type(key) is not str or not (key.isascii() or jcs_plain({key: None})):
                return False
            kind = type(value)
            if kind is str or kind is bool or value is None:
                continue
            if kind is dict or kind is list:
                found = seen.get(id(value))
                if found is None or found[0] is not value:
                    if len(seen) >= _SEEN_KEPT:
                        seen.clear()  # bounded memory; the values are checked again
                    found = seen[id(value)] = (value, jcs_plain(value))
                if not found[1]:
                    return False
            elif not jcs_plain(value):
                return False
        return True

    def measure(self, message: Mapping[str, Any]) -> tuple[bytes, int]:
        """``_measure(message)``."""
        if type(message) is not dict or not self.plain(message):
            return _measure(message)
        envelope = [k for k in ENVELOPE_MEMBERS if k in message]
        try:
            if not envelope:
                body = canonical_bytes_plain(message)
                return body, len(body)
            body = canonical_bytes_plain({k: v for k, v in message.items()
                                          if k not in _ENVELOPE})
            head = canonical_bytes_plain({k: message[k] for k in envelope})
        except UnicodeEncodeError:  # a lone surrogate: the reference path names it
            return _measure(message)
        return head + b"\n" + body, len(body)


_RECEIPT_NAMESPACE_BYTES: Final = _RECEIPT_NAMESPACE.bytes


def receipt_id(experiment: str, strategy: str, case_id: str) -> str:
    """The deterministic receipt id of one strategy's message for one case
    (``uuid.uuid5`` in the runner's namespace, computed without the ``UUID`` object).
    """
    name = f"{experiment}/{strategy}/{case_id}".encode()
    raw = bytearray(hashlib.sha1(_RECEIPT_NAMESPACE_BYTES + name).digest()[:16])  # noqa: S324
    raw[6] = (raw[6] & 0x0F) | 0x50  # version 5 (name-based, SHA-1), as RFC 4122 says
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    text = raw.hex()
    return f"urn:uuid:{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _tokens(plan: Plan, key: bytes, size: int) -> int | None:
    if plan.tokenizer is None:
        return None
    return int(plan.tokenizer(key[-size:].decode("utf-8")))


def _compose(plan: Plan, strategy: Strategy, content: Mapping[str, Any],
             stamp: Mapping[str, Any], case_id: str) -> dict[str, Any]:
    clash = _FORBIDDEN.intersection(content)
    if clash:
        first = sorted(clash)
        raise UntrustedGovernance(f"encoder {strategy.name} content may not set "
                                  f"{', '.join(first)}", json_path=f"$.{first[0]}")
    message: dict[str, Any] = {}
    if strategy.receipts:
        message["contract"] = plan.contract.id
        message["id"] = receipt_id(plan.name, strategy.name, case_id)
    message.update(content)
    message.update(stamp)
    return message


def _strategy_index(plan: Plan, name: str) -> int:
    for i, strategy in enumerate(plan.strategies):
        if strategy.name == name:
            return i
    raise ExperimentError(f"unknown strategy {name!r}")


def fingerprint(experiment: Experiment, plan: Plan, *, chunk_size: int) -> str:
    """Digest of everything that determines the decisions (not the tolerances)."""
    return digest({
        "experiment": experiment.name,
        "contract": plan.contract.describe(),
        "schema": plan.contract.schema_id,
        "strategies": [s.to_json() for s in plan.strategies],
        "perturbations": [p.to_json() for p in plan.perturbations],
        "targets": [list(t) for t in plan.targets],
        "cases": experiment.cases.description,
        "epochs": plan.epochs,
        "seed": experiment.seed,
        "chunk_size": chunk_size,
    })
