"""Edits of hidden states and the two context managers that touch a model's sites: ``steer`` and ``observe``.

The one place hooks are registered on a model's sites (:mod:`evenhand.models.sites` names them):
:func:`steer` edits, :func:`observe` reads, and :mod:`.reader` reads in batches on ``observe``. They sit in
the core so that the activation cache reads through them; :mod:`steering.hooks` is their public face."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
import numpy as np
import torch

from .positions import current_answer_tokens
from ..models.sites import SiteError, module, resolve

# One hook mechanism: steer and observe are the only place the intervention path (interventions/, steering/, the
# method plugins in examples/) attaches a hook to a model. Not pyvene's IntervenableModel, because pyvene 0.1.8
# removes every forward and pre-forward hook of the model before each call, its own or not (another edit's, and
# transformers 5's own behind output_hidden_states; see interventions.learned.LoReFT); pyvene stays only as
# LoReFT's module base classes, which register nothing. Not nnsight: the engines decode the Hugging Face model
# itself (the prompt pass and each step of model.generate), where plain forward hooks act without wrapping the
# model, and steer's mark (active_hooks) lets the base class's exact-restore check (no hook left, no parameter
# changed, interventions/model_state.py) tell its hooks from others. (nnsight still reads the study cache,
# evenhand/running/activations.py, outside the intervention path.) tests/test_hook_mechanism.py fails on a hook
# registered, or a pyvene model wrapper, nnsight or pyreft imported, anywhere else on that path;
# test_every_edit_and_read_goes_through_steering_hooks (tests/test_interventions.py) spies on torch's hook
# registration while each editing method fits and decides and fails on a hook registered from any module but
# steering.hooks (or the model's own transformers/torch code).

_MARK = "_evenhand_steering_hook"
_READ_MARK = "_evenhand_reading_hook"
_HALF = (torch.float16, torch.bfloat16)


def _as_tensor(x, name: str, ndim: int) -> torch.Tensor:
    """``x`` (tensor or array-like) as a detached float tensor with ``ndim`` dimensions."""
    t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x, dtype=np.float64))
    if not t.is_floating_point():
        t = t.to(torch.float64)
    if t.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s); got shape {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or infinite values")
    return t


def _compute_dtype(h: torch.Tensor) -> torch.dtype:
    """The dtype an edit computes in: ``h``'s, upcast to float32 for half precision."""
    return torch.float32 if h.dtype in _HALF else h.dtype


def _check_hidden(h: torch.Tensor, d: int, what: str) -> None:
    if not isinstance(h, torch.Tensor) or not h.is_floating_point():
        raise TypeError(f"{what} applies to a floating-point tensor; got {type(h).__name__}"
                        + (f" of dtype {h.dtype}" if isinstance(h, torch.Tensor) else ""))
    if h.ndim == 0 or h.shape[-1] != d:
        raise ValueError(f"{what} has dimension {d} but the hidden state has shape {tuple(h.shape)}")


class _Cast:
    """Per-(device, dtype) copies of an edit's tensors, made once and reused (each generated token)."""

    def __init__(self) -> None:
        self._store: dict[tuple, torch.Tensor] = {}

    def get(self, key: str, t: torch.Tensor, like: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        k = (key, like.device, dtype)
        if k not in self._store:
            self._store[k] = t.to(device=like.device, dtype=dtype)
        return self._store[k]


@dataclass(frozen=True, eq=False)
class Add:
    """``h + alpha * vector`` at every position. ``vector`` is [d]; ``alpha`` 0 leaves ``h`` bit-identical."""

    vector: torch.Tensor
    alpha: float = 1.0
    _cast: _Cast = field(default_factory=_Cast, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vector", _as_tensor(self.vector, "Add.vector", 1))
        if not np.isfinite(float(self.alpha)):
            raise ValueError(f"Add.alpha must be finite; got {self.alpha!r}")

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """Returns a new tensor ``h + alpha * vector`` of ``h``'s dtype and device."""
        _check_hidden(h, self.vector.shape[0], "Add")
        v = self._cast.get("vector", self.vector, h, h.dtype)
        return h + float(self.alpha) * v


@dataclass(frozen=True, eq=False)
class ProjectOut:
    """``h - strength * ((h - mean) . u) u`` with ``u = direction / |direction|`` (``mean`` None means 0).

    ``strength`` 1 removes the component along ``u`` (without ``mean``) or sets it to
    ``mean . u`` (with ``mean``: affine concept editing); 0 is the identity; -1 doubles it.
    Computes in float32 when ``h`` is half precision and returns ``h``'s dtype."""

    direction: torch.Tensor
    mean: torch.Tensor | None = None
    strength: float = 1.0
    _cast: _Cast = field(default_factory=_Cast, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        d = _as_tensor(self.direction, "ProjectOut.direction", 1)
        norm = torch.linalg.vector_norm(d.to(torch.float64))
        if float(norm) == 0.0:
            raise ValueError("ProjectOut.direction has zero norm: it has no direction")
        object.__setattr__(self, "direction", d)
        object.__setattr__(self, "_unit", (d.to(torch.float64) / norm))
        if self.mean is not None:
            m = _as_tensor(self.mean, "ProjectOut.mean", 1)
            if m.shape != d.shape:
                raise ValueError(f"ProjectOut.mean has shape {tuple(m.shape)} but direction has {tuple(d.shape)}")
            object.__setattr__(self, "mean", m)
            object.__setattr__(self, "_offset", (m.to(torch.float64) @ self._unit).reshape(()))
        else:
            object.__setattr__(self, "_offset", torch.zeros((), dtype=torch.float64))
        if not np.isfinite(float(self.strength)):
            raise ValueError(f"ProjectOut.strength must be finite; got {self.strength!r}")

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """Returns a new tensor of ``h``'s dtype and device with the component along ``u`` edited."""
        _check_hidden(h, self.direction.shape[0], "ProjectOut")
        dt = _compute_dtype(h)
        u = self._cast.get("unit", self._unit, h, dt)
        c = self._cast.get("offset", self._offset, h, dt)
        x = h.to(dt)
        coef = (x @ u) - c
        return (x - float(self.strength) * coef.unsqueeze(-1) * u).to(h.dtype)


@dataclass(frozen=True, eq=False)
class Affine:
    """``h + strength * ((h @ matrix.T + bias) - h)``: the affine map ``matrix``/``bias``, interpolated from identity.

    ``matrix`` is [d, d], ``bias`` [d]. Computes in float32 when ``h`` is half precision
    and returns ``h``'s dtype."""

    matrix: torch.Tensor
    bias: torch.Tensor
    strength: float = 1.0
    _cast: _Cast = field(default_factory=_Cast, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        M = _as_tensor(self.matrix, "Affine.matrix", 2)
        b = _as_tensor(self.bias, "Affine.bias", 1)
        if M.shape[0] != M.shape[1]:
            raise ValueError(f"Affine.matrix must be square [d, d]; got shape {tuple(M.shape)}")
        if b.shape[0] != M.shape[0]:
            raise ValueError(f"Affine.bias has length {b.shape[0]} but matrix is {tuple(M.shape)}")
        if not np.isfinite(float(self.strength)):
            raise ValueError(f"Affine.strength must be finite; got {self.strength!r}")
        object.__setattr__(self, "matrix", M)
        object.__setattr__(self, "bias", b)

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """Returns a new tensor of ``h``'s dtype and device: ``h`` moved ``strength`` of the way to the affine image."""
        _check_hidden(h, self.matrix.shape[0], "Affine")
        dt = _compute_dtype(h)
        M = self._cast.get("matrix", self.matrix, h, dt)
        b = self._cast.get("bias", self.bias, h, dt)
        x = h.to(dt)
        return (x + float(self.strength) * ((x @ M.T + b) - x)).to(h.dtype)


POSITIONS = ("all", "prompt", "last", "generated")
"""Where an edit acts: ``all`` positions; the ``prompt``'s positions; the ``last`` prompt token (the decision
token, where :mod:`evenhand.running.activations` reads); the ``generated`` tokens (each step of ``generate`` after the
prompt, and in label scoring the label's teacher-forced tokens, :mod:`evenhand.engine.positions`)."""


@dataclass
class ForwardInfo:
    """What :func:`steer` knows of the forward pass in progress: the KV-cache length it extends (0 for a
    prompt's first pass) and the per-row answer-token counts the engine declared (None: none)."""
    past: int = 0
    answer: tuple[int, ...] | None = None


@dataclass(frozen=True, eq=False)
class AtPositions:
    """``edits`` (one edit or a list, applied in order) at the positions named by ``positions`` only.

    In a forward pass of ``s`` positions whose row ``i`` ends with ``c_i`` answer tokens, positions
    ``< s - c_i`` are the prompt (left padding included), ``s - c_i - 1`` is its last token and the rest
    the answer. A pass that extends a KV cache without declared answer tokens (a generation step) is
    all answer. Other positions keep ``h`` bit for bit. ``all`` applies the edits everywhere."""

    edits: object
    positions: str = "all"

    def __post_init__(self) -> None:
        lst = list(self.edits) if isinstance(self.edits, (list, tuple)) else [self.edits]
        if not lst or not all(callable(e) for e in lst):
            raise TypeError("AtPositions.edits must be an edit (callable on h) or a non-empty list of them")
        if self.positions not in POSITIONS:
            raise ValueError(f"AtPositions.positions must be one of {', '.join(POSITIONS)}; got {self.positions!r}")
        object.__setattr__(self, "edits", lst)

    def mask(self, h: torch.Tensor, info: ForwardInfo | None = None) -> torch.Tensor:
        """Boolean [batch, seq] of the positions edited in ``h`` [batch, seq, d]."""
        if h.ndim != 3:
            raise ValueError(f"AtPositions needs a hidden state [batch, seq, d]; got shape {tuple(h.shape)}")
        info = info or ForwardInfo(answer=current_answer_tokens())
        b, s = h.shape[0], h.shape[1]
        if info.answer is not None:
            if len(info.answer) != b:
                raise ValueError(f"AtPositions: {len(info.answer)} answer-token counts for a batch of {b}")
            counts = torch.tensor(info.answer, device=h.device).clamp(0, s)
        else:
            counts = torch.full((b,), s if info.past > 0 else 0, device=h.device)
        j = torch.arange(s, device=h.device)[None, :]
        start = (s - counts)[:, None]  # the first answer position of each row
        if self.positions == "all":
            return torch.ones(b, s, dtype=torch.bool, device=h.device)
        if self.positions == "prompt":
            return j < start
        if self.positions == "last":
            return j == start - 1
        return j >= start

    def __call__(self, h: torch.Tensor, info: ForwardInfo | None = None) -> torch.Tensor:
        """``h`` with the edits applied at the selected positions (a new tensor)."""
        out = h
        for e in self.edits:
            out = e(out)
        if self.positions == "all":
            return out
        return torch.where(self.mask(h, info)[..., None], out, h)


Edit = Add | ProjectOut | Affine | AtPositions
"""An edit: a frozen dataclass called on a hidden state ``h`` [..., d] (typically [batch, seq, d]); it acts on every
position, returns a new tensor of ``h``'s dtype and device, and never modifies ``h`` in place. :class:`Add`:
activation addition / steering vectors; :class:`ProjectOut` with ``mean``: affine concept editing (ACE, Marshall
et al. 2024), the component along ``u`` set to the mean's; :class:`Affine`: e.g. a LEACE eraser;
:class:`AtPositions`: any of these (or a list) restricted to some positions (:data:`POSITIONS`): every position, the
prompt's, the prompt's last token (the decision token) or the answer's (generated tokens, or the label's
teacher-forced tokens in label scoring)."""


def _apply(edits: Sequence[Callable[[torch.Tensor], torch.Tensor]], h: torch.Tensor,
           info: ForwardInfo | None = None) -> torch.Tensor:
    for e in edits:
        h = e(h, info) if isinstance(e, AtPositions) else e(h)
    return h


def _output_hook(site: str, edits: list, info: ForwardInfo) -> Callable:
    """A forward hook that replaces the module's output (element 0 of a tuple/list output) by the edited one."""

    def hook(mod, args, output):
        if isinstance(output, torch.Tensor):
            return _apply(edits, output, info)
        if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
            return type(output)([_apply(edits, output[0], info), *output[1:]]) if isinstance(output, list) \
                else (_apply(edits, output[0], info), *output[1:])
        raise TypeError(f"steer: site {site!r} returned {type(output).__name__}, not a tensor or a tuple "
                        f"whose first element is a tensor")

    setattr(hook, _MARK, site)
    return hook


def _input_hook(site: str, edits: list, info: ForwardInfo) -> Callable:
    """A forward pre-hook that replaces the module's hidden-state input (first positional or ``hidden_states``)."""

    def hook(mod, args, kwargs):
        if args and isinstance(args[0], torch.Tensor):
            return (_apply(edits, args[0], info), *args[1:]), kwargs
        if isinstance(kwargs.get("hidden_states"), torch.Tensor):
            return args, {**kwargs, "hidden_states": _apply(edits, kwargs["hidden_states"], info)}
        raise TypeError(f"steer: site {site!r}: the module was called without a hidden-state tensor "
                        f"(first positional argument or hidden_states=)")

    setattr(hook, _MARK, site)
    return hook


def _forward_hook(info: ForwardInfo) -> Callable:
    """A forward pre-hook on the whole model that records, per forward pass, the KV-cache length it extends
    and the answer-token counts the engine declared (:mod:`evenhand.engine.positions`)."""

    def hook(mod, args, kwargs):
        past = kwargs.get("past_key_values")
        length = past.get_seq_length() if past is not None and hasattr(past, "get_seq_length") else 0
        info.past = int(length)
        info.answer = current_answer_tokens()

    setattr(hook, _MARK, "<model>")
    return hook


def _normalise(model, edits: Mapping[str, Edit | Sequence[Edit]]) -> list[tuple[str, object, list]]:
    """Validate every site name and edit before anything is registered; returns (name, Site, edits)."""
    if not isinstance(edits, Mapping):
        raise TypeError(f"edits must be a dict of site name -> edit(s); got {type(edits).__name__}")
    plan = []
    for name, e in edits.items():
        site = resolve(model, name)  # SiteError for an unknown site or a layer out of range
        lst = list(e) if isinstance(e, (list, tuple)) else [e]
        if not lst:
            raise ValueError(f"edits[{name!r}] is an empty list")
        for x in lst:
            if not callable(x):
                raise TypeError(f"edits[{name!r}] holds {type(x).__name__}, which is not an edit (callable on h)")
        if site.port not in ("output", "input"):
            raise SiteError(f"site {name!r} has unknown port {site.port!r}")
        plan.append((name, site, lst))
    return plan


@contextmanager
def steer(model, edits: Mapping[str, Edit | Sequence[Edit]]) -> Iterator[None]:
    """Apply ``edits`` (site name -> edit or list of edits, applied in order; sites named in the vocabulary of
    :mod:`evenhand.models.sites`) inside a ``with`` block.

    Registers one forward hook per site (a forward pre-hook for ``resid_pre``, whose port
    is the decoder layer's input) that replaces the hidden state at every position, in the
    prompt's forward pass and in each step of ``model.generate`` (an :class:`AtPositions` edit
    restricts itself to some positions; then a forward pre-hook on ``model`` records, per pass,
    whether it extends a KV cache and the answer-token counts the engine declared). Site names and edits are
    all validated before any hook is registered; every hook is removed on exit, also when
    the block raises. Hooks are *prepended*, so observers registered on the same module
    (Hugging Face's ``output_hidden_states`` capture, activation caches) see the edited
    value; as a consequence, in nested ``steer`` blocks on the same site the inner edit
    runs first. Yields nothing.
    """
    plan = _normalise(model, edits)
    handles = []
    info = ForwardInfo()
    try:
        if any(isinstance(x, AtPositions) and x.positions != "all" for _, _, lst in plan for x in lst):
            handles.append(model.register_forward_pre_hook(_forward_hook(info), with_kwargs=True, prepend=True))
        for name, site, lst in plan:
            mod = module(model, site)
            if site.port == "input":
                handles.append(mod.register_forward_pre_hook(_input_hook(name, lst, info), with_kwargs=True,
                                                             prepend=True))
            else:
                handles.append(mod.register_forward_hook(_output_hook(name, lst, info), prepend=True))
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def observe(model, sites: Sequence[str], take: Callable[[torch.Tensor], torch.Tensor] | None = None
            ) -> Iterator[dict[str, list[torch.Tensor]]]:
    """Record ``take(h)`` (default ``h``, detached) of each site's hidden state at every forward pass inside a
    ``with`` block; yields site name -> the list of recorded values, one appended per pass.

    The read-only counterpart of :func:`steer`, and with it the one place an intervention registers hooks: a
    forward hook (a forward pre-hook for an input-port site such as ``resid_pre``) per site, *appended*, so
    inside a ``steer`` block it records the edited value. Sites are resolved before any hook is registered;
    every hook is removed on exit, also when the block raises. The model's hidden states are not changed. The
    methods read their training activations with it."""
    resolved = [(name, resolve(model, name)) for name in sites]
    record: dict[str, list[torch.Tensor]] = {name: [] for name, _ in resolved}
    take = take or (lambda h: h)

    def output_reader(name: str) -> Callable:
        def hook(mod, args, output):
            record[name].append(take((output if isinstance(output, torch.Tensor) else output[0]).detach()))
        setattr(hook, _READ_MARK, name)
        return hook

    def input_reader(name: str) -> Callable:
        def hook(mod, args, kwargs):
            h = args[0] if args and isinstance(args[0], torch.Tensor) else kwargs.get("hidden_states")
            record[name].append(take(h.detach()))
        setattr(hook, _READ_MARK, name)
        return hook

    handles = []
    try:
        for name, site in resolved:
            mod = module(model, site)
            if site.port == "input":
                handles.append(mod.register_forward_pre_hook(input_reader(name), with_kwargs=True))
            else:
                handles.append(mod.register_forward_hook(output_reader(name)))
        yield record
    finally:
        for h in handles:
            h.remove()


def active_hooks(model) -> int:
    """Returns how many hooks registered by :func:`steer` or :func:`observe` are currently attached anywhere in
    ``model``."""
    n = 0
    for mod in model.modules():
        for d in (mod._forward_hooks, mod._forward_pre_hooks):
            n += sum(1 for fn in d.values() if hasattr(fn, _MARK) or hasattr(fn, _READ_MARK))
    return n
