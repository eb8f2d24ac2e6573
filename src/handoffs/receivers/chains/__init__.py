"""Handoff chains: the format, schema, builders and receiver contract for multi-hop,
signed handoffs (identity composition).

A *handoff chain* (contract ``handoff-chain/2.0.0``) carries a case across agents.
Every hop is its own signed document: the agent that changes the content emits a new
hop whose ``derived_from`` pins the digest of the hop it received, proofs included
(signing anchors §6, "stable receipt + new signed transformation"). An approval is not
a hop: it is a Data Integrity proof *chained* (``previousProof``) to the proposer's
proof on the proposal hop, so it covers the exact proposal and the proposer's
signature.

**The envelope is signed end to end.** Every hop carries the envelope's ``id`` as its
``chain_id`` and the envelope's ``case_id``, under its own proof (and under every
approval, which signs the same hop). So each signer commits to the one chain it
extends, not only to its parent: a changed envelope ``id`` or ``case_id``
(``chain-id-mismatch``, ``case-mismatch``), a hop taken from another chain
(``chain-id-mismatch``, ``chain-broken``), and reordered, dropped or inserted hops
(``hop-order``, ``chain-broken``, ``wrong-audience``) are refused at step (2). The
alternative, one proof by the last hop over the whole envelope, was not chosen: it
would let the last signer re-wrap earlier hops, signed for one chain, into a new
chain of its own, so an investigator's signed statement could be spent twice. The
``id`` is therefore a signed, replay-safe identifier, which version 1.0.0's was not;
1.0.0 chains are refused (``unknown-contract``), since nothing in them binds the id.

**Replay.** The receiver claims the chain in its :class:`~handoffs.receivers.ReplayStore`
(the gate's store: in memory by default, SQLite or PostgreSQL across processes) once
step (2) has passed, until the chain's earliest expiry; the second time it is refused
as ``replayed``, and a store that cannot answer fails closed
(``replay-store-unavailable``). The claim is ``handoff-chain:<id>/<hops>``: the signed
id and the number of hops, because a chain grows as it travels and each extension is
a new message to a new receiver (several receivers may share one store), while a
chain re-sent as is, to anyone, is the same claim. The prefix keeps chain claims apart
from receipt ids (``urn:uuid:…``) in a store shared with a receipt gate.

:class:`IdentityCompositionReceiver` admits a chain only when, in this order (the
stages of the one admission pipeline, ``handoffs.receivers._pipeline``; the step
numbers match :class:`~handoffs.receivers.Step` and the docs; the clock is read first,
for step 2):

(1) parse: limits, strict JSON, the contract the message names, hop count, the
    closed JSON Schema and the typed model;

(2) proofs: every proof verifies against the pinned key ring; each hop's signer *is*
    its ``sender`` and held the claimed role when it signed, and every approval was
    signed by a key holding ``approver`` — all according to the key ring, never the
    message text; then the lineage (hop numbers and role order, digests, the envelope's
    ``id`` and case as every hop signed them, principal alignment, audience), the
    chain's validity (earliest expiry) and replay (the chain claimed in the store);

(5) policy: authority only narrows (DECIDE needs an approval over the exact proposal),
    validity never extends, separation of duties, required roles. A chain that is
    sound but lacks a required approval is escalated, not rejected.

The receiver never raises on a message: every failure is a
:class:`~handoffs.receivers.Decision` with typed, stable reason codes (an unexpected
one, a bug, is ``receiver-error``).

One module per concern: the contract's vocabulary, the JSON Schema, the typed format and
its builders, separation of duties and the receiver.
"""

from handoffs.receivers.chains._contract import HopRole
from handoffs.receivers.chains._duties import SeparationOfDuties
from handoffs.receivers.chains._format import DerivedFrom, HandoffChain, Hop
from handoffs.receivers.chains._receiver import (
    DEFAULT_CHAIN_MAX_AGE,
    IdentityCompositionReceiver,
)

__all__ = [
    "DEFAULT_CHAIN_MAX_AGE",
    "DerivedFrom",
    "HandoffChain",
    "Hop",
    "HopRole",
    "IdentityCompositionReceiver",
    "SeparationOfDuties",
]
