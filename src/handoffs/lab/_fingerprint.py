"""The receiver fingerprint: what decoded the messages a release was measured with.

The essay asks that the sender's encoder and the receiver's decoder be versioned
together: a model upgrade can change how compact state is read. A receiver's
fingerprint is a record of what it *declares* plus a digest over it:

* a model receiver (:class:`~handoffs.receivers.models.ModelReceiver`): the route, the
  prompt template and system message digest, the sampling parameters, the response
  format and the tools; and, *observed* at run time from the responses (never part
  of the digest, which must be computable without calling the model), the model as
  the server names it, its ``system_fingerprint`` and the ``Server`` header, where
  the API gives them;
* a function receiver (:class:`~handoffs.receivers.FunctionReceiver`): the callable's
  qualified name and source digest, its prompt digest, route and tools;
* any other receiver (code): its class's qualified name and source digest.

The lab records every strategy's receiver fingerprint in the report (each strategy's
``Strategy.to_json()``) and the release artefact; ``handoffs lab gate --experiment``
refuses a release whose receivers have changed since it was measured
(``--allow-stale-receiver`` to accept it, loudly).
"""

from __future__ import annotations

from typing import Any

from handoffs._callables import callable_digest
from handoffs._json import digest

__all__ = ["receiver_fingerprint"]


def receiver_fingerprint(receiver: Any) -> dict[str, Any]:
    """The receiver's fingerprint record: ``kind`` (``model`` or ``code``), ``name``,
    what it declares, ``digest`` (``sha256:`` over those) and, for a model receiver
    that has answered, ``served``: every distinct served identity it has seen.
    """
    from handoffs.receivers import FunctionReceiver
    from handoffs.receivers.models import ModelReceiver

    name = str(getattr(receiver, "name", type(receiver).__name__))
    body: dict[str, Any]
    if isinstance(receiver, ModelReceiver):
        body = {"kind": "model", "name": name, **receiver.declaration()}
    elif isinstance(receiver, FunctionReceiver):
        body = {"kind": "code", "name": name, **callable_digest(receiver.fn),
                **receiver.record}
    else:
        body = {"kind": "code", "name": name, **callable_digest(type(receiver))}
    out = {**body, "digest": digest(body)}
    if isinstance(receiver, ModelReceiver):
        out["served"] = receiver.served()
    return out
