"""Policy analysis (issue 18): regions, dead rules, boundaries, minimal sets checked
against brute force, version equivalence, opaque predicates and the time limit."""

from __future__ import annotations

import enum
import itertools
import json
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ph_pump
from claim_triage import CLAIM_TRIAGE, ClaimAction, Coverage, claim_triage
from handoffs._errors import InvalidArgument
from handoffs.contracts import Contract, Interval, LossMatrix, decision_field
from handoffs.contracts.analysis import (
    Boundary,
    analyse,
    coverage,
    equivalence,
    minimal_sets,
    sufficiency,
)
from handoffs.contracts.policy import Condition, Field, Is, Over, Policy, Rule


class Act(enum.Enum):
    A = "A"
    B = "B"
    C = "C"


class Colour(enum.Enum):
    RED = "RED"
    GREEN = "GREEN"
    BLUE = "BLUE"


@attrs.frozen
class Small:
    x: bool = decision_field("x")
    y: bool = decision_field("y")
    colour: Colour = decision_field("colour")
    z: bool = decision_field("z")


@attrs.frozen
class Amount:
    amount: float = decision_field("amount", minimum=0, maximum=1000)
    flag: bool = decision_field("flag")


LOSS = LossMatrix({(a, b): 0.0 if a is b else 1.0 for a in Act for b in Act})


def contract(state: type[Any], rules: tuple[Rule[Act], ...], default: Act = Act.C,
             version: str = "1.0.0") -> Contract[Any, Act]:
    return Contract(name="small", version=version, description="a test policy", actions=Act,
                    state=state, policy=Policy(rules=rules, default=default), loss=LOSS,
                    fail_closed_action=Act.C, counterfactual_trigger="any change")


# ------------------------------------------------------------------ regions, dead rules


def test_claim_triage_regions_are_all_live_with_witnesses_the_evaluator_confirms() -> None:
    result = analyse(CLAIM_TRIAGE)
    assert result.method == "certified"
    assert [r.rule for r in result.regions] == [
        "lapsed", "excluded", "likely-fraud", "partial-coverage", "over-limit", "pay"]
    for region in result.regions:
        assert region.status == "live"
        outcome = CLAIM_TRIAGE.evaluate(region.witness)
        assert (outcome.rule, outcome.determined) == (region.rule, True)
    assert result.dead == ()
    assert result.unknown == ()
    json.dumps(result.to_json())  # JSON-ready all the way down


def test_boundaries_cross_the_product_and_each_field_within_delta() -> None:
    result = analyse(CLAIM_TRIAGE)
    axes = {b.axis for b in result.boundaries}
    assert {"fraud_probability", "claim_amount",
            "fraud_probability * claim_amount"} <= axes
    for boundary in result.boundaries:
        low, high = boundary.states
        if boundary.sides[0].startswith("no-pay"):
            continue
        assert CLAIM_TRIAGE.evaluate(low).rule == boundary.sides[0]
        assert CLAIM_TRIAGE.evaluate(high).rule == boundary.sides[1]
        assert boundary.actions[0] != boundary.actions[1]
        if boundary.axis == "fraud_probability * claim_amount":
            product = [Field("fraud_probability") * Field("claim_amount")]
            values = [product[0].bounds(s) for s in (low, high)]
            assert all(v is not None for v in values)
            assert abs(float(values[0][0] - values[1][0])) <= boundary.delta * 1.01  # type: ignore[index]
            assert abs(boundary.cut - 500) < 1
        else:
            others = [k for k in low if k != boundary.axis]
            assert all(low[k] == high[k] for k in others)
    # the hard constraint's cut has its own pair, on either side of p·h = 500
    constraint = [b for b in result.boundaries if b.sides[0].startswith("no-pay")]
    assert constraint
    (reach,) = result.constraints
    assert {a for a, _ in reach.applies_under} == {"INVESTIGATE", "DENY"}
    assert reach.unreachable == ("PARTIAL_PAY",)


def test_cut_points_and_the_product_surface() -> None:
    cuts = {c.field: c for c in analyse(CLAIM_TRIAGE).cuts}
    assert cuts["claim_amount"].points == (10_000.0,)
    (surface,) = cuts["claim_amount"].surfaces
    assert surface.depends_on == ("fraud_probability",)
    assert surface.band == (500.0, 100_000.0)
    assert cuts["claim_amount"].cells == ((0.0, 10_000.0), (10_000.0, 100_000.0))
    (p_surface,) = cuts["fraud_probability"].surfaces
    assert p_surface.band == (0.005, 1.0)
    # Policy.thresholds() sees only constant thresholds; the analysis sees the surface
    assert ("claim_amount", 10_000.0) in CLAIM_TRIAGE.policy.thresholds()


def test_a_shadowed_rule_is_dead_with_its_minimal_shadowing_set() -> None:
    dead = contract(Amount, (
        Rule("over-100", Over("amount", 100), Act.A),
        Rule("over-500", Over("amount", 500), Act.B),
        Rule("flagged", Is("flag", True), Act.B),
        Rule("not-flagged", ~Is("flag", True), Act.A),
        Rule("never", Over("amount", 50), Act.B),
    ))
    result = analyse(dead)
    regions = {r.rule: r for r in result.regions}
    assert regions["over-500"].status == "dead"
    assert regions["over-500"].shadowed_by == ("over-100",)
    assert regions["never"].status == "dead"
    assert regions["never"].witness is None
    assert regions["never"].shadowed_by == ("flagged", "not-flagged")
    assert regions["default"].status == "dead"
    assert [r.rule for r in result.dead] == ["over-500", "never", "default"]
    assert any("dead rule 'never'" in w and "flagged, not-flagged" in w
               for w in result.warnings)
    assert result.to_json()["dead_rules"] == ["over-500", "never", "default"]


def test_a_rule_whose_own_guard_cannot_hold_is_dead_without_shadows() -> None:
    result = analyse(contract(Amount, (
        Rule("impossible", Over("amount", 100) & ~Over("amount", 50), Act.A),)))
    (impossible, default) = result.regions
    assert (impossible.status, impossible.shadowed_by) == ("dead", ())
    assert default.status == "live"
    assert any("can never hold" in w for w in result.warnings)


# ------------------------------------------------------------------ relevance, minimal sets


def test_relevance_and_sufficiency_of_the_claim_contract() -> None:
    result = analyse(CLAIM_TRIAGE)
    assert set(result.relevant_fields) == {"fraud_probability", "claim_amount", "coverage",
                                           "policy_active"}
    assert result.minimal_sets.status == "certified"
    assert result.minimal_sets.sets == (("fraud_probability", "claim_amount", "coverage",
                                         "policy_active"),)
    without = sufficiency(CLAIM_TRIAGE, ["fraud_probability", "coverage", "policy_active"])
    assert without.status == "insufficient"
    first, second = without.counterexample  # type: ignore[misc]
    assert CLAIM_TRIAGE.decide(CLAIM_TRIAGE.state(**first)) != CLAIM_TRIAGE.decide(
        CLAIM_TRIAGE.state(**second))
    assert {k for k in first if first[k] != second[k]} == {"claim_amount"}
    lapsed = CLAIM_TRIAGE.state(fraud_probability=Interval(0.1, 0.2), claim_amount=50.0,
                                coverage=Coverage.FULL, policy_active=False)
    local = minimal_sets(CLAIM_TRIAGE, at=lapsed)
    assert (local.status, local.sets) == ("certified", (("policy_active",),))


def _conditions() -> st.SearchStrategy[Condition]:
    atoms = st.one_of(
        st.sampled_from(["x", "y", "z"]).map(lambda n: Is(n, True)),
        st.sampled_from(list(Colour)).map(lambda c: Is("colour", c)),
    )
    return st.recursive(atoms, lambda inner: st.one_of(
        inner.map(lambda c: ~c),
        st.tuples(inner, inner).map(lambda p: p[0] & p[1]),
        st.tuples(inner, inner).map(lambda p: p[0] | p[1]),
    ), max_leaves=4)


@st.composite
def small_contracts(draw: st.DrawFn) -> Contract[Small, Act]:
    count = draw(st.integers(1, 4))
    rules = tuple(Rule(f"r{i}", draw(_conditions()), draw(st.sampled_from(list(Act))))
                  for i in range(count))
    return contract(Small, rules, default=draw(st.sampled_from(list(Act))))


def _all_states() -> list[dict[str, Any]]:
    return [dict(zip(("x", "y", "colour", "z"), values, strict=True))
            for values in itertools.product((False, True), (False, True), list(Colour),
                                            (False, True))]


def _brute_minimum(c: Contract[Small, Act], at: dict[str, Any] | None) -> set[tuple[str, ...]]:
    states = _all_states()
    names = ("x", "y", "colour", "z")
    decide = {tuple(s.values()): c.decide(Small(**s)) for s in states}

    def sufficient(subset: tuple[str, ...]) -> bool:
        groups: dict[tuple[Any, ...], set[Act]] = {}
        for s in states:
            if at is not None and any(s[n] != at[n] for n in subset):
                continue
            groups.setdefault(tuple(s[n] for n in subset), set()).add(decide[tuple(s.values())])
        if at is not None:
            return groups[tuple(at[n] for n in subset)] == {decide[tuple(at.values())]}
        return all(len(g) == 1 for g in groups.values())

    for size in range(len(names) + 1):
        found = {combo for combo in itertools.combinations(names, size) if sufficient(combo)}
        if found:
            return found
    raise AssertionError("every field together must suffice")


@settings(max_examples=30, deadline=None)
@given(small_contracts(), st.sampled_from(_all_states()))
def test_certified_minimal_sets_equal_the_brute_force_answer(
        c: Contract[Small, Act], at: dict[str, Any]) -> None:
    found = minimal_sets(c)
    assert found.status == "certified"
    assert set(found.sets) == _brute_minimum(c, None)
    local = minimal_sets(c, at=at)
    assert local.status == "certified"
    assert set(local.sets) == _brute_minimum(c, at)
    for subset, field, (first, second) in local.broken_by_removal:
        assert field in subset
        assert all(first[n] == second[n] for n in subset if n != field)
        assert c.decide(Small(**first)) != c.decide(Small(**second))


# ------------------------------------------------------------------ equivalence


def test_two_versions_differ_at_a_state_with_both_actions_and_losses() -> None:
    newer = claim_triage(investigate_over=600.0, version="1.1.0")
    found = equivalence(CLAIM_TRIAGE, newer)
    assert found.status == "different"
    state = CLAIM_TRIAGE.state(**found.state)  # type: ignore[arg-type]
    old, new = CLAIM_TRIAGE.decide(state), newer.decide(state)
    assert found.actions == (old.value, new.value)
    assert old is ClaimAction.INVESTIGATE
    assert found.losses == (CLAIM_TRIAGE.loss(new, old), newer.loss(old, new))
    assert equivalence(CLAIM_TRIAGE, claim_triage(version="1.0.1")).status == "equivalent"


def test_equivalence_refuses_contracts_over_different_fields() -> None:
    other = contract(Amount, (Rule("r", Over("amount", 1), Act.A),))
    with pytest.raises(InvalidArgument, match="different decision fields"):
        equivalence(CLAIM_TRIAGE, other)


# ------------------------------------------------------------------ opaque, time limit


def test_an_opaque_predicate_is_searched_and_labelled_sampled() -> None:
    result = analyse(ph_pump.PREDICATE)
    assert result.method == "sampled"
    assert all(r.method == "sampled" for r in result.regions)
    assert all(r.status in ("live", "unknown") for r in result.regions)  # never "dead"
    assert result.minimal_sets.status == "unknown"
    assert any("sampled, not certified" in w for w in result.warnings)
    assert result.boundaries
    for boundary in result.boundaries:
        assert boundary.method == "sampled"
        low, high = boundary.states
        assert ph_pump.PREDICATE.decide(ph_pump.PREDICATE.state(**low)) != \
            ph_pump.PREDICATE.decide(ph_pump.PREDICATE.state(**high))
    assert all(r.relevant is not False for r in result.relevance)
    assert equivalence(ph_pump.PREDICATE, ph_pump.PREDICATE).status == "unknown"
    with pytest.raises(InvalidArgument, match="opaque predicate"):
        sufficiency(ph_pump.PREDICATE, ["consequence"])


@attrs.frozen
class Boxes:
    a: Interval = decision_field("a", minimum=-10, maximum=10)
    b: Interval = decision_field("b", minimum=-10, maximum=10)
    c: Interval = decision_field("c", minimum=-10, maximum=10)
    d: Interval = decision_field("d", minimum=-10, maximum=10)


def test_a_query_past_its_time_limit_is_unknown_never_covered_or_minimal() -> None:
    hard = contract(Boxes, (Rule("r", Field("a") * Field("b") * Field("c") * Field("d")
                                 - Field("a") * Field("a") * Field("c") > 7.3, Act.A),))
    result = analyse(hard, timeout_ms=1)
    assert result.unknown
    assert {r.status for r in result.regions} == {"unknown"}
    assert result.minimal_sets.status == "unknown"
    assert any("undecided within 1 ms" in w for w in result.warnings)
    assert not coverage(hard, result, []).regions_live  # nothing unknown counts as live


def test_a_query_whose_solver_timeout_is_lost_is_interrupted_and_the_solver_goes_on() -> None:
    import z3

    from handoffs.contracts._analysis._geometry import _Solver

    unknown: list[str] = []
    solver = _Solver(z3, 100, unknown)
    # z3's own limit off, as when its one cancel is lost: only the watchdog can end this
    # query (no positive cubes sum to a cube; z3 searches without end).
    solver.solver.set("timeout", 2**32 - 1)
    x, y, w = z3.Ints("x y w")
    solver.add(x > 0, y > 0, w > 0)
    assert solver.check("fermat", x * x * x + y * y * y == w * w * w) == ("unknown", None)
    assert unknown == ["fermat"]
    assert solver.solver.reason_unknown() == "canceled"
    status, model = solver.check("a cube", w * w * w == 27)  # the interrupt did not linger
    assert (status, model.eval(w).as_long()) == ("sat", 3)
    no_cube = w * w * w == 2
    status, core = solver.core("no cube", [no_cube])  # nor in core()
    assert (status, [str(term) for term in core]) == ("unsat", [str(no_cube)])


def test_a_boundary_pair_around_a_region_narrower_than_its_steps_covers_itself() -> None:
    # z3 may answer a pair on both sides of a region squeezed between two cuts: here
    # over-limit lies between claim_amount > 10000 and the likely-fraud product's cut,
    # 0.0005 wide at this fraud probability, so a step of δ or δ/2 from the likely-fraud
    # state overshoots it into pay. The pair's own states are on the boundary all the same.
    result = analyse(CLAIM_TRIAGE)
    fraud = Interval(0.0499999975, 0.0499999975)

    def view(amount: float) -> dict[str, Any]:
        return CLAIM_TRIAGE.view(CLAIM_TRIAGE.state(
            fraud_probability=fraud, claim_amount=amount, coverage=Coverage.FULL,
            policy_active=True))

    pair = (view(10000.0105), view(10000.0005))
    assert [CLAIM_TRIAGE.evaluate(s).rule for s in pair] == ["likely-fraud", "over-limit"]
    squeezed = Boundary(("likely-fraud", "over-limit"), ("INVESTIGATE", "PARTIAL_PAY"),
                        "claim_amount", "field", 0.1, pair, 10000.0055)
    alone = attrs.evolve(result, boundaries=(squeezed,))
    assert coverage(CLAIM_TRIAGE, alone, pair).boundaries_covered == 1
    # a likely-fraud state farther than δ from the cut is not on the boundary
    far = view(10000.2)
    assert CLAIM_TRIAGE.evaluate(far).rule == "likely-fraud"
    assert coverage(CLAIM_TRIAGE, alone, [far, pair[1]]).boundaries_covered == 0


def test_an_analysis_finds_the_same_states_whatever_the_process_asked_z3_before() -> None:
    import z3

    from handoffs.contracts.analysis import geometry

    def found() -> str:
        contract = claim_triage()  # a new object: no geometry cached for it
        analysis = analyse(contract)
        result = analysis.to_json()
        moves = [(t.name, repr(sorted(t.state.items()))) for t in geometry(contract).transitions]
        truth = next(r.witness for r in analysis.regions if r.witness is not None)
        return json.dumps([
            {k: result[k] for k in ("regions", "boundaries", "undetermined", "constraints")},
            moves,
            # every entry point whose answer holds a state z3 chose
            sufficiency(contract, ["claim_amount"]).to_json(),
            equivalence(contract, claim_triage(investigate_over=600.0, version="1.1.0")).state,
            minimal_sets(contract).to_json(),
            geometry(contract).certify_message(truth, ["claim_amount"], []),
        ], sort_keys=True, default=str)

    before = found()
    # the process's own terms and queries on z3's main context, as other code would make
    x, y, w = z3.Reals("x y w")
    solver = z3.Solver()
    for i in range(200):
        solver.push()
        solver.add(x * (i + 1) + y > w, w > i / 7, x < y)
        assert solver.check() == z3.sat
        solver.model()
        solver.pop()
    assert found() == before
    assert z3.main_ctx() is x.ctx  # the process's main context is its own again


def test_bad_options_are_refused_before_any_work() -> None:
    with pytest.raises(InvalidArgument, match="timeout_ms"):
        analyse(CLAIM_TRIAGE, timeout_ms=0)
    with pytest.raises(InvalidArgument, match="expected a handoffs Contract"):
        analyse("claim-triage")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="no decision fields"):
        sufficiency(CLAIM_TRIAGE, ["amount"])


def test_the_geometry_covers_itself_and_routine_cases_do_not() -> None:
    result = analyse(CLAIM_TRIAGE)
    assert coverage(CLAIM_TRIAGE, result, result.cover_states()).complete
    routine = [CLAIM_TRIAGE.state(fraud_probability=Interval(0.01, 0.02), claim_amount=100.0,
                                  coverage=Coverage.FULL, policy_active=True)] * 50
    found = coverage(CLAIM_TRIAGE, result, routine)
    assert found.regions_witnessed == ("pay",)
    assert found.boundaries_covered == 0
    assert "the cases miss" in found.line()


def test_the_testing_strategy_reaches_the_product_cut_on_both_sides() -> None:
    from hypothesis import find

    from handoffs.testing import states

    product = Field("fraud_probability") * Field("claim_amount")

    def near_cut(state: Any, rule: str) -> bool:
        view = CLAIM_TRIAGE.view(state)
        found = product.bounds(view)
        return (CLAIM_TRIAGE.evaluate(view).rule == rule and found is not None
                and abs(float(found[0]) - 500) <= 0.2 and abs(float(found[1]) - 500) <= 0.2)

    assert near_cut(find(states(CLAIM_TRIAGE), lambda s: near_cut(s, "likely-fraud")),
                    "likely-fraud")
    assert near_cut(find(states(CLAIM_TRIAGE), lambda s: near_cut(s, "pay")), "pay")


def test_a_field_reads_its_json_form_strictly_and_refuses_what_it_cannot_hold() -> None:
    """``FieldSpec.read``, the one reading of a decision field's JSON value (the lab's
    reference and falsehoods, the full-record receiver)."""
    specs = CLAIM_TRIAGE.field_map
    assert specs["coverage"].read("FULL") is Coverage.FULL
    assert specs["fraud_probability"].read({"lo": 0.1, "hi": 0.2}) == Interval(0.1, 0.2)
    assert specs["policy_active"].read(True) is True
    assert specs["claim_amount"].read(250) == 250
    for name, value, why in [
        ("coverage", "PARTIAL-ISH", "is not a valid enum"),
        ("coverage", 1, "is not a valid enum"),
        ("fraud_probability", {"lo": 0.1}, "exactly 'lo' and 'hi'"),
        ("fraud_probability", [0.1, 0.2], "exactly 'lo' and 'hi'"),
        ("policy_active", 1, "is not a valid bool"),
        ("policy_active", None, "is not a valid bool"),  # not optional: null refused
        ("claim_amount", "250", "is not a valid"),
        ("claim_amount", -1.0, "is not a valid"),  # below the declared minimum
    ]:
        with pytest.raises(InvalidArgument, match=why):
            specs[name].read(value)
    with pytest.raises(InvalidArgument):
        specs["fraud_probability"].read({"lo": 0.3, "hi": 0.2})  # the interval's own check


def test_a_message_is_certified_alike_on_any_z3_context_and_call_after_call() -> None:
    """certify_message keeps one analyser per contract and z3 main context: asked again,
    or inside another main context (whose terms cannot mix with the first's), it gives
    the same certificate."""
    from handoffs._solver import fresh_context
    from handoffs.contracts.analysis import geometry

    contract = claim_triage()  # a new object: no geometry cached for it
    truth = next(r.witness for r in analyse(contract).regions if r.witness is not None)
    found = geometry(contract)
    first = found.certify_message(truth, ["claim_amount"], [])
    assert first["method"] == "certified"
    assert found.certify_message(truth, ["claim_amount"], []) == first
    with fresh_context():
        assert found.certify_message(truth, ["claim_amount"], []) == first
    assert found.certify_message(truth, ["claim_amount"], []) == first
    whole = [s.name for s in contract.fields]
    assert found.certify_message(truth, whole, [])["minimal"] is False


def _certify_in_child(connection: Any, truth: Any) -> None:
    import os

    from handoffs.contracts.analysis import geometry

    found = geometry(CLAIM_TRIAGE)
    certificate = found.certify_message(truth, ["claim_amount"], [])
    made_in = [kept[0] for kept, _ in found._certifiers]
    connection.send((certificate, made_in == [os.getpid()]))
    connection.close()


def test_a_forked_child_certifies_while_a_parent_thread_holds_the_certifier() -> None:
    """The process's z3 lock, which certifying holds, is the child's own after a fork: a
    child forked while a thread of its parent certifies does not wait for a thread it
    does not have, nor take over the solver that thread was asking (it makes its own)."""
    import multiprocessing

    from handoffs._solver import main_context
    from handoffs.contracts.analysis import geometry

    truth = next(r.witness for r in analyse(CLAIM_TRIAGE).regions if r.witness is not None)
    expected = geometry(CLAIM_TRIAGE).certify_message(truth, ["claim_amount"], [])
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    with main_context():  # as a thread of this process certifying would
        child = context.Process(target=_certify_in_child, args=(send, truth), daemon=True)
        child.start()
        send.close()
        answered = receive.poll(60)
    child.kill()
    child.join()
    assert answered, "the forked child waited for its parent's lock"
    assert receive.recv() == (expected, True)


def test_a_query_out_of_time_makes_its_certificate_unknown_and_not_the_next(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept analyser's undecided queries are each certificate's own: one whose
    queries ran out of time is ``unknown`` and says which, the next is certified."""
    from handoffs.contracts.analysis import geometry

    contract = claim_triage()  # a new object: no geometry cached for it
    truth = next(r.witness for r in analyse(contract).regions if r.witness is not None)
    found = geometry(contract)
    assert found.certify_message(truth, ["claim_amount"], [])["method"] == "certified"
    ((_, analyser),) = found._certifiers
    monkeypatch.setattr(analyser.solver, "_solve", lambda *_: analyser.z3.unknown)
    late = found.certify_message(truth, ["claim_amount"], [])
    assert late["method"] == "unknown"
    assert late["reason"].startswith("sufficiency of ['claim_amount']")
    monkeypatch.undo()
    again = found.certify_message(truth, ["claim_amount"], [])
    assert again["method"] == "certified"
    assert again == found.certify_message(truth, ["claim_amount"], [])


def test_certifying_waits_while_another_thread_runs_z3_on_a_fresh_context() -> None:
    """A fresh-context run swaps the process's main context: a certificate asked
    meanwhile would make its terms on the other run's context. It waits for the run to
    end, then certifies as ever."""
    import threading

    from handoffs._solver import fresh_context
    from handoffs.contracts.analysis import geometry

    truth = next(r.witness for r in analyse(CLAIM_TRIAGE).regions if r.witness is not None)
    expected = geometry(CLAIM_TRIAGE).certify_message(truth, ["claim_amount"], [])
    found: list[Any] = []
    done = threading.Event()

    def certify() -> None:
        found.append(geometry(CLAIM_TRIAGE).certify_message(truth, ["claim_amount"], []))
        done.set()

    with fresh_context():
        asking = threading.Thread(target=certify)
        asking.start()
        waited = not done.wait(0.5)
    asking.join(60)
    assert waited, "a certificate was made while another run held z3's main context"
    assert found == [expected]
