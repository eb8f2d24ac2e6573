"""Model receivers: a language model behind an OpenAI-compatible API, behind the gate.

A :class:`ModelReceiver` asks a model to pick one of the contract's actions, through
a :class:`ChatClient` (:class:`OpenAICompatibleClient` for any OpenAI-compatible
server), with the structured-output schema :meth:`ModelReceiver.action_schema`; it stands behind a
:class:`~handoffs.receivers.Gate`, so the model only ever sees admitted receipts.
A :class:`ChatRequest` goes out, a :class:`Completion` comes back naming the
served model that answered; a failed call is a :class:`ModelError`.
"""

from handoffs.receivers._chat import (
    ChatClient,
    ChatRequest,
    Completion,
    ModelError,
    OpenAICompatibleClient,
    ServedModel,
)
from handoffs.receivers._model import ModelReceiver

__all__ = [
    "ChatClient",
    "ChatRequest",
    "Completion",
    "ModelError",
    "ModelReceiver",
    "OpenAICompatibleClient",
    "ServedModel",
]
