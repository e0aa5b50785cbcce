"""The hooks and parameters of a model at one moment: how the base class checks that a model was restored.

:meth:`ModelState.capture` records every forward/backward (pre-)hook of every module
and, per parameter, its identity, storage, dtype, device, shape, ``requires_grad``,
autograd version counter and a strided sample of its values; :meth:`ModelState.check`
raises :class:`~interventions.fitted.InterventionError` naming each difference.
Cheap on a large model (a few dozen values per parameter), so it runs on every
``apply`` and ``fit``.
"""
from __future__ import annotations

from .fitted import InterventionError


class ModelState:
    """The hooks and parameters of a model at one moment, to check that an intervention left it as it was.

    Parameters are compared by identity, storage, dtype, device, shape, ``requires_grad``, autograd
    version counter (any in-place change bumps it) and a strided sample of their values (which
    also catches writes through ``.data``)."""

    SAMPLES = 64

    def __init__(self, hooks: dict, params: dict) -> None:
        self.hooks, self.params = hooks, params

    @classmethod
    def capture(cls, model) -> "ModelState":
        """The state of ``model`` now."""
        import torch
        hooks = {}
        for name, mod in model.named_modules():
            for kind in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"):
                keys = tuple(getattr(mod, kind, {}) or {})
                if keys:
                    hooks[(name or "<model>", kind.strip("_"))] = keys
        params = {}
        with torch.no_grad():
            for name, p in model.named_parameters():
                flat = p.detach().reshape(-1)
                step = max(1, flat.numel() // cls.SAMPLES)
                params[name] = ((id(p), p.data_ptr(), p.dtype, p.device, tuple(p.shape), p.requires_grad,
                                 p._version), flat[::step].clone())
        return cls(hooks, params)

    def differences(self, model) -> list[str]:
        """What differs between this state and ``model`` now (empty when nothing does)."""
        import torch
        now = ModelState.capture(model)
        out = [f"hook(s) {kind} on {mod!r}" for (mod, kind), keys in now.hooks.items()
               if set(keys) - set(self.hooks.get((mod, kind), ()))]
        out += [f"hook(s) {kind} on {mod!r} removed" for (mod, kind), keys in self.hooks.items()
                if set(keys) - set(now.hooks.get((mod, kind), ()))]
        if set(now.params) != set(self.params):
            out.append(f"parameters added or removed: {sorted(set(now.params) ^ set(self.params))[:5]}")
        for name, (meta, sample) in self.params.items():
            if name in now.params:
                meta2, sample2 = now.params[name]
                if meta2 != meta or not torch.equal(sample2, sample):
                    out.append(f"parameter {name!r} changed")
        return out

    def check(self, model, what: str) -> None:
        """Raise :class:`InterventionError` naming every difference between this state and ``model``."""
        diff = self.differences(model)
        if diff:
            more = f" (+{len(diff) - 5} more)" if len(diff) > 5 else ""
            raise InterventionError(f"{what}: the model is not as it was: {'; '.join(diff[:5])}{more}")


def weights_digest(model) -> str:
    """The sha256 of every parameter and buffer of ``model`` (names, dtypes, shapes and all their bytes): two
    equal digests mean the weights are bit-identical. Reads every value (about a second per GB on a CPU), so
    the comparison runs it once per cell (``restore.json``), not on every ``apply``."""
    import hashlib

    import torch
    h = hashlib.sha256()
    with torch.no_grad():
        for kind, items in (("param", model.named_parameters()), ("buffer", model.named_buffers())):
            for name, t in items:
                h.update(f"{kind}\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
                if t.numel():
                    h.update(t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy())
    return h.hexdigest()
