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


CHUNK = 1 << 22  # elements per step of :func:`tensor_checksums` (32 MiB of int64 on the device)


def tensor_checksums(tensors: list) -> "list[tuple[int, int]]":
    """Per tensor, ``(sum of x, sum of (i + 1) * x)`` over its elements ``x`` read as signed integers of their
    width (the raw bits: an int16 per bfloat16) with ``i`` the flat index, in wrapping int64 arithmetic.

    Computed on the tensor's device in chunks of :data:`CHUNK` elements; only the two numbers per tensor come
    back to the host (one transfer). Integer sums are exact and independent of the order of summation, so equal
    weights give equal checksums on any device, and any change to one element (one bit of it) changes the first
    sum; changes to several elements go unseen only if both sums cancel exactly."""
    import torch
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    out = []
    with torch.no_grad():
        for t in tensors:
            flat = t.detach().contiguous().reshape(-1)
            if flat.dtype == torch.bool:
                flat = flat.to(torch.uint8)
            if flat.is_floating_point() or flat.is_complex():  # the raw bits; bytes for widths without an int
                flat = flat.view(ints[flat.element_size()]) if flat.element_size() in ints else flat.view(torch.uint8)
            s1 = torch.zeros((), dtype=torch.int64, device=flat.device)
            s2 = torch.zeros((), dtype=torch.int64, device=flat.device)
            w = torch.arange(1, min(CHUNK, flat.numel()) + 1, dtype=torch.int64, device=flat.device)
            for i in range(0, flat.numel(), CHUNK):
                x = flat[i:i + CHUNK].to(torch.int64)
                xs = x.sum()
                s1 += xs
                s2 += (x * w[:x.numel()]).sum() + i * xs
            out.append(torch.stack([s1, s2]))
    host = torch.stack([o.to(out[0].device) for o in out]).cpu().tolist() if out else []
    return [(a, b) for a, b in host]


def weights_digest(model) -> str:
    """The sha256 of every parameter's and buffer's name, dtype and shape and of its two integer checksums
    (:func:`tensor_checksums`, computed on the device): equal digests mean the same tensors with, but for an
    exactly cancelling change to several elements, the same bits; a change to any one element always shows.
    Nothing but two numbers per tensor leaves the device (the old digest copied every byte to the host and
    hashed it: 24 GB per comparison cell at 12B), so the comparison runs it once per cell (``restore.json``)."""
    import hashlib
    h = hashlib.sha256()
    named = [(kind, name, t) for kind, items in (("param", model.named_parameters()), ("buffer", model.named_buffers()))
             for name, t in items]
    for (kind, name, t), (s1, s2) in zip(named, tensor_checksums([t for _, _, t in named])):
        h.update(f"{kind}\0{name}\0{t.dtype}\0{tuple(t.shape)}\0{s1}\0{s2}\0".encode())
    return h.hexdigest()
