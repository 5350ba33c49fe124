"""The one flax API difference the training examples meet, in one place.

nnx.Optimizer.update takes the model from flax 0.11 on; flax 0.10, the last release for
Python 3.10, keeps a reference to the model and takes only the gradients.
"""

from __future__ import annotations

import inspect

from flax import nnx

_UPDATE_TAKES_MODEL = "model" in inspect.signature(nnx.Optimizer.update).parameters


def apply_gradients(optimizer: nnx.Optimizer, model: nnx.Module, grads: nnx.State) -> None:
    """One optimizer step on the model's parameters, in place, under either flax API."""
    if _UPDATE_TAKES_MODEL:
        optimizer.update(model, grads)
    else:
        optimizer.update(grads)
