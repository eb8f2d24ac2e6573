"""The run log: an append-only JSON Lines record of every receiver decision.

Line 1 is a header naming the experiment, a fingerprint of everything that
determines the decisions, the chunk size and the column names of decision rows.
Each further line is one *chunk*: the cases it covered (id, case digest, state
key, reference action), one compact row per decision, and the per-state analysis
(counterfactual triggers, minimal message), and for the first disagreements of
each strategy × perturbation the message sent, and the reference policy's deciding
rule on each state with a disagreement
(``exhibits``: row index, message; ``rules``: state key, rule). A final footer line marks a complete
run and carries the case-set digest.

Chunks are written in stream order, one line each, flushed as they complete, so
an interrupted run leaves a valid prefix (a torn last line is cut off on resume)
and a resumed run continues after the last complete chunk. Metrics are computed
from these lines only, which is what lets a finished run be re-scored under
another loss matrix without calling any receiver again.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Final

import attrs

from handoffs._errors import MalformedJSON, RunLogError
from handoffs._json import JSONLimits, dumps, loads

__all__ = ["COLUMNS", "RUNLOG_FORMAT", "RunLog", "RunLogError", "expand_rows", "read_run_log"]

RUNLOG_FORMAT: Final = "handoffs-lab-runlog/1"

COLUMNS: Final = (
    "case",          # offset of the case within its chunk
    "strategy",      # index into header.strategies
    "perturbation",  # index into header.perturbations ("none" is 0)
    "label",         # variant label (falsehoods) or null
    "epoch",         # repetition of a sampled receiver: its sample index (0 if deterministic)
    "reference",     # reference action value for this decision
    "action",        # the receiver's action value
    "verdict",       # ACCEPT, ESCALATE, REJECT, or ERROR when the receiver raised
    "semantic",      # the semantic receiver's action, or null (no decision_state)
    "determined",    # whether the semantic receiver's policy was determined, or null
    "bytes",         # canonical payload bytes
    "tokens",        # tokens of the canonical payload, or null
    "governance",    # governance members all present and valid
    "schema",        # valid under the receipt schema, or null (not a receipt strategy)
    "latency_us",    # receiver latency in microseconds (0 for a memo hit)
    "memo",          # 1 when served from the memo
    "falsified",     # falsehoods: the reference policy's action if the falsehood held
    "falsehood",     # falsehoods: [field, true value, false value]
    "reasons",       # the receiver's reason codes
    "holding",       # state-conditioned hard constraints whose `when` holds on the truth
)
"""Column names of a decision row, in order."""

_LINE_LIMITS: Final = JSONLimits(max_bytes=1 << 30, max_depth=64)

# Columns a compact row carries itself; the others come from its template.
_CASE, _BYTES, _TOKENS, _LATENCY, _MEMO = 0, 10, 11, 14, 15


def expand_rows(record: Mapping[str, Any]) -> list[list[Any]]:
    """The decision rows of a chunk record, one :data:`COLUMNS` row per decision.

    A record read from a run log already has them under ``rows``; a record fresh
    from the runner holds them compactly: distinct rows (``templates``) and per
    decision ``(case, template, bytes, tokens, latency, memo)``.
    """
    templates = record.get("templates")
    if templates is None:
        return list(record["rows"])
    out = []
    for case, template, size, tokens, latency, memo in record["rows"]:
        row = list(templates[template])
        row[_CASE], row[_BYTES], row[_TOKENS], row[_LATENCY], row[_MEMO] = (
            case, size, tokens, latency, memo)
        out.append(row)
    return out


def _row_formats(templates: list[list[Any]]) -> list[str]:
    """Per template, the JSON text of its row with ``%d``/``%s`` for the row's own columns."""
    formats = []
    for template in templates:
        cells = [dumps(v).replace("%", "%%") for v in template]
        cells[_CASE] = cells[_BYTES] = cells[_LATENCY] = cells[_MEMO] = "%d"
        cells[_TOKENS] = "%s"
        formats.append("[" + ",".join(cells) + "]")
    return formats


def _encode(record: Mapping[str, Any]) -> bytes:
    """One chunk record as its run-log line (without the newline)."""
    templates = record.get("templates")
    if templates is None:
        return dumps(record).encode("utf-8")
    if record.get("complete_rows") is False:
        raise RunLogError("a chunk record that kept only some of its rows cannot be logged")
    formats = _row_formats(templates)
    rows = ",".join([
        formats[t] % (case, size, "null" if tokens is None else tokens, latency, memo)
        for case, t, size, tokens, latency, memo in record["rows"]])
    head = dumps({k: record[k] for k in ("calls", "cases", "chunk", "hits")})
    tail = dumps({k: record[k] for k in ("start", "states", "exhibits", "rules", "exercised")
                  if k in record})
    return f"{head[:-1]},\"rows\":[{rows}],{tail[1:]}".encode()


def _parse(line: bytes, *, path: Path, number: int) -> Any:
    try:
        return loads(line, limits=_LINE_LIMITS)
    except MalformedJSON as exc:
        raise RunLogError(f"{path} line {number}: {exc.message}") from exc


@attrs.frozen
class _Scan:
    header: dict[str, Any]
    chunks: int
    cases: int
    complete: bool
    good_bytes: int


def _scan(path: Path) -> _Scan:
    """Read the header and count complete chunks; find where the valid prefix ends."""
    with path.open("rb") as handle:
        first = handle.readline()
        if not first.endswith(b"\n"):
            raise RunLogError(f"{path} has no complete header line")
        header = _parse(first, path=path, number=1)
        if not isinstance(header, dict) or header.get("format") != RUNLOG_FORMAT:
            raise RunLogError(f"{path} is not a {RUNLOG_FORMAT} run log")
        good = len(first)
        chunks = cases = 0
        complete = False
        number = 1
        for line in handle:
            number += 1
            if not line.endswith(b"\n"):
                break  # torn last line
            try:
                record = loads(line, limits=_LINE_LIMITS)
            except MalformedJSON:
                break
            if not isinstance(record, dict):
                break
            if record.get("complete") is True:
                complete = True
                good += len(line)
                break
            if record.get("chunk") != chunks:
                raise RunLogError(f"{path} line {number}: expected chunk {chunks}, "
                                  f"got {record.get('chunk')!r}")
            chunks += 1
            cases += len(record.get("cases", ()))
            good += len(line)
    return _Scan(header, chunks, cases, complete, good)


def read_run_log(path: Path | str) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """The header and a lazy iterator over the complete chunk records (then the footer).

    Raises:
        RunLogError: not a run log, or its chunks are out of order.
    """
    path = Path(path)
    scan = _scan(path)

    def chunks() -> Iterator[dict[str, Any]]:
        wanted = scan.chunks + (1 if scan.complete else 0)
        with path.open("rb") as handle:
            handle.readline()
            for number, line in enumerate(handle, start=2):
                if number - 2 >= wanted:
                    return
                yield _parse(line, path=path, number=number)

    return scan.header, chunks()


class RunLog:
    """An open run log being written (or resumed).

    Use :meth:`create` for a fresh log and :meth:`resume` to continue one; write
    chunks with :meth:`append` in stream order and finish with :meth:`close`.
    """

    def __init__(self, path: Path | None, handle: IO[bytes] | None, header: dict[str, Any], *,
                 chunks: int, cases: int, complete: bool) -> None:
        self.path = path
        self.header = header
        self.chunks = chunks
        """Complete chunks in the log."""
        self.cases = cases
        """Cases in those chunks."""
        self.complete = complete
        """Whether the log already has its footer."""
        self._handle = handle

    @classmethod
    def discarding(cls, header: Mapping[str, Any]) -> RunLog:
        """A log that keeps count of its chunks but writes nothing (no run log asked for)."""
        full = {"format": RUNLOG_FORMAT, **header, "columns": list(COLUMNS)}
        return cls(None, None, full, chunks=0, cases=0, complete=False)

    @classmethod
    def create(cls, path: Path | str, header: Mapping[str, Any]) -> RunLog:
        """Start a new log at ``path`` (replacing any file there)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        full = {"format": RUNLOG_FORMAT, **header, "columns": list(COLUMNS)}
        handle = path.open("wb")
        handle.write(dumps(full).encode("utf-8") + b"\n")
        handle.flush()
        return cls(path, handle, full, chunks=0, cases=0, complete=False)

    @classmethod
    def resume(cls, path: Path | str, header: Mapping[str, Any]) -> RunLog:
        """Continue the log at ``path``; a missing file starts a new one.

        Raises:
            RunLogError: the log was written by a different experiment declaration
                (its fingerprint differs) or with another chunk size.
        """
        path = Path(path)
        if not path.exists() or path.stat().st_size == 0:
            return cls.create(path, header)
        scan = _scan(path)
        for key in ("fingerprint", "chunk_size"):
            if scan.header.get(key) != header.get(key):
                raise RunLogError(
                    f"{path} was written with another {key} ({scan.header.get(key)!r}, now "
                    f"{header.get(key)!r}); resume only the same experiment, or start afresh",
                    code="run-log-mismatch",
                )
        handle = path.open("r+b")
        handle.seek(scan.good_bytes)
        handle.truncate()
        return cls(path, handle, scan.header, chunks=scan.chunks, cases=scan.cases,
                   complete=scan.complete)

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one chunk record (the next in order) and flush it."""
        if record.get("chunk") != self.chunks:
            raise RunLogError(f"chunk {record.get('chunk')!r} written out of order; "
                              f"expected {self.chunks}")
        if self._handle is not None:
            self._handle.write(_encode(record) + b"\n")
            self._handle.flush()
        self.chunks += 1
        self.cases += len(record.get("cases", ()))

    def finish(self, footer: Mapping[str, Any]) -> None:
        """Write the footer marking the run complete."""
        if self._handle is not None:
            self._handle.write(dumps({"complete": True, **footer}).encode("utf-8") + b"\n")
            self._handle.flush()
            with contextlib.suppress(OSError, io.UnsupportedOperation):
                os.fsync(self._handle.fileno())
        self.complete = True

    def close(self) -> None:
        """Close the file."""
        if self._handle is not None:
            self._handle.close()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
