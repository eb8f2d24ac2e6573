"""The command line: exit codes, one-line errors, and each command end to end."""

from __future__ import annotations

import json
import stat
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import click
import pytest
from click.testing import CliRunner, Result

import handoffs
from handoffs._json import dumps
from handoffs.cli import main
from handoffs.contracts import Authority, Receipt
from handoffs.contracts._signing import issue_grant
from handoffs.examples.payment import (
    GOVERNANCE,
    PAYMENT_RELEASE,
    decision_contract_encoder,
    synthetic_cases,
)
from handoffs.integrity import SigningKey, sign
from worlds.repo import CHECKED_IN, SCHEMAS


def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="handoffs", env=env)


def one_error_line(result: Result) -> str:
    """The stderr of a failed command: exactly one line, ``error: ...``, no traceback."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    return lines[0]


def test_version() -> None:
    result = run("--version")
    assert (result.exit_code, result.stdout) == (0, f"handoffs, version {handoffs.__version__}\n")


def test_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in ("schema", "keys", "sign", "verify"):
        assert command in result.stdout


def test_a_group_without_a_command_shows_its_help_and_exits_2() -> None:
    result = run("schema")
    assert result.exit_code == 2
    assert "Commands:" in result.stderr


# ------------------------------------------------------------------- schema export


def test_schema_export_writes_and_checks(tmp_path: Path) -> None:
    written = run("schema", "export", tmp_path)
    target = tmp_path / "payment-release" / "1.0.0.json"
    policy = tmp_path / "payment-release" / "1.0.0.policy.json"
    chain = tmp_path / "handoff-chain" / "2.0.0.json"
    assert (written.exit_code, written.stdout) == (
        0, f"wrote {target}\nwrote {policy}\nwrote {chain}\n")
    assert target.read_text("utf-8") == CHECKED_IN.read_text("utf-8")
    again = run("schema", "export", tmp_path)
    assert (again.exit_code, again.stdout) == (
        0, f"unchanged {target}\nunchanged {policy}\nunchanged {chain}\n")
    check = run("schema", "export", tmp_path, "--check")
    assert (check.exit_code, check.stdout) == (0, f"ok: 3 file(s) up to date in "
                                                  f"{tmp_path}\n")


def test_schema_export_check_reports_drift_without_writing(tmp_path: Path) -> None:
    run("schema", "export", tmp_path)
    target = tmp_path / "payment-release" / "1.0.0.json"
    text = target.read_text("utf-8")
    target.write_text(text.replace("\n", "\n  "), encoding="utf-8")  # same content
    result = run("schema", "export", tmp_path, "--check")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"reformatted: {target} (payment-release/1.0.0, same content)",
        f"error: 1 file(s) missing or reformatted; run 'handoffs schema export {tmp_path}' "
        "(it writes only these, and no released version changes) [schema-drift]",
    ]
    assert target.read_text("utf-8") != text
    target.write_text("{}\n", encoding="utf-8")  # a released schema edited
    changed = run("schema", "export", tmp_path, "--check")
    assert changed.exit_code == 1
    assert changed.stderr.splitlines()[0].startswith(
        f"changed: payment-release/1.0.0 is released ({tmp_path / 'payment-release'}")
    assert "publish the change as payment-release/" in changed.stderr
    assert "run 'handoffs schema export" not in changed.stderr
    assert target.read_text("utf-8") == "{}\n"
    target.unlink()
    (tmp_path / "payment-release" / "1.0.0.policy.json").unlink()
    missing = run("schema", "export", tmp_path, "--check")
    assert missing.exit_code == 1
    assert missing.stderr.splitlines()[0] == (
        f"missing: {target} (payment-release/1.0.0, not yet exported)")
    assert not target.exists()


def test_the_repository_schemas_are_up_to_date() -> None:
    assert run("schema", "export", SCHEMAS, "--check").exit_code == 0


# --------------------------------------------------------------------- schema diff


def _breaking_schema(tmp_path: Path) -> Path:
    """The schema of a 1.1.0 with shorter notes, its policy document beside it."""

    contract = attrs.evolve(PAYMENT_RELEASE, version="1.1.0", max_notes_length=10)
    path = tmp_path / "1.1.0.json"
    path.write_text(json.dumps(contract.json_schema()), encoding="utf-8")
    (tmp_path / "1.1.0.policy.json").write_text(json.dumps(contract.policy_document()),
                                                encoding="utf-8")
    return path


def test_schema_diff_identical_exits_0() -> None:
    result = run("schema", "diff", "payment-release/1.0.0", CHECKED_IN)
    assert (result.exit_code, result.stdout) == (
        0, "payment-release/1.0.0 → payment-release/1.0.0: no differences\n")


def test_schema_diff_breaking_exits_1(tmp_path: Path) -> None:
    result = run("schema", "diff", CHECKED_IN, _breaking_schema(tmp_path))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "payment-release/1.0.0 → payment-release/1.1.0: breaking, required bump major, "
        "1 finding",
        "  FIELD_BOUNDS_NARROWED @ $.notes [WIRE, BACKWARD, BREAKING]: maxLength 2000 → 10: "
        "old receipts may fall outside the new bounds",
    ]
    assert result.stderr == ""


def test_schema_diff_formats(tmp_path: Path) -> None:
    new = _breaking_schema(tmp_path)
    as_json = run("schema", "diff", CHECKED_IN, new, "--format", "json")
    report = json.loads(as_json.stdout)
    assert (report["breaking"], report["required_bump"]) == (True, "major")
    assert [f["code"] for f in report["findings"]] == ["FIELD_BOUNDS_NARROWED"]
    markdown = run("schema", "diff", CHECKED_IN, new, "--format", "markdown")
    assert markdown.stdout.startswith("# Contract diff: `payment-release/1.0.0`")
    assert markdown.exit_code == 1


def test_schema_diff_check_version(tmp_path: Path) -> None:
    result = run("schema", "diff", CHECKED_IN, _breaking_schema(tmp_path), "--check-version")
    assert result.exit_code == 1
    assert one_error_line(result) == (
        "error: 1.0.0 → 1.1.0 is a minor bump but the changes need a major bump (1 finding; "
        "first: FIELD_BOUNDS_NARROWED @ $.notes) @ $.version [version-bump-too-small]")
    widened = attrs.evolve(PAYMENT_RELEASE, version="1.1.0",
                           max_notes_length=4000).json_schema()
    path = tmp_path / "widened.json"
    path.write_text(json.dumps(widened), encoding="utf-8")
    assert run("schema", "diff", CHECKED_IN, path, "--check-version").exit_code == 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("nope/1.0.0", CHECKED_IN),
         "error: Invalid value for OLD: unknown contract 'nope/1.0.0'; known: "
         "payment-release/1.0.0 (the shipped example: nothing is configured); add yours "
         "with --contracts MODULE:ATTR, HANDOFFS_CONTRACTS or [tool.handoffs] contracts "
         "(see 'handoffs contracts') (see 'handoffs schema diff --help') [usage]"),
        ((CHECKED_IN, "missing.json"),
         "error: Invalid value for NEW: 'missing.json' is neither a schema file nor a "
         "contract id like payment-release/1.0.0 (see 'handoffs schema diff --help') [usage]"),
        ((CHECKED_IN,),
         "error: Missing argument 'NEW'. (see 'handoffs schema diff --help') [usage]"),
        ((CHECKED_IN, CHECKED_IN, "--format", "yaml"),
         "error: Invalid value for '--format': 'yaml' is not one of 'text', 'json', "
         "'markdown'. (see 'handoffs schema diff --help') [usage]"),
    ],
    ids=["unknown-contract", "missing-file", "missing-argument", "bad-format"],
)
def test_schema_diff_usage_errors_exit_2(args: Sequence[str | Path], expected: str) -> None:
    result = run("schema", "diff", *args)
    assert result.exit_code == 2
    assert one_error_line(result) == expected


def test_a_malformed_schema_file_is_one_line_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "object", "type": "array"}', encoding="utf-8")
    result = run("schema", "diff", bad, CHECKED_IN)
    assert result.exit_code == 1
    assert one_error_line(result) == f"error: schema {bad}: duplicate key 'type' @ $ " \
                                     "[duplicate-key]"


# ---------------------------------------------------------------- keys, sign, verify


def test_keys_new_writes_a_private_pem_and_an_entry(tmp_path: Path) -> None:
    prefix = tmp_path / "sender"
    result = run("keys", "new", "--controller", "evidence-specialist", "--roles",
                 "proposer, approver", "--out", prefix, "--not-before", "2026-01-01T00:00:00Z")
    assert result.exit_code == 0, result.output
    entry = json.loads(result.stdout)
    assert entry["controller"] == "evidence-specialist"
    assert entry["roles"] == ["approver", "proposer"]
    assert entry["not_before"] == "2026-01-01T00:00:00Z"
    assert json.loads((tmp_path / "sender.key.json").read_text("utf-8")) == entry
    pem = tmp_path / "sender.pem"
    assert stat.S_IMODE(pem.stat().st_mode) == 0o600
    assert SigningKey.from_pem(pem.read_bytes()).public_key_multibase == (
        entry["public_key_multibase"])
    again = run("keys", "new", "--controller", "evidence-specialist", "--out", prefix)
    assert again.exit_code == 2
    assert one_error_line(again) == f"error: File exists: {pem} [io]"


def test_keys_new_writes_nothing_when_either_file_exists(tmp_path: Path) -> None:
    (tmp_path / "k.key.json").write_text("{}", encoding="utf-8")
    result = run("keys", "new", "--controller", "a", "--out", tmp_path / "k")
    assert result.exit_code == 2
    assert one_error_line(result) == f"error: File exists: {tmp_path / 'k.key.json'} [io]"
    assert not (tmp_path / "k.pem").exists()


def test_keys_new_encrypts_with_a_passphrase_from_the_environment(tmp_path: Path) -> None:
    prefix = tmp_path / "k"
    missing = run("keys", "new", "--controller", "a", "--out", prefix,
                  "--passphrase-env", "HANDOFFS_TEST_PASS")
    assert missing.exit_code == 2
    assert "HANDOFFS_TEST_PASS is not set" in one_error_line(missing)
    result = run("keys", "new", "--controller", "a", "--out", prefix,
                 "--passphrase-env", "HANDOFFS_TEST_PASS", env={"HANDOFFS_TEST_PASS": "s3cret"})
    assert result.exit_code == 0, result.output
    assert b"ENCRYPTED" in (tmp_path / "k.pem").read_bytes()
    SigningKey.from_pem((tmp_path / "k.pem").read_bytes(), b"s3cret")


@attrs.frozen
class Signed:
    """Files for a sign/verify round: receipt, keys, grant, trust file."""

    root: Path

    def __getattr__(self, name: str) -> Path:
        return self.root / {"receipt": "receipt.json", "grant": "grant.json",
                            "trust": "trust.json", "sender": "sender.pem",
                            "signed": "signed.json"}[name]


@pytest.fixture
def files(tmp_path: Path) -> Signed:
    since = "2026-01-01T00:00:00Z"
    for args in (
        ("--controller", "evidence-specialist", "--roles", "proposer", "--out",
         tmp_path / "sender"),
        ("--controller", "policy-service", "--roles", "policy-service", "--purposes",
         "capabilityDelegation", "--out", tmp_path / "policy"),
    ):
        result = run("keys", "new", *args, "--trust", tmp_path / "trust.json",
                     "--not-before", since)
        assert result.exit_code == 0, result.output
    case = next(iter(synthetic_cases()))
    receipt = Receipt.build(PAYMENT_RELEASE, decision_contract_encoder().encode(case),
                            GOVERNANCE.stamp(case_id=case.case_id,
                                             evidence_refs=case.evidence_refs))
    grant = issue_grant(
        SigningKey.from_pem((tmp_path / "policy.pem").read_bytes()), issuer="policy-service",
        subject=receipt.sender, audience=receipt.receiver, contract=PAYMENT_RELEASE,
        case_id=receipt.case_id, policy_version=receipt.policy_version,
        authority=[Authority.ADVISE], valid_until=receipt.valid_until,
        created=datetime(2026, 6, 1, tzinfo=UTC),
    )
    (tmp_path / "receipt.json").write_text(dumps(receipt.to_json()), encoding="utf-8")
    (tmp_path / "grant.json").write_text(dumps(grant), encoding="utf-8")
    return Signed(tmp_path)


def _sign(files: Signed) -> dict[str, Any]:
    result = run("sign", files.receipt, "--key", files.sender, "--grant", files.grant,
                 "--created", "2026-06-01T00:00:00Z")
    assert result.exit_code == 0, result.output
    signed: dict[str, Any] = json.loads(result.stdout)
    files.signed.write_text(json.dumps(signed), encoding="utf-8")
    return signed


def test_sign_then_verify(files: Signed) -> None:
    signed = _sign(files)
    assert signed["proof"]["proofPurpose"] == "assertionMethod"
    assert signed["grant"]["type"] == "AuthorityGrant"
    result = run("verify", files.signed, "--trust", files.trust, "--as", "case-owner",
                 "--now", "2026-06-01T00:30:00Z")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"valid: {signed['id']} (payment-release/1.0.0) from evidence-specialist to "
        "case-owner, signed by evidence-specialist; policy pinned by the grant matches\n")


@pytest.mark.parametrize(
    ("edit", "options", "expected"),
    [
        (None, ("--as", "auditor"),
         "error: addressed to 'case-owner', this receiver is 'auditor' @ $.receiver "
         "[wrong-audience]"),
        (None, ("--now", "2027-06-01T00:00:00Z"),
         "error: the authority grant has expired @ $.grant.valid_until [grant-expired]"),
        ({"decision_state": {"high_value": True}}, (), "[bad-signature]"),
        ({"contract": "payment-release/2.0.0"}, (),
         "error: unknown contract 'payment-release/2.0.0'; known versions: 1.0.0 @ $.contract "
         "[unknown-contract]"),
    ],
    ids=["wrong-audience", "expired", "tampered", "unknown-version"],
)
def test_verify_refuses_with_one_line(files: Signed, edit: dict[str, Any] | None,
                                      options: tuple[str, ...], expected: str) -> None:
    signed = _sign(files)
    for key, value in (edit or {}).items():
        if isinstance(value, dict):
            signed[key].update(value)
        else:
            signed[key] = value
    files.signed.write_text(json.dumps(signed), encoding="utf-8")
    result = run("verify", files.signed, "--trust", files.trust, "--as", "case-owner",
                 "--now", "2026-06-01T00:30:00Z", *options)
    assert result.exit_code == 1
    line = one_error_line(result)
    assert line == expected or line.endswith(expected)


def test_verify_usage_errors_exit_2(files: Signed) -> None:
    bad_time = run("verify", files.receipt, "--trust", files.trust, "--now", "yesterday")
    assert bad_time.exit_code == 2
    assert "expected an RFC 3339 UTC time" in one_error_line(bad_time)
    no_trust = run("verify", files.receipt, "--trust", files.root / "none.json")
    assert no_trust.exit_code == 2
    assert "does not exist" in one_error_line(no_trust)
    _sign(files)
    for audience in ((), ("--as", "case-owner", "--any-audience")):
        unchosen = run("verify", files.signed, "--trust", files.trust, *audience)
        assert unchosen.exit_code == 2
        assert "--any-audience explicitly" in one_error_line(unchosen)
    chosen = run("verify", files.signed, "--trust", files.trust, "--any-audience",
                 "--now", "2026-06-01T00:30:00Z")
    assert chosen.exit_code == 0, chosen.output


def test_sign_refuses_an_invalid_receipt(files: Signed) -> None:
    doc = json.loads(files.receipt.read_text("utf-8"))
    doc["decision_state"]["policy_current"] = "yes"
    files.receipt.write_text(json.dumps(doc), encoding="utf-8")
    result = run("sign", files.receipt, "--key", files.sender)
    assert result.exit_code == 1
    assert one_error_line(result) == (
        "error: expected a boolean, got 'yes' @ $.decision_state.policy_current "
        "[schema-invalid]")


def test_verbose_adds_the_traceback(files: Signed) -> None:
    files.signed.write_text("[]", encoding="utf-8")
    quiet = run("verify", files.signed, "--trust", files.trust, "--any-audience")
    assert one_error_line(quiet) == "error: receipt " + str(files.signed) + \
        " is not a JSON object @ $ [not-an-object]"
    loud = run("-v", "verify", files.signed, "--trust", files.trust, "--any-audience")
    assert loud.exit_code == 1
    assert "Traceback (most recent call last)" in loud.stderr
    assert loud.stderr.splitlines()[-1] == quiet.stderr.strip()


def test_internal_errors_exit_2_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("handoffs.contracts.versions.ContractDiff.between_policies", broken)
    result = run("schema", "diff", "payment-release/1.0.0", "payment-release/1.0.0")
    assert result.exit_code == 2
    assert one_error_line(result) == ("error: internal error: RuntimeError: boom [internal] "
                                      "(rerun with -v for the traceback)")
    loud = run("-v", "schema", "diff", "payment-release/1.0.0", "payment-release/1.0.0")
    assert "Traceback" in loud.stderr
    assert 'raise RuntimeError("boom")' in loud.stderr


def _grant_args(files: Signed, **changes: str) -> list[str | Path]:
    options = {
        "--key": str(files.root / "policy.pem"), "--issuer": "policy-service",
        "--subject": "evidence-specialist", "--audience": "case-owner",
        "--contract": "payment-release/1.0.0", "--case": "routine-01",
        "--policy-version": "PAY-7.4", "--valid-until": "2027-01-01T00:00:00Z",
        "--created": "2026-06-01T00:00:00Z", **changes,
    }
    return ["grant", *(item for pair in options.items() for item in pair)]


def test_grant_command_issues_what_verify_accepts(files: Signed) -> None:
    result = run(*_grant_args(files))
    assert result.exit_code == 0, result.output
    grant = json.loads(result.stdout)
    assert (grant["type"], grant["authority"], grant["proof"]["proofPurpose"]) == (
        "AuthorityGrant", ["ADVISE"], "capabilityDelegation")
    files.grant.write_text(result.stdout, encoding="utf-8")
    _sign(files)
    verified = run("verify", files.signed, "--trust", files.trust, "--as", "case-owner",
                   "--now", "2026-06-01T00:30:00Z")
    assert verified.exit_code == 0, verified.output


@pytest.mark.parametrize(
    ("changes", "line"),
    [({"--case": "routine-02"},
      "error: grant case_id is 'routine-02', the receipt says 'routine-01' @ $.case_id "
      "[grant-mismatch]"),
     ({"--audience": "payments"},
      "error: grant audience is 'payments', the receipt says 'case-owner' @ $.receiver "
      "[grant-mismatch]"),
     ({"--authority": "DECIDE"},
      "error: authority ADVISE is not granted to 'evidence-specialist' @ $.authority "
      "[authority-not-granted]"),
     ({"--valid-until": "2026-06-01T00:10:00Z"},
      "error: valid_until 2027-01-01T00:00:00Z exceeds the grant's 2026-06-01T00:10:00Z "
      "@ $.valid_until [validity-exceeds-grant]")],
)
def test_sign_refuses_a_grant_that_does_not_cover_the_receipt(
        files: Signed, changes: dict[str, str], line: str) -> None:
    files.grant.write_text(run(*_grant_args(files, **changes)).stdout, encoding="utf-8")
    result = run("sign", files.receipt, "--key", files.sender, "--grant", files.grant,
                 "--created", "2026-06-01T00:00:00Z")
    assert result.exit_code == 1
    assert result.stdout == ""  # nothing signed
    assert one_error_line(result) == line


def test_grant_for_another_case_is_refused_at_verify(files: Signed) -> None:
    """A receipt signed around ``handoffs sign`` (which would refuse it) still fails."""
    files.grant.write_text(run(*_grant_args(files, **{"--case": "routine-02"})).stdout,
                           encoding="utf-8")
    document = {**json.loads(files.receipt.read_text(encoding="utf-8")),
                "grant": json.loads(files.grant.read_text(encoding="utf-8"))}
    sender = SigningKey.from_pem(files.sender.read_bytes())
    files.signed.write_text(dumps(sign(document, sender, purpose="assertionMethod",
                                       created=datetime(2026, 6, 1, tzinfo=UTC))),
                            encoding="utf-8")
    result = run("verify", files.signed, "--trust", files.trust, "--as", "case-owner",
                 "--now", "2026-06-01T00:30:00Z")
    assert result.exit_code == 1
    assert one_error_line(result) == (
        "error: grant case_id is 'routine-02', the receipt says 'routine-01' @ $.case_id "
        "[grant-mismatch]")


@pytest.mark.parametrize(
    ("changes", "code"),
    [({"--contract": "payment-release/9.9.9"}, "[unknown-contract]"),
     ({"--authority": "OVERRIDE"}, "[usage]")],
)
def test_grant_command_refuses_bad_options(files: Signed, changes: dict[str, str],
                                           code: str) -> None:
    result = run(*_grant_args(files, **changes))
    assert result.exit_code in (1, 2)
    assert one_error_line(result).endswith(code)


def test_the_table_help_is_each_commands_own() -> None:
    from handoffs.cli import COMMANDS

    listed = run("--help").output
    for name, entry in COMMANDS.items():
        command = main.get_command(click.Context(main), name)
        assert command is not None, name
        assert command.name == name
        assert command.get_short_help_str(limit=1000) == entry.summary, name
        assert f"  {name} " in listed
