"""Lab wiring for the claim-triage contract with a dead rule (``handoffs lab run
--strict`` in tests/unit/test_analysis_cli.py): governance, encoder and handler."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from typing import Any

from claim_triage import WITH_DEAD_RULE
from handoffs.contracts import GovernanceService, ReceiptEncoder, Registry
from handoffs.receivers import (
    Gate,
    StrictContractReceiver,
    UnsafeConfigurationWarning,
    UnsafeNoProofs,
)

GOVERNANCE = GovernanceService(sender="claims-intake", receiver="claims-handler",
                               policy_version="CLAIMS-1",
                               valid_until=datetime(2027, 1, 1, tzinfo=UTC))


def encoder() -> ReceiptEncoder[Any, Any, Any]:
    """The full decisive state."""
    return ReceiptEncoder(contract=WITH_DEAD_RULE, state_of=lambda case: case.state)


def handler() -> StrictContractReceiver:
    """Recomputes the policy. **Unsafe by declaration:** lab receipts carry no proofs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeConfigurationWarning)
        gate = Gate(identity="claims-handler", trust=UnsafeNoProofs(),
                    registry=Registry.of(WITH_DEAD_RULE), replay=None,
                    clock=lambda: datetime(2026, 6, 1, tzinfo=UTC))
    return StrictContractReceiver(gate)
