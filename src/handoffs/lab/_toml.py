"""The TOML form of an experiment: ``load_experiment`` and the ``module:attribute``
references it resolves (see ``docs/reference/experiment-toml.md``).

It sits above the experiment model and the perturbations, which it builds from their
JSON forms; neither imports it.
"""

from __future__ import annotations

import pkgutil
import tomllib
import types
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)

from handoffs._errors import ExperimentError, UnknownExperimentKey
from handoffs.contracts import Authority, Contract, Registry
from handoffs.lab._experiment import Experiment, Strategy, Tolerances, _attr_or_key
from handoffs.lab._imports import ensure_importable
from handoffs.lab._population import POPULATION_KEYS, population_from_toml
from handoffs.lab._sources import CaseSource, GeneratedCases, IterableCases, JSONLinesCases

if TYPE_CHECKING:
    from handoffs.lab.perturbations import Falsehood

__all__ = ["load_experiment", "model_from_toml", "resolve"]


# ----------------------------------------------------------------------- TOML form


def resolve(reference: str, *, what: str) -> Any:
    """Import ``"package.module:attribute.path"`` and return the attribute."""
    module_name, _, path = reference.partition(":") if isinstance(reference, str) else ("", "", "")
    if not module_name or not path:
        raise ExperimentError(f"{what} must be 'module:attribute', got {reference!r}")
    try:
        return pkgutil.resolve_name(reference)
    except AttributeError as exc:
        raise ExperimentError(f"{what}: {module_name} has no {path!r}") from exc
    except ImportError as exc:
        raise ExperimentError(f"{what}: cannot import {module_name!r}: {exc}") from exc
    except ValueError as exc:  # not a dotted name on either side of the colon
        raise ExperimentError(f"{what} must be 'module:attribute', got {reference!r}") from exc


def _build(table: Mapping[str, Any], key: str, *, what: str) -> Any:
    """Resolve ``table[key]`` and call it with ``table[key + '_args']`` when it is a
    class or a function (a factory); other objects are used as they are.
    """
    target = resolve(table[key], what=what)
    args = table.get(f"{key}_args", {})
    if not isinstance(args, Mapping):
        raise ExperimentError(f"{what}: {key}_args must be a table")
    if isinstance(target, type) or (callable(target) and hasattr(target, "__code__")):
        try:
            return target(**args)
        except TypeError as exc:
            raise ExperimentError(f"{what}: cannot build {table[key]}: {exc}") from exc
    if args:
        raise ExperimentError(f"{what}: {table[key]} is not callable but has arguments")
    return target


def _callable_ref(value: str, *, what: str) -> Callable[[Any], Any]:
    if ":" in value:
        fn = resolve(value, what=what)
        if not callable(fn):
            raise ExperimentError(f"{what}: {value} is not callable")
        return fn  # type: ignore[no-any-return]
    return _attr_or_key(value)


# The tables of an experiment file, structured by cattrs: a key no table declares is an
# UnknownExperimentKey naming its TOML path. TOML has no null, so ``None`` is "absent";
# values are checked where they are used, with messages that name them.

_TOML: Final = cattrs.Converter(forbid_extra_keys=True)
_NOUNS: dict[type, str] = {}


def _table(name: str, keys: Iterable[str], *, noun: str = "key", **tables: Any) -> Any:
    """An attrs class for one table: ``keys`` taken as they are, ``tables`` structured."""
    fields = {key: attrs.field(default=None) for key in keys}
    fields.update({key: attrs.field(default=None, type=kind) for key, kind in tables.items()})
    table = attrs.make_class(name, fields, frozen=True)
    _NOUNS[table] = noun
    return table


_EXPERIMENT_SCALARS: Final = ("name", "description", "subject", "epochs", "seed",
                              "minimal_method", "minimal_max_calls", "minimal_max_tokens",
                              "example_limit")
_Head: Final = _table("experiment", (*_EXPERIMENT_SCALARS, "contract", "factory",
                                     "factory_args", "assumptions"), noun="experiment key")
_CASES_KEYS: Final = {"jsonl": ("jsonl", "structure"),
                      "hypothesis": ("hypothesis", "seed", *POPULATION_KEYS),
                      "source": ("source", "source_args")}
_Cases: Final = _table("cases", (k for keys in _CASES_KEYS.values() for k in keys))
_EVIDENCE_KEYS: Final = (("state", "state_of"), ("case_id", "case_id_of"),
                         ("evidence_refs", "evidence_refs_of"), ("reference", "reference"))
_Evidence: Final = _table("evidence", (key for key, _ in _EVIDENCE_KEYS))
_Model: Final = _table("model", (
    "route", "name", "base_url", "base_url_env", "api_key_env", "template", "template_file",
    "system", "system_file", "temperature", "seed", "max_tokens", "response_format", "tools",
    "timeout", "max_retries", "backoff", "requests_per_minute", "tokens_per_minute",
    "max_concurrency", "gate", "gate_args", "required"), noun="model key")
# [strategy.model] is structured by model_from_toml, under its own path
_Strategy: Final = _table("strategy", ("name", "encoder", "encoder_args", "receiver",
                                       "receiver_args", "authority", "receipts", "gated",
                                       "model"), noun="strategy key")
_Injection: Final = _table("injection", ("case_id", "field", "value"))
# In the order the tables are read; [cases] is structured by _cases_from_toml (a
# topology's too), [tolerances] by Tolerances.from_json, [[injection]] item by item.
_Document: Final = _table(
    "document", ("cases", "tolerances", "injection"), noun="table",
    experiment=_Head, evidence=_Evidence, governance=_table("governance",
                                                            ("object", "object_args")),
    strategy=types.GenericAlias(list, (_Strategy,)), perturbations=_table("perturbations", (
        "standard", "include", "exclude", "extra")))


def _structure(data: Any, table: Any, *, path: str) -> Any:
    """``data`` as ``table``; the first unknown key (or a value that is not a table) is
    an error naming its TOML path (``strategy[0]``, ``injection[2]``).
    """
    try:
        return _TOML.structure(data, table)
    except Exception as exc:
        raise _first_error(exc, path) from None


def _first_error(exc: BaseException, path: str) -> ExperimentError:
    """The error a table's first fault reads as: a table's own unknown keys before those
    of the tables inside it, as a table's keys are read before its contents.
    """
    if isinstance(exc, ForbiddenExtraKeysError):
        known = (a.name for a in attrs.fields(exc.cl))
        return UnknownExperimentKey(sorted(exc.extra_fields)[0], table=path, known=known,
                                    noun=_NOUNS.get(exc.cl, "key"))
    if isinstance(exc, ClassValidationError | IterableValidationError):
        first = min(exc.exceptions, key=lambda e: not isinstance(e, ForbiddenExtraKeysError))
        for note in getattr(first, "__notes__", ()):
            if isinstance(note, AttributeValidationNote):
                path = f"{path}.{note.name}" if path else note.name
            elif isinstance(note, IterableValidationNote):
                path = f"{path}[{note.index}]"
        return _first_error(first, path)
    return ExperimentError(f"[{path}] must be a table, got {exc}",
                           json_path=f"$.{path}" if path else "$")


def load_experiment(path: Path | str, *,
                    registry: Registry | Contract[Any, Any] | Iterable[Contract[Any, Any]] = (),
                    ) -> Experiment:
    """Read an experiment declared in TOML.

    ``experiment.contract`` names the contract as ``module:attribute`` or as a
    ``name/version`` id looked up in ``registry`` (empty by default: no contract is
    known unless given).

    Layout (every import string is ``module:attribute``)::

        [experiment]            # name, contract, description, subject, epochs, seed,
                                # assumptions, factory (+ factory_args) to start from
        [cases]                 # source (+ source_args) | jsonl (+ structure) |
                                # hypothesis = <count>
        [evidence]              # state, case_id, evidence_refs, reference
        [governance]            # object (+ object_args)
        [[strategy]]            # name, encoder (+ encoder_args), receiver
                                # (+ receiver_args), authority, receipts, gated
        [strategy.model]        # instead of receiver: a model receiver (route,
                                # base_url / base_url_env, api_key_env, template_file,
                                # parameters; see model_from_toml)
        [tolerances]            # see Tolerances
        [perturbations]         # standard = true/false, include/exclude id patterns,
                                # [[perturbations.extra]] kind = ... (handoffs.lab.perturbations)
        [[injection]]           # case_id, field, value

    With ``experiment.factory`` the named Python factory builds the experiment and
    the other tables override parts of it.

    Raises:
        UnknownExperimentKey: a table has a key nothing reads (with the closest known
            key: "did you mean").
        ExperimentError: unresolvable imports, inconsistent values.
    """
    try:
        return _load(Path(path), registry=registry)
    except UnknownExperimentKey as exc:
        raise exc.in_file(path) from None


def _load(path: Path, *,
          registry: Registry | Contract[Any, Any] | Iterable[Contract[Any, Any]]) -> Experiment:
    """:func:`load_experiment`'s work."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"{path}: invalid TOML: {exc}", code="invalid-toml") from exc
    ensure_importable(path)  # a TOML inside a package may name that package's modules
    document = _structure(data, _Document, path="")
    base, contract, changes = _head_from_toml(document.experiment or _Head(), path=path,
                                              registry=Registry.coerce(registry))
    changes.update(_tables_from_toml(document, contract, base, path=path))
    try:
        if base is not None:
            return attrs.evolve(base, **changes)
        for required in ("name", "cases", "governance", "strategies"):
            if required not in changes:
                raise ExperimentError(f"{path}: {required} is required without a factory")
        return Experiment(**changes)
    except TypeError as exc:
        raise ExperimentError(f"{path}: {exc}") from exc


def _extra_perturbation(item: Mapping[str, Any], contract: Contract[Any, Any], index: int,
                        path: Path) -> Any:
    """One ``[[perturbations.extra]]``; an error names its place in the file."""
    from handoffs.lab.perturbations._registry import perturbation_from_json

    try:
        return perturbation_from_json(item, contract=contract)
    except ExperimentError as exc:
        raise ExperimentError(
            f"{path}: perturbations.extra[{index}]: {exc.message}", code=exc.code,
            json_path=f"$.perturbations.extra[{index}]{exc.json_path.removeprefix('$')}",
        ) from None


def _declared(table: Any) -> dict[str, Any]:
    """A structured table's declared keys (TOML has no null: ``None`` is absent)."""
    return {k: v for k, v in attrs.asdict(table, recurse=False).items() if v is not None}


def _head_from_toml(head: Any, *, path: Path, registry: Registry
                    ) -> tuple[Experiment | None, Contract[Any, Any], dict[str, Any]]:
    """The ``[experiment]`` table: the factory to start from, the contract, scalars."""
    changes: dict[str, Any] = {}
    base: Experiment | None = None
    if head.factory is not None:
        built = _build(_declared(head), "factory", what="experiment.factory")
        if not isinstance(built, Experiment):
            raise ExperimentError("experiment.factory must return an Experiment")
        base = built
    contract = base.contract if base is not None else None
    if head.contract is not None:
        named = head.contract
        contract = (resolve(named, what="experiment.contract") if ":" in named
                    else registry.by_id(named, json_path="$.experiment.contract"))
        changes["contract"] = contract
    if not isinstance(contract, Contract):
        raise ExperimentError(f"{path}: experiment.contract must name a contract")
    changes.update((key, getattr(head, key)) for key in _EXPERIMENT_SCALARS
                   if getattr(head, key) is not None)
    if head.assumptions is not None:
        changes["assumptions"] = dict(head.assumptions)
    return base, contract, changes


def _tables_from_toml(document: Any, contract: Contract[Any, Any],
                      base: Experiment | None, *, path: Path) -> dict[str, Any]:
    """Every table but ``[experiment]``."""
    from handoffs.lab.perturbations import select_perturbations

    changes: dict[str, Any] = {}
    if document.cases is not None:
        changes["cases"] = _cases_from_toml(document.cases, contract, base_dir=path.parent)
        population = population_from_toml(document.cases, contract)
        if population is not None:
            changes["population"] = population
    for key, attr in _EVIDENCE_KEYS:
        reference = getattr(document.evidence or _Evidence(), key)
        if reference is not None:
            changes[attr] = _callable_ref(reference, what=f"evidence.{key}")
    if document.governance is not None:
        changes["governance"] = _build(_declared(document.governance), "object",
                                       what="governance")
    if document.strategy is not None:
        changes["strategies"] = tuple(
            _strategy_from_toml(s, contract, base_dir=path.parent, index=i)
            for i, s in enumerate(document.strategy))
    if document.tolerances is not None:
        changes["tolerances"] = Tolerances.from_json(document.tolerances)
    if (table := document.perturbations) is not None:
        extra = [_extra_perturbation(item, contract, index, path)
                 for index, item in enumerate(table.extra or [])]
        changes["perturbations"] = select_perturbations(
            contract,
            standard=bool(True if table.standard is None else table.standard),
            include=tuple(table.include or ()),
            exclude=tuple(table.exclude or ()),
            extra=tuple(extra),
            base=None if base is None else base.perturbations,
        )
    if document.injection is not None:
        changes["injections"] = _injections(document.injection, path)
    return changes


def _injections(tables: Any, path: Path) -> tuple[Falsehood, ...]:
    """``[[injection]]``: each a table of exactly ``case_id``, ``field`` and ``value``."""
    from handoffs.lab.perturbations import Falsehood

    if not isinstance(tables, list):
        raise ExperimentError(f"{path}: injection must be an array of tables "
                              f"([[injection]]), got {type(tables).__name__}")
    injections = []
    for index, table in enumerate(tables):
        where = f"{path}: injection {index + 1}"
        if not isinstance(table, dict):
            raise ExperimentError(f"{where} is not a table")
        declared = _declared(_structure(table, _Injection, path=f"injection[{index}]"))
        for key in ("case_id", "field", "value"):
            if key not in declared:
                raise ExperimentError(f"{where}: an injection needs {key!r}")
        for key in ("case_id", "field"):
            if not isinstance(declared[key], str) or not declared[key]:
                raise ExperimentError(f"{where}: {key} must be a non-empty string, got "
                                      f"{declared[key]!r}")
        injections.append(Falsehood(**declared))
    return tuple(injections)


def _cases_from_toml(table: Mapping[str, Any], contract: Contract[Any, Any], *,
                     base_dir: Path) -> CaseSource:
    cases = _declared(_structure(table, _Cases, path="cases"))
    sources = [source for source in _CASES_KEYS if source in cases]
    if len(sources) > 1:
        raise ExperimentError(f"[cases] has {' and '.join(sources)}: declare one source",
                              json_path=f"$.cases.{sources[1]}")
    for source, keys in _CASES_KEYS.items():
        stray = [k for k in keys[1:] if k in cases and source not in cases]
        if stray:
            raise ExperimentError(f"cases.{stray[0]} is read only with cases.{source}",
                                  json_path=f"$.cases.{stray[0]}")
    if "jsonl" in cases:
        file = Path(cases["jsonl"])
        structure = (_callable_ref(cases["structure"], what="cases.structure")
                     if "structure" in cases else None)
        return JSONLinesCases(file if file.is_absolute() else base_dir / file, structure)
    if "hypothesis" in cases:
        return GeneratedCases(contract, int(cases["hypothesis"]), seed=int(cases.get("seed", 0)))
    if "source" in cases:
        factory = resolve(cases["source"], what="cases.source")
        args = dict(cases.get("source_args", {}))
        if not callable(factory):
            return IterableCases(factory, description=f"python:{cases['source']}")
        label = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return IterableCases(lambda: factory(**args),
                             description=f"python:{cases['source']}({label})")
    raise ExperimentError("[cases] needs one of source, jsonl or hypothesis")


def _strategy_from_toml(strategy: Any, contract: Contract[Any, Any], *,
                        base_dir: Path, index: int = 0) -> Strategy:
    table = _declared(strategy)
    options: dict[str, Any] = {}
    if "receipts" in table:
        options["receipts"] = bool(table["receipts"])
    what = f"strategy {table.get('name')}"
    if ("model" in table) == ("receiver" in table):
        raise ExperimentError(f"{what}: declare either receiver or [strategy.model]")
    receiver = (model_from_toml(table["model"], contract, base_dir=base_dir, what=what,
                                path=f"strategy[{index}].model")
                if "model" in table else _build(table, "receiver", what=f"{what} receiver"))
    return Strategy(
        name=table["name"],
        encoder=_build(table, "encoder", what=f"{what} encoder"),
        receiver=receiver,
        authority=Authority(table.get("authority", "ADVISE")),
        gated=bool(table.get("gated", False)),
        **options,
    )


def model_from_toml(table: Mapping[str, Any], contract: Contract[Any, Any], *,
                    base_dir: Path, what: str = "model", path: str = "model") -> Any:
    """A :class:`~handoffs.receivers.models.ModelReceiver` declared in a ``[strategy.model]``
    table (see :func:`load_experiment`): route, server, key, template and parameters.

    The server URL is ``base_url``, or the environment variable ``base_url_env``
    names (when set; ``base_url`` is then its default); the key is read from the
    variable ``api_key_env`` at the first call, never stored. ``template_file`` and
    ``system_file`` are read relative to the TOML file. Admission is ``gate`` (an
    import string of a gate or a factory, with ``gate_args``) or, by default, a
    governance checker of the contract requiring the members listed in ``required``.

    Raises:
        ExperimentError: unknown keys, a missing route or server, unreadable files,
            bad parameters.
    """
    from handoffs.receivers import GovernanceChecker
    from handoffs.receivers.models import ModelReceiver, OpenAICompatibleClient

    _structure(table, _Model, path=path)
    if "route" not in table:
        raise ExperimentError(f"{what}: the model needs a route", json_path="$.model.route")
    import os

    url = table.get("base_url")
    if "base_url_env" in table:
        url = os.environ.get(str(table["base_url_env"])) or url
    if not url:
        raise ExperimentError(f"{what}: the model needs base_url (or base_url_env set)",
                              json_path="$.model.base_url")
    texts: dict[str, Any] = {}
    for key in ("template", "system"):
        if f"{key}_file" in table:
            file = Path(table[f"{key}_file"])
            try:
                texts[key] = (file if file.is_absolute() else base_dir / file).read_text(
                    encoding="utf-8")
            except OSError as exc:
                raise ExperimentError(f"{what}: cannot read {key}_file {file}: {exc}",
                                      json_path=f"$.model.{key}_file") from exc
        elif key in table:
            texts[key] = str(table[key])
    client_keys = ("timeout", "max_retries", "backoff", "requests_per_minute",
                   "tokens_per_minute", "max_concurrency")
    receiver_keys = ("name", "temperature", "seed", "max_tokens", "response_format", "tools")
    try:
        client = OpenAICompatibleClient(
            base_url=str(url), api_key_env=table.get("api_key_env"),
            **{k: table[k] for k in client_keys if k in table})
        if "gate" in table:
            gate = _build(table, "gate", what=f"{what} gate")
        else:
            gate = GovernanceChecker(contract, required=tuple(table.get("required", ())))
        return ModelReceiver(gate=gate, client=client, model_route=str(table["route"]),
                             **texts, **{k: table[k] for k in receiver_keys if k in table})
    except (TypeError, ValueError) as exc:
        raise ExperimentError(f"{what}: {exc}", json_path="$.model") from exc
