"""The release gate and the release artefact.

The gate compares measured metrics with declared thresholds, one threshold per
metric and never a blended score: agreement (ε), mean regret (δ), the largest
regret, hard violations (0 unless declared), governance failures and message
size for each gated strategy under each gate perturbation (a row the perturbation did
not exercise fails, with the reason, instead); surviving catastrophic
falsehoods when declared; and the falsifying controls, which must *not* meet the
thresholds (a control that does means the channel is not doing the work). It
returns every check with its reason. Exit codes: 0 pass, 1 fail (2 is the
command line's "could not run").

The release artefact bundles what the essay asks a handoff boundary to ship: the
contract and its version, the schema digest, the case-set digest, the ablation
record and the declared regret budget, with the gate's outcome. Given a key, it is
signed with the same Data Integrity proofs as receipts (``eddsa-jcs-2022``, purpose
``assertionMethod``), and :func:`handoffs.integrity.verify` checks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from handoffs._time import format_time
from handoffs.integrity import Signer, sign
from handoffs.lab._experiment import Tolerances
from handoffs.lab._proofs import proof_checks

__all__ = [
    "ARTEFACT_FORMAT",
    "ARTEFACT_PURPOSE",
    "EXIT_FAIL",
    "EXIT_PASS",
    "evaluate_gate",
    "gated_strategies",
    "release_artefact",
]

EXIT_PASS: Final = 0
EXIT_FAIL: Final = 1
ARTEFACT_FORMAT: Final = "handoffs-release/1"
ARTEFACT_PURPOSE: Final = "assertionMethod"
_CONTROLS: Final = ("no-message", "shuffled-message", "constant-message")


def gated_strategies(report: Mapping[str, Any]) -> list[str]:
    """The strategies a report's release gate bounds, in the experiment's order: those
    declared ``gated``, else the subject alone.
    """
    experiment = report["experiment"]
    return [s["name"] for s in experiment["strategies"] if s.get("gated")] or \
        [experiment["subject"]]


def _check(metric: str, strategy: str | None, perturbation: str | None, *, comparison: str,
           threshold: float, value: float | None, reason: str) -> dict[str, Any]:
    if value is None:
        passed = False
    elif comparison == "<=":
        passed = value <= threshold
    elif comparison == ">=":
        passed = value >= threshold
    elif comparison == "<":
        passed = value < threshold
    else:
        passed = value > threshold
    return {"metric": metric, "strategy": strategy, "perturbation": perturbation,
            "comparison": comparison, "threshold": threshold, "value": value,
            "passed": passed, "reason": reason}


def _fmt(value: float | None) -> str:
    return "missing" if value is None else f"{value:.6g}"


def _interval(pair: Sequence[float]) -> str:
    return f"[{pair[0]:.4g}, {pair[1]:.4g}]"


def _cases_word(report: Mapping[str, Any]) -> str:
    population = report["experiment"].get("population") or {}
    return ("generated (stress) cases" if population.get("case_figures") == "stress"
            else "cases")


def rate_limits(row: Mapping[str, Any], tol: Tolerances, *, drawn: bool = True
                ) -> list[tuple[str, str, float | None, str, Any]]:
    """The agreement and regret checks of one gated row: ε and δ against the pessimistic
    end of the population interval (a tolerance of 0 against the count, which no
    interval can clear), and with ``figures = "stress"`` against the generated cases'
    figures too. A row without population figures (a report of an older version) is
    checked on its own figures. ``drawn``: the population is drawn apart from the
    cases; else the experiment's own cases are what the figures describe, and ε and δ
    are compared with those cases' figures exactly.
    """
    floor = 1 - tol.agreement_epsilon
    pop = row.get("population")
    out: list[tuple[str, str, float | None, str, Any]] = []
    if pop is None or not drawn:
        # No draws: the experiment's own cases are what the figures describe, exactly
        # (nothing was sampled from a distribution, so no interval is inferred).
        over = "" if pop is None else f" over the experiment's {pop['draws']} cases"
        return [("agreement", ">=", floor,
                 f"agreement {_fmt(row['agreement'])}{over} against 1 - ε = {_fmt(floor)}",
                 row["agreement"]),
                ("mean_regret", "<=", tol.regret_delta,
                 f"mean regret {_fmt(row['mean_regret'])}{over} against δ = "
                 f"{_fmt(tol.regret_delta)}", row["mean_regret"])]
    draws = f"{pop['draws']} population draws"
    if tol.agreement_epsilon == 0:
        out.append(("agreement", ">=", 1.0,
                    f"agreement {_fmt(pop['agreement'])} over {draws} against "
                    "1 - ε = 1 (ε = 0: no disagreement allowed)", pop["agreement"]))
    else:
        low = pop["agreement_interval"][0]
        out.append(("agreement", ">=", floor,
                    f"agreement {_fmt(pop['agreement'])} "
                    f"{_interval(pop['agreement_interval'])} over {draws}: its lower bound "
                    f"{_fmt(low)} against 1 - ε = {_fmt(floor)}", low))
    if tol.regret_delta == 0:
        out.append(("mean_regret", "<=", 0.0,
                    f"mean regret {_fmt(pop['mean_regret'])} over {draws} against "
                    "δ = 0 (no regret allowed)", pop["mean_regret"]))
    else:
        out.append(("mean_regret", "<=", tol.regret_delta,
                    f"mean regret {_fmt(pop['mean_regret'])} "
                    f"{_interval(pop['mean_regret_interval'])} over {draws}: its upper bound "
                    f"{_fmt(pop['mean_regret_interval'][1])} against δ = "
                    f"{_fmt(tol.regret_delta)}", pop["mean_regret_interval"][1]))
    hard = round(pop["hard_violation_rate"] * pop["decisions"])
    out.append(("population_hard_violations", "<=", tol.hard_violations,
                f"{hard} hard violation(s) over {draws} (rate "
                f"{_fmt(pop['hard_violation_rate'])} "
                f"{_interval(pop['hard_violation_rate_interval'])}), "
                f"{tol.hard_violations} allowed", hard))
    stress = row.get("stress")
    if tol.figures == "stress" and stress is not None:
        out.append(("stress_agreement", ">=", floor,
                    f"stress agreement {_fmt(stress['agreement'])} over {stress['cases']} "
                    f"generated cases against 1 - ε = {_fmt(floor)}", stress["agreement"]))
        out.append(("stress_mean_regret", "<=", tol.regret_delta,
                    f"stress mean regret {_fmt(stress['mean_regret'])} over "
                    f"{stress['cases']} generated cases against δ = {_fmt(tol.regret_delta)}",
                    stress["mean_regret"]))
    return out


def control_meets(row: Mapping[str, Any], tol: Tolerances) -> tuple[bool, str]:
    """Whether a control row could meet ε and δ on its population figures (the end of
    each interval most favourable to the control: a control passes only when the
    population shows it doing worse), and those figures as text.
    """
    floor = 1 - tol.agreement_epsilon
    pop = row.get("population")
    if pop is None:
        return (row["agreement"] >= floor and row["mean_regret"] <= tol.regret_delta,
                f"agreement {_fmt(row['agreement'])}, mean regret {_fmt(row['mean_regret'])}")
    best_agreement = pop["agreement"] if floor >= 1 else pop["agreement_interval"][1]
    best_regret = pop["mean_regret"] if tol.regret_delta == 0 else pop["mean_regret_interval"][0]
    meets = best_agreement >= floor and best_regret <= tol.regret_delta
    return meets, (f"population agreement {_fmt(pop['agreement'])} "
                   f"{_interval(pop['agreement_interval'])}, mean regret "
                   f"{_fmt(pop['mean_regret'])} {_interval(pop['mean_regret_interval'])} over "
                   f"{pop['draws']} draws")


def evaluate_gate(report: Mapping[str, Any], tolerances: Tolerances | None = None, *,
                  receivers: Mapping[str, Mapping[str, Any]] | None = None,
                  allow_stale_receiver: bool = False) -> dict[str, Any]:
    """Evaluate the release gate on a report (its own tolerances unless given).

    Args:
        report: the report.
        tolerances: the budget (the report's own unless given).
        receivers: the receivers as they are now, each strategy's
            ``receiver_fingerprint`` by name: a
            strategy whose receiver's digest differs from the one the report recorded
            (or that the report recorded none for) is *stale*, a failed
            ``receiver_fingerprint`` check, since the measurements are of another
            receiver. ``None``: not checked.
        allow_stale_receiver: report a stale receiver as a warning instead.

    Returns:
        the report's ``gate`` section: ``passed``, ``exit_code``, every check,
        the reasons of the failed ones and warnings that do not fail the gate.
    """
    experiment = report["experiment"]
    tol = tolerances or Tolerances.from_json(experiment["tolerances"])
    gated = gated_strategies(report)
    rows = {(r["strategy"], r["perturbation"]): r for r in report["results"]}
    drawn = (experiment.get("population") or {}).get("source") == "drawn"
    checks: list[dict[str, Any]] = []
    floor = 1 - tol.agreement_epsilon
    for strategy in gated:
        for perturbation in tol.gate_perturbations:
            row = rows.get((strategy, perturbation))
            where = f"{strategy} under {perturbation}"
            if row is None:
                checks.append(_check("decisions", strategy, perturbation, comparison=">",
                                     threshold=0, value=None,
                                     reason=f"{where}: no decisions were recorded"))
                continue
            if row.get("exercised") is False:
                # its figures are the unperturbed decisions': nothing to bound
                checks.append(_check("exercised", strategy, perturbation, comparison=">",
                                     threshold=0, value=row["exercised_cases"],
                                     reason=f"{where}: not exercised: "
                                            f"{row['exercised_reason']}"))
                continue
            limits: list[tuple[str, str, float | None, str, Any]] = [
                *rate_limits(row, tol, drawn=drawn),
                ("max_regret", "<=", tol.max_regret,
                 f"largest regret {_fmt(row['max_regret'])} against {_fmt(tol.max_regret)}",
                 row["max_regret"]),
                ("hard_violations", "<=", tol.hard_violations,
                 f"{row['hard_violations']} hard violation(s) in the {_cases_word(report)}, "
                 f"{tol.hard_violations} allowed", row["hard_violations"]),
                ("governance_failures", "<=", tol.governance_failures,
                 f"{row['governance_failures']} governance failure(s), "
                 f"{tol.governance_failures} allowed", row["governance_failures"]),
                ("receiver_errors", "<=", 0, f"{row['receiver_errors']} receiver error(s)",
                 row["receiver_errors"]),
                ("mean_bytes", "<=", tol.max_mean_bytes,
                 f"mean payload {_fmt(row['mean_bytes'])} bytes against "
                 f"{_fmt(tol.max_mean_bytes)}", row["mean_bytes"]),
            ]
            for metric, comparison, threshold, text, value in limits:
                if threshold is None:
                    continue
                checks.append(_check(metric, strategy, perturbation, comparison=comparison,
                                     threshold=threshold, value=value,
                                     reason=f"{where}: {text}"))
            checks += proof_checks(row, where, tol)
        if tol.controls_must_fail:
            for control in _CONTROLS:
                row = rows.get((strategy, control))
                if row is None:
                    continue
                meets, figures = control_meets(row, tol)
                checks.append({
                    "metric": "control_falsifies", "strategy": strategy,
                    "perturbation": control, "comparison": "<", "threshold": floor,
                    "value": row["agreement"] if row.get("population") is None
                    else row["population"]["agreement"], "passed": not meets,
                    "reason": (f"{strategy} under the {control} control: {figures}; "
                               + ("the control meets the thresholds, so the message is not "
                                  "doing the work" if meets else
                                  "the control does worse, as it must")),
                })
    checks += default_filling_checks(report, tol)
    waivers: list[str] = []
    checks += _catastrophic_checks(report, gated, tol, waivers)
    if tol.max_tokens is not None:
        totals = (report.get("cost") or {}).get("totals") or {}
        spent = int(totals.get("tokens_in", 0)) + int(totals.get("tokens_out", 0))
        checks.append(_check(
            "model_tokens", None, None, comparison="<=", threshold=tol.max_tokens,
            value=spent, reason=f"the run spent {spent} model token(s), "
                                f"{tol.max_tokens} allowed"))
    stopped = [r for r in report["minimal_messages"]["regions"]
               if isinstance(r.get("search"), Mapping) and r["search"].get("finished") is False]
    if stopped:
        named = "; ".join(f"case {r['example_case_id']}: {r['search']['reason']} "
                          f"({r['search']['stopped_by']})" for r in stopped[:3])
        more = f"; and {len(stopped) - 3} more" if len(stopped) > 3 else ""
        checks.append(_check(
            "minimal_message_searches", None, None, comparison="<=", threshold=0,
            value=len(stopped),
            reason=f"{len(stopped)} minimal-message search(es) stopped before finishing, "
                   f"so they found no minimal message: {named}{more}"))
    warnings = _warnings(report, gated, tol)
    checks += _receiver_checks(report, receivers, warnings, allow=allow_stale_receiver)
    reasons = [c["reason"] for c in checks if not c["passed"]]
    passed = not reasons
    return {"passed": passed, "exit_code": EXIT_PASS if passed else EXIT_FAIL,
            "checks": checks, "reasons": reasons, "warnings": warnings, "waivers": waivers}


def default_filling_checks(report: Mapping[str, Any], tol: Tolerances) -> list[dict[str, Any]]:
    """The default-filling (semantic) receiver's own tolerances, on its population
    figures under every subject row that removes a decision field: agreement (its
    interval's lower bound against 1 - ε; ε = 0 on the count), mean regret (its upper
    bound against δ; δ = 0 on the count) and hard violations over the draws.
    """
    limits = (tol.default_filling_epsilon, tol.default_filling_delta,
              tol.default_filling_hard_violations)
    if all(limit is None for limit in limits):
        return []
    subject = report["experiment"]["subject"]
    checks: list[dict[str, Any]] = []
    for row in report["results"]:
        if row["strategy"] != subject or not str(row["perturbation"]).startswith(
                "remove-decision-field:"):
            continue
        semantic = (row.get("population") or {}).get("semantic")
        where = f"the default-filling receiver under {row['perturbation']}"
        if semantic is None:
            checks.append(_check("default_filling", subject, row["perturbation"],
                                 comparison=">", threshold=0, value=None,
                                 reason=f"{where}: no population figures were recorded"))
            continue
        n = semantic["decisions"]
        if tol.default_filling_epsilon is not None:
            eps = tol.default_filling_epsilon
            value = semantic["agreement"] if eps == 0 else semantic["agreement_interval"][0]
            checks.append(_check(
                "default_filling_agreement", subject, row["perturbation"], comparison=">=",
                threshold=1 - eps, value=value,
                reason=f"{where}: agreement {_fmt(semantic['agreement'])} "
                       f"{_interval(semantic['agreement_interval'])} over {n} decisions "
                       f"against 1 - ε = {_fmt(1 - eps)}"))
        if tol.default_filling_delta is not None:
            delta = tol.default_filling_delta
            value = semantic["mean_regret"] if delta == 0 else \
                semantic["mean_regret_interval"][1]
            checks.append(_check(
                "default_filling_mean_regret", subject, row["perturbation"], comparison="<=",
                threshold=delta, value=value,
                reason=f"{where}: mean regret {_fmt(semantic['mean_regret'])} "
                       f"{_interval(semantic['mean_regret_interval'])} over {n} decisions "
                       f"against δ = {_fmt(delta)}"))
        if tol.default_filling_hard_violations is not None:
            hard = round(semantic["hard_violation_rate"] * n)
            checks.append(_check(
                "default_filling_hard_violations", subject, row["perturbation"],
                comparison="<=", threshold=tol.default_filling_hard_violations, value=hard,
                reason=f"{where}: {hard} hard violation(s) over {n} decisions (rate "
                       f"{_fmt(semantic['hard_violation_rate'])} "
                       f"{_interval(semantic['hard_violation_rate_interval'])}), "
                       f"{tol.default_filling_hard_violations} allowed"))
    return checks


def _catastrophic_checks(report: Mapping[str, Any], gated: Sequence[str], tol: Tolerances,
                         waivers: list[str]) -> list[dict[str, Any]]:
    """The bound on surviving catastrophic falsehoods per gated strategy (0 unless
    declared), each failure waived, and the waiver added to ``waivers``, when the
    tolerances name what verifies the claims upstream.
    """
    checks: list[dict[str, Any]] = []
    if tol.surviving_catastrophic_falsehoods is None:
        return checks
    survived = {s["strategy"]: s["catastrophic_survived"]
                for s in report["falsehoods"]["strategies"]}
    for strategy in gated:
        value = survived.get(strategy)
        if value is None:  # no falsehood was sent to it: nothing to bound
            continue
        check = _check(
            "surviving_catastrophic_falsehoods", strategy, "mutate", comparison="<=",
            threshold=tol.surviving_catastrophic_falsehoods, value=value,
            reason=f"{strategy}: {_fmt(value)} catastrophic schema-valid falsehood(s) "
                   f"survived, {tol.surviving_catastrophic_falsehoods} allowed")
        if not check["passed"] and tol.claims_verified_upstream is not None:
            waiver = f"claims verified upstream: {tol.claims_verified_upstream}"
            check["passed"] = True
            check["reason"] += f"; waived ({waiver})"
            if waiver not in waivers:
                waivers.append(waiver)
        checks.append(check)
    return checks


def _receiver_checks(report: Mapping[str, Any],
                     receivers: Mapping[str, Mapping[str, Any]] | None,
                     warnings: list[str], *, allow: bool) -> list[dict[str, Any]]:
    """A failed ``receiver_fingerprint`` check per stale strategy (a warning if ``allow``);
    none when ``receivers`` is ``None`` (not checked).
    """
    checks = []
    for strategy, reason in (stale_receivers(report, receivers) if receivers is not None
                             else ()):
        if allow:
            warnings.append(f"{reason} (accepted with --allow-stale-receiver)")
            continue
        checks.append({"metric": "stale_receivers", "strategy": strategy,
                       "perturbation": None, "comparison": "<=", "threshold": 0,
                       "value": 1, "passed": False, "reason": reason})
    return checks


def stale_receivers(report: Mapping[str, Any], receivers: Mapping[str, Mapping[str, Any]]
                    ) -> list[tuple[str, str]]:
    """``(strategy, reason)`` for every strategy of ``report`` whose receiver is not the
    one the report measured: its fingerprint digest differs from ``receivers``' (the
    receivers as they are now), the report recorded none, or the strategy is gone.
    """
    out: list[tuple[str, str]] = []
    for row in report["experiment"]["strategies"]:
        name = row["name"]
        recorded = row.get("receiver_fingerprint")
        now = receivers.get(name)
        if now is None:
            out.append((name, f"stale release: strategy {name} has no receiver now"))
        elif not isinstance(recorded, Mapping):
            out.append((name, f"stale release: the report records no receiver fingerprint "
                              f"for {name}, so nothing shows it measured the receiver of now"))
        elif recorded.get("digest") != now.get("digest"):
            changed = sorted(k for k in {*recorded, *now} - {"digest", "served"}
                             if recorded.get(k) != now.get(k))
            out.append((name, f"stale release: the receiver of {name} changed since the run "
                              f"({', '.join(changed) or 'digest'}: {recorded.get('digest')} → "
                              f"{now.get('digest')}); rerun the experiment"))
    return out


def _warnings(report: Mapping[str, Any], gated: Sequence[str], tol: Tolerances) -> list[str]:
    out: list[str] = []
    subject = report["experiment"]["subject"]
    floor = 1 - tol.agreement_epsilon
    for row in report["results"]:
        if row["strategy"] != subject or not str(row["perturbation"]).startswith(
                "remove-decision-field:"):
            continue
        agreement = row["semantic_agreement"]
        regret = row["semantic_mean_regret"]
        if agreement is not None and regret is not None and agreement >= floor \
                and regret <= tol.regret_delta and not row["semantic_hard_violations"]:
            out.append(f"removing {row['target']} changes no decision of the benign-default "
                       "receiver: the field may be unnecessary")
    never = report["minimal_messages"]["fields_never_needed"]
    if never:
        out.append(f"no minimal sufficient message needs {', '.join(never)}")
    if report["minimal_messages"]["exhaustive_check"]["agrees"] is False:
        out.append("the minimal-message search disagrees with exhaustive search")
    out.extend(
        f"strategy {row['strategy']} is not gated and made {row['hard_violations']} "
        "catastrophic decision(s) (hard violations) unperturbed: the gate does not bound it"
        for row in report["results"]
        if row["perturbation"] == "none" and row["hard_violations"]
        and row["strategy"] not in gated)
    return out


def release_artefact(report: Mapping[str, Any], *, key: Signer | None = None,
                     created: datetime | None = None,
                     baselines: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The release artefact of a report: contract, digests, ablation record, regret
    budget and the gate's outcome; signed when a ``key`` is given.

    Args:
        report: the lab report (its ``gate`` is the outcome recorded).
        key: sign the artefact with an ``eddsa-jcs-2022`` Data Integrity proof (purpose
            ``assertionMethod``); check it with
            ``handoffs.integrity.verify(artefact, keyring, purpose="assertionMethod")``.
        created: the artefact's ``created`` time and the proof's (default: now).
        baselines: what ``handoffs log watch`` compares production with (the released
            handoff's decision profile and the declared budgets, as ``handoffs lab gate
            --baseline-log`` writes them); recorded as ``baselines`` (and signed with the
            rest) when given.
    """
    created = created or datetime.now(UTC)
    experiment = report["experiment"]
    gate = report["gate"]
    name, _, version = str(experiment["contract"]).partition("/")
    del name
    artefact = {
        "artefact_format": ARTEFACT_FORMAT,
        "experiment": experiment["name"],
        "contract": experiment["contract"],
        "contract_version": version,
        "schema_id": experiment["schema_id"],
        "schema_digest": experiment["schema_digest"],
        "contract_digest": experiment["contract_digest"],
        "policy_fingerprint": experiment["policy_fingerprint"],
        "case_set_digest": experiment["case_set_digest"],
        "receivers": {s["name"]: s["receiver_fingerprint"] for s in experiment["strategies"]
                      if "receiver_fingerprint" in s},
        "cases": experiment["cases"],
        "regret_budget": dict(experiment["tolerances"]),
        "ablation_record": [
            {"strategy": r["strategy"], "perturbation": r["perturbation"],
             "agreement": r["agreement"], "mean_regret": r["mean_regret"],
             "hard_violations": r["hard_violations"],
             "semantic_agreement": r["semantic_agreement"],
             "exercised": r.get("exercised")}
            for r in report["results"]
        ],
        "gate": {"passed": gate["passed"], "reasons": list(gate["reasons"]),
                 "waivers": list(gate.get("waivers", ()))},
        "created": format_time(created),
    }
    if baselines is not None:
        artefact["baselines"] = dict(baselines)
    return artefact if key is None else sign(artefact, key, purpose=ARTEFACT_PURPOSE,
                                               created=created)

